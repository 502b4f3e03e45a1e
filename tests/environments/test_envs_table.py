"""render_table: deterministic, marked as generated, and complete."""

from __future__ import annotations

from stalwart.environments import (
    DEVICE_TYPES,
    FRAMEWORKS,
    GENERATED_MARKER,
    Manifest,
    render_table,
)


def test_render_is_deterministic_and_marked(manifest: Manifest) -> None:
    text = render_table(manifest)
    assert text == render_table(manifest)
    assert GENERATED_MARKER in text.split("\n", 1)[0]
    assert text.endswith("\n")


def test_every_default_and_every_image_is_listed(manifest: Manifest) -> None:
    text = render_table(manifest)
    for framework in FRAMEWORKS:
        for device in DEVICE_TYPES:
            assert f"`{manifest.default_image(framework, device)[1]}`" in text
    for row in manifest.rows():
        assert f"| `{row.family}` |" in text
        assert f"`{row.image}`" in text
    assert f"Environments tag: `{manifest.environments_tag}`" in text


def test_a_new_tag_changes_the_table(manifest: Manifest) -> None:
    moved = manifest.model_copy(update={"environments_tag": "abc1234"})
    assert render_table(moved) != render_table(manifest)
    assert "pytorch-ngc-dev:abc1234" in render_table(moved)
