"""The container directory: model definition download and safe extraction (real .tar.gz,
malicious ones included), info files, the task environment and the choice of Python."""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
from pathlib import Path

import httpx
import pytest

from stalwart.agent.context import (
    ContextError,
    UnsafeArchiveError,
    extract_context,
    fetch_context,
)
from stalwart.agent.protocol import TaskSpec
from stalwart.agent.settings import PythonMapping
from stalwart.agent.workspace import (
    REPORTS_MAX_BYTES,
    choose_python,
    container_dir,
    prepare_workspace,
    python_executable,
    read_reports,
    remove_workspace,
)
from stalwart.errors import InvalidArgumentError
from tests.agent.conftest import Master, task_spec
from tests.master.test_allocations_api import TrialEnv


def tgz(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, data


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def special(name: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info, None


def test_extracts_files_dirs_modes_and_inside_links(tmp_path: Path) -> None:
    sub = tarfile.TarInfo("pkg")
    sub.type = tarfile.DIRTYPE
    sub.mode = 0o755
    blob = tgz(
        file("train.py", b"print('hi')\n"),
        (sub, None),
        file("pkg/run.sh", b"#!/bin/sh\n", 0o755),
        link("pkg/alias.py", "../train.py"),
        link("copy.py", "train.py", tarfile.LNKTYPE),
    )
    names = extract_context(blob, tmp_path / "w")
    assert names == ["train.py", "pkg", "pkg/run.sh", "pkg/alias.py", "copy.py"]
    assert (tmp_path / "w/pkg/alias.py").read_text() == "print('hi')\n"
    assert (tmp_path / "w/copy.py").read_text() == "print('hi')\n"
    assert os.access(tmp_path / "w/pkg/run.sh", os.X_OK)
    assert extract_context(b"", tmp_path / "empty") == []
    assert (tmp_path / "empty").is_dir()


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (file("../evil.py"), "unsafe path"),
        (file("/tmp/evil.py"), "unsafe path"),
        (file("a/../../evil.py"), "unsafe path"),
        (link("passwd", "/etc/passwd"), "points outside"),
        (link("up", "../../outside"), "points outside"),
        (link("hard", "../outside", tarfile.LNKTYPE), "points outside"),
        (special("fifo", tarfile.FIFOTYPE), "special file"),
        (special("dev", tarfile.CHRTYPE), "special file"),
    ],
)
def test_unsafe_archives_extract_nothing(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes | None], message: str
) -> None:
    dest = tmp_path / "w"
    with pytest.raises(UnsafeArchiveError, match=message):
        extract_context(tgz(file("ok.py"), member), dest)
    assert list(dest.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]


def test_a_link_that_escapes_through_another_link_is_refused(tmp_path: Path) -> None:
    dest = tmp_path / "w"
    # "p" -> "." makes "p/s" -> "../escape" look inside but land outside.
    with pytest.raises(UnsafeArchiveError):
        extract_context(tgz(link("p", "."), link("p/s", "../escape")), dest)
    assert not (tmp_path / "escape").exists()
    assert not (dest / "s").exists()


def test_garbage_is_a_context_error(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="cannot extract"):
        extract_context(b"not a tarball", tmp_path / "w")


def test_fetch_from_the_master(master: Master, trial: TrialEnv) -> None:
    with httpx.Client() as http:
        blob = fetch_context(http, master.url, trial.task_id, trial.token)
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            assert tar.getnames() == ["train.py"]
        with pytest.raises(ContextError, match="HTTP 401"):
            fetch_context(http, master.url, trial.task_id, "wrong")


def prepare(
    spec: TaskSpec, home: Path, blob: bytes = b"", **base: str
) -> tuple[Path, dict[str, str]]:
    workspace = prepare_workspace(
        spec,
        home=home,
        master_url="http://10.1.2.3:8080",
        agent_id="agent-7",
        fetch=lambda _spec: blob,
        python=Path(sys.executable),
        base_env={"PATH": "/usr/bin:/bin", "HOME": "/home/u", **base},
    )
    assert workspace.root == container_dir(home, spec.allocation_id, spec.rank)
    return workspace.root, workspace.env


