"""The generated JSON Schema and config reference are current and describe every field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stalwart.config.schema import artifacts, experiment_json_schema, main

ROOT = Path(__file__).parents[2]


def test_committed_generated_files_are_current() -> None:
    for path, content in artifacts(ROOT).items():
        assert path.exists(), f"{path} is missing: run `make schema`"
        assert path.read_text(encoding="utf-8") == content, f"{path} is stale: run `make schema`"


def test_every_property_has_a_description() -> None:
    schema = experiment_json_schema()
    missing: list[str] = []

    def visit(name: str, frag: dict[str, Any]) -> None:
        for key, prop in frag.get("properties", {}).items():
            if not prop.get("description"):
                missing.append(f"{name}.{key}")

    visit("ExperimentConfig", schema)
    for name, frag in schema["$defs"].items():
        visit(name, frag)
    assert missing == []


def test_schema_forbids_unknown_keys_and_knows_defaults() -> None:
    schema = experiment_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["max_restarts"]["default"] == 5
    assert schema["properties"]["min_validation_period"]["default"] == {"batches": 0}


def test_check_mode_reports_stale_files(tmp_path: Path) -> None:
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert main(["--root", str(tmp_path), "--write"]) == 0
    assert main(["--root", str(tmp_path), "--check"]) == 0
