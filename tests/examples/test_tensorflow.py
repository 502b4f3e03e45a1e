"""The TensorFlow example (``examples/tensorflow``): its configs and the images they get.

TensorFlow is not installed in the test environment (it is large), so the Keras script is not
run; what is checked is what the example is about: the pin, what ``stalwart envs resolve``
says with and without it (the README's console blocks are compared with the real output), and
the image the master gives each config when an experiment is created.
"""

from __future__ import annotations

import re
import shlex

import pytest
import yaml

from stalwart.client import Client
from stalwart.environments import detect_frameworks, load_manifest
from tests.examples.conftest import EXAMPLES
from tests.examples.test_configs import exit_code

TENSORFLOW = EXAMPLES / "tensorflow"
CONSOLE_BLOCK = re.compile(r"```console\n\$ (?P<command>[^\n]+)\n(?P<output>.*?)```", re.DOTALL)


def _tensorflow_images() -> dict[str, str]:
    manifest = load_manifest()
    return {device: manifest.default_image("tensorflow", device)[1] for device in ("cpu", "cuda")}


def test_the_readme_shows_what_envs_resolve_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = list(CONSOLE_BLOCK.finditer((TENSORFLOW / "README.md").read_text(encoding="utf-8")))
    assert len(blocks) == 3
    monkeypatch.chdir(TENSORFLOW)
    for block in blocks:
        program, *args = shlex.split(block["command"])
        assert program == "stalwart"
        capsys.readouterr()
        code = exit_code(args)
        out, err = capsys.readouterr()
        assert code == 0, f"{block['command']}: {err}"
        assert out == block["output"], block["command"]


def test_const_pins_the_tensorflow_images_and_unpinned_is_the_same_without() -> None:
    pinned = yaml.safe_load((TENSORFLOW / "const.yaml").read_text(encoding="utf-8"))
    unpinned = yaml.safe_load((TENSORFLOW / "unpinned.yaml").read_text(encoding="utf-8"))
    assert pinned["environment"] == {"image": _tensorflow_images()}
    same = {key: value for key, value in pinned.items() if key not in ("name", "environment")}
    assert unpinned == same | {"name": unpinned["name"]}


def test_the_script_imports_tensorflow_and_not_pytorch() -> None:
    scan = detect_frameworks(TENSORFLOW)
    assert scan.frameworks == frozenset({"tensorflow"})
    assert not scan.notes  # every file parsed


def test_the_master_gives_both_configs_the_tensorflow_image(client: Client) -> None:
    """Created paused (nothing runs): the defaulted config of each names the TensorFlow image,
    pinned by ``const.yaml``, picked from the model's imports for ``unpinned.yaml``."""
    for name in ("const.yaml", "unpinned.yaml"):
        exp = client.create_experiment(TENSORFLOW / name, TENSORFLOW, activate=False)
        try:
            image = exp.config["environment"]["image"]
            assert {device: image[device] for device in ("cpu", "cuda")} == _tensorflow_images()
            imports = [n for n in exp.notices if "the model imports TensorFlow" in n]
            assert len(imports) == (0 if name == "const.yaml" else 1), exp.notices
        finally:
            exp.kill()
