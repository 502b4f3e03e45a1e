"""Checkpoint file globs as Determined applies them (Python's recursive ``glob`` inside the
checkpoint directory); the calls themselves are tested with the official client in
tests/compat/test_det_checkpoint_files.py."""

from __future__ import annotations

import pytest

from stalwart.errors import InvalidArgumentError
from stalwart.master.services.checkpoint_files import check_globs, glob_matches


@pytest.mark.parametrize(
    ("rel", "glob", "matches"),
    [
        ("notes.txt", "*.txt", True),
        ("model/notes.txt", "*.txt", False),  # one segment only
        ("model/notes.txt", "**/*.txt", True),
        ("notes.txt", "**/*.txt", True),  # ** spans zero segments too
        ("model/", "model", True),
        ("model/a/b.pt", "model/**", True),
        ("model/a/b.pt", "**/*", True),
        (".hidden", "*", False),  # wildcards skip hidden names, as glob does
        (".hidden", ".h*", True),
        ("state.json", "state.json", True),
        ("state.json", "State.json", False),
    ],
)
def test_glob_matches(rel: str, glob: str, matches: bool) -> None:
    assert glob_matches(rel, glob) is matches


@pytest.mark.parametrize(
    ("glob", "message"), [("", "empty"), ("../x", "'..'"), ("/etc", "relative")]
)
def test_unsafe_globs_are_refused(glob: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        check_globs(["ok", glob])
