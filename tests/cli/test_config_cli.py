"""``stalwart config check`` and ``stalwart config show`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from stalwart.cli.main import main

EXAMPLES = Path(__file__).parents[2] / "examples"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code: int = 0
    try:
        main([*args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def test_check_all_examples_pass(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in EXAMPLES.glob("*/*.yaml"))
    code, out, err = run(capsys, "config", "check", *files)
    assert code == 0, err
    assert out.count(": ok") == len(files)


def test_check_reports_each_problem_on_one_line_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("entrypoint: x\nsearcher:\n  name: single\n  metric: loss\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "entrypoint: x\nsearcher:\n  name: random\n  metric: loss\n  max_trials: 0\n"
        "resources:\n  slots_per_trail: 1\n"
    )
    code, out, err = run(capsys, "config", "check", str(good), str(bad))
    assert code == 1
    assert f"{good}: ok" in out
    lines = err.strip().splitlines()
    assert f"{bad}: <config>.searcher.max_trials (line 5): must be >= 1 (got 0)" in lines
    assert any(
        line.startswith(f"{bad}: <config>.resources.slots_per_trail (line 7): unknown key")
        and "did you mean 'slots_per_trial'?" in line
        for line in lines
    )
    assert lines[-1] == "invalid: 1 of 2 file(s)"


def test_check_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "config", "check", str(tmp_path / "nope.yaml"))
    assert code == 1
    assert "cannot read the file" in err


def test_show_prints_the_defaulted_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config", "show", str(EXAMPLES / "core_api/3_hpsearch.yaml"))
    assert code == 0
    shown = yaml.safe_load(out)
    assert shown["searcher"]["smaller_is_better"] is True
    assert shown["resources"]["slots_per_trial"] == 1
    assert shown["hyperparameters"]["batches"] == {"type": "const", "val": 100}


def test_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "config", "show", "--json", str(EXAMPLES / "core_api/3_hpsearch.yaml")
    )
    assert code == 0
    shown = json.loads(out)
    assert shown["searcher"]["max_rungs"] == 5


def test_show_with_a_template(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    template = tmp_path / "tpl.yaml"
    template.write_text(
        "description: from the template\nresources:\n  resource_pool: gpus\n"
        "checkpoint_storage:\n  type: shared_fs\n  host_path: /mnt/ckpt\n"
    )
    code, out, _ = run(
        capsys, "config", "show", "-t", str(template), str(EXAMPLES / "core_api/1_metrics.yaml")
    )
    assert code == 0
    shown = yaml.safe_load(out)
    assert shown["description"] == "from the template"
    assert shown["resources"]["resource_pool"] == "gpus"
    assert shown["checkpoint_storage"]["host_path"] == "/mnt/ckpt"


def test_show_an_invalid_config_prints_one_error_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("entrypoint: x\nsearcher:\n  name: pbt\n  metric: loss\n")
    code, _, err = run(capsys, "config", "show", str(bad))
    assert code == 1
    assert err.startswith("error:")
    assert "pbt was removed; use adaptive_asha" in err
    assert "Traceback" not in err