def test_prepare_writes_info_files_workdir_and_environment(tmp_path: Path, trial: TrialEnv) -> None:
    spec = task_spec(
        trial,
        "",
        rank=1,
        env={"DET_TASK_ID": trial.task_id, "DET_MASTER": "http://wrong", "HOME": "/task"},
        info_files={"cluster.json": json.dumps({"master_url": "", "agent_id": "agent-7"})},
        has_context=True,
        slot_ids=["2", "3"],
        device_type="cuda",
    )
    blob = tgz(file("train.py", b"print('hi')\n"))
    root, env = prepare(
        spec, tmp_path, blob, STALWART_AGENT_TOKEN="secret", VIRTUAL_ENV="/other/venv"
    )
    assert root == tmp_path / "tasks" / trial.allocation_id / "rank-1"
    run_dir, workdir = root / "run", root / "workdir"
    assert (run_dir.stat().st_mode & 0o777, (run_dir / "info").stat().st_mode & 0o777) == (
        0o700,
        0o755,
    )
    cluster = json.loads((run_dir / "info/cluster.json").read_text())
    assert cluster == {"master_url": "http://10.1.2.3:8080", "agent_id": "agent-7"}
    assert (workdir / "train.py").read_text() == "print('hi')\n"
    bin_dir = str(Path(sys.executable).parent)
    expected = {
        "DET_TASK_ID": trial.task_id,
        "DET_MASTER": "http://10.1.2.3:8080",
        "DET_MASTER_HOST": "10.1.2.3",
        "DET_MASTER_ADDR": "10.1.2.3",
        "DET_MASTER_PORT": "8080",
        "DET_AGENT_ID": "agent-7",
        "DET_RUN_DIR": str(run_dir),
        "DET_WORKDIR": str(workdir),
        "STALWART_REPORTS_SPOOL": str(run_dir / "reports"),
        "PYTHONUNBUFFERED": "1",
        "DET_PYTHON_EXECUTABLE": sys.executable,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": "/task",
        "CUDA_VISIBLE_DEVICES": "2,3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    assert {k: env.get(k) for k in expected} == expected
    assert "STALWART_AGENT_TOKEN" not in env
    assert env.get("VIRTUAL_ENV") != "/other/venv"
    assert (run_dir / "reports").is_dir()  # the spool the harness writes into

    # Preparing again starts from scratch; removing deletes the allocation's directory.
    (workdir / "stale.txt").write_text("old")
    prepare(spec, tmp_path, blob)
    assert not (workdir / "stale.txt").exists()
    remove_workspace(tmp_path, trial.allocation_id, 1)
    assert not (tmp_path / "tasks" / trial.allocation_id).exists()


def report(step: int) -> dict[str, object]:
    return {"group": "validation", "metrics": {"trialId": 1, "stepsCompleted": step}}


def test_the_reports_spool_is_read_whole_files_oldest_first(tmp_path: Path) -> None:
    spool = tmp_path / "reports"
    assert read_reports(tmp_path) == ([], [])  # no spool: nothing, quietly
    spool.mkdir()
    (spool / "reports-b.json").write_text(json.dumps({"reports": [report(1), report(2)]}))
    os.utime(spool / "reports-b.json", ns=(1, 1))
    (spool / "reports-a.json").write_text(json.dumps({"reports": [report(3)]}))
    (spool / ".reports-c.json").write_text("{")  # still being written: not read
    (spool / "reports-d.json").write_text("[1, 2]")
    reports, problems = read_reports(tmp_path)
    assert reports == [report(1), report(2), report(3)]
    assert problems == [
        "metrics reports in reports-d.json could not be read: not a metrics batch body"
    ]


def test_the_reports_spool_is_read_up_to_a_bound(tmp_path: Path) -> None:
    spool = tmp_path / "reports"
    spool.mkdir()
    (spool / "reports-a.json").write_text(json.dumps({"reports": [report(1)]}))
    (spool / "reports-b.json").write_bytes(b" " * REPORTS_MAX_BYTES)
    reports, problems = read_reports(tmp_path)
    assert reports == [report(1)]
    assert problems == [
        f"metrics reports in reports-b.json not sent: the spool holds more than "
        f"{REPORTS_MAX_BYTES} bytes"
    ]


def test_bad_names_are_refused(tmp_path: Path, trial: TrialEnv) -> None:
    with pytest.raises(InvalidArgumentError):
        container_dir(tmp_path, "../x", 0)
    spec = task_spec(trial, "", info_files={"../evil.json": "{}"})
    with pytest.raises(InvalidArgumentError, match="info file name"):
        prepare(spec, tmp_path)


def test_choose_python(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to(sys.executable)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    exe = tmp_path / "py311"
    exe.symlink_to(sys.executable)
    mappings = [
        PythonMapping(pattern="determinedai/pytorch-*", path=venv),
        PythonMapping(pattern="*tensorflow*", path=exe),
    ]
    default = Path("/usr/bin/python3")
    assert choose_python("determinedai/pytorch-ngc:0.38.1", mappings, default) == (
        venv / "bin" / "python3"
    )
    assert choose_python("x/tensorflow-cpu:2", mappings, default) == exe
    assert choose_python("", mappings, default) == default
    assert python_executable(exe) == exe
    with pytest.raises(InvalidArgumentError, match="no bin/python3"):
        python_executable(tmp_path)
    spec = TaskSpec(
        allocation_id="a.1", task_id="a", rank=0, container_id="c", argv=["x"], token="t"
    )
    env = prepare_workspace(
        spec,
        home=tmp_path / "home",
        master_url="http://m:1",
        agent_id="a",
        fetch=lambda _spec: b"",
        python=venv / "bin" / "python3",
        base_env={},
    ).env
    assert env["VIRTUAL_ENV"] == str(venv)
    assert env["PATH"].split(os.pathsep)[0] == str(venv / "bin")
