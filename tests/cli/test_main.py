"""The root of the ``stalwart`` command: every noun is reachable, and an invocation imports
only the noun it runs (a master or an agent start does not load the SDK and the other
nouns: half a second of CPU each, paid by every daemon start)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stalwart.cli.main import _COMMANDS, _GROUPS, main


def _loaded_after(code: str) -> tuple[str, set[str]]:
    """Run ``code`` in a fresh interpreter: its output, and the ``stalwart.cli`` and
    ``stalwart.client`` modules imported by then."""
    probe = (
        f"{code}\n"
        "import sys\n"
        "prefixes = ('stalwart.cli.', 'stalwart.client')\n"
        "print('LOADED', ' '.join(m for m in sys.modules if m.startswith(prefixes)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out, _, loaded = done.stdout.rpartition("LOADED")
    return out, set(loaded.split())


@pytest.mark.parametrize("noun", ["master", "agent"])
def test_a_daemon_start_imports_its_noun_only(noun: str) -> None:
    """What ``stalwart NOUN`` imports is what the noun's own module needs, never the SDK."""
    run = f"from stalwart.cli.main import main\ntry:\n    main(['--debug', {noun!r}, '--help'])\n"
    out, loaded = _loaded_after(run + "except SystemExit:\n    pass")
    assert f" {noun} [OPTIONS]" in out  # its own help
    _, needed = _loaded_after(f"import stalwart.cli.main, stalwart.cli.{noun}")
    assert loaded <= needed, sorted(loaded - needed)
    assert not [m for m in loaded if m.startswith("stalwart.client")], sorted(loaded)
    everything = {f"stalwart.cli.{module}" for module, _, _ in _GROUPS.values()}
    assert len(loaded & everything) < len(everything) / 4, sorted(loaded)


@pytest.mark.parametrize("argv", [["--help"], ["--help", "master"]])
def test_the_root_help_lists_every_noun_and_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    shown = capsys.readouterr().out
    hidden = {name for name, (_, _, is_hidden) in _GROUPS.items() if is_hidden}
    for name in [*_GROUPS, *_COMMANDS]:
        assert (f" {name} " in shown) is (name not in hidden), name


def test_a_misspelt_noun_is_answered_with_the_nearest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["-m", "http://127.0.0.1:1", "experimnt", "list"])
    assert exited.value.code == 2
    assert "Did you mean 'experiment'?" in capsys.readouterr().err
