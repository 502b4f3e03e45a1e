#!/usr/bin/env python3
"""Capture real Slurm outputs into tests/slurm/fixtures (run against scripts/slurm/setup.sh's
single-node Slurm; takes about two minutes, most of it waiting for a job's time limit).

Every file is the verbatim stdout (``NAME.stdout``) or stderr (``NAME.stderr``) of a command
built by :mod:`stalwart.hpc.slurm.commands`; ``index.json`` records each command's argv and exit
status, the Slurm version, and which job id played which part (``jobs``), so tests can assert
on the real ids. Jobs are left in the states the tests expect:

completed, failed (exit 3), cancelled (while running), timeout (--time=1), running, pending
(Resources), held (JobHeldUser), dependency (then DependencyNeverSatisfied), preempted and
requeued (a debug job preempted by an urgent one), node_fail (node set DOWN under it), and sbatch
rejections (unknown partition, a bad --time); too_many_nodes is accepted by sbatch but pends
forever (PartitionConfig). Run it with STALWART_SLURM_FAKE_GPUS=2 so sinfo shows GRES and the
``gpu`` job gets a (fake) GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from stalwart.hpc.slurm import commands  # noqa: E402

OUT = ROOT / "tests" / "slurm" / "fixtures"
WORK = Path("/tmp/stalwart-slurm-capture")
index: dict[str, object] = {"commands": {}, "jobs": {}}


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def capture(name: str, argv: list[str]) -> str:
    done = run(argv)
    (OUT / f"{name}.stdout").write_text(done.stdout)
    if done.stderr:
        (OUT / f"{name}.stderr").write_text(done.stderr)
    index["commands"][name] = {"argv": argv, "returncode": done.returncode}  # type: ignore[index]
    print(f"captured {name} (rc={done.returncode})")
    return done.stdout


def submit(role: str, *args: str) -> str:
    done = run(
        [
            "sbatch",
            "--parsable",
            f"--job-name=stalwart-{role}",
            f"--chdir={WORK}",
            f"--output={WORK}/%j.out",
            *args,
        ]
    )
    if done.returncode != 0:
        raise SystemExit(f"sbatch for {role} failed: {done.stderr}")
    job_id = done.stdout.strip().split(";")[0]
    index["jobs"][role] = job_id  # type: ignore[index]
    return job_id


def state(job_id: str) -> str:
    out = run(["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%T"]).stdout
    if out.strip():
        return out.strip()
    # slurmctld forgot it (MinJobAge): the job completion file has its last record.
    argv = ["sacct", "--completion", "--noheader", "--parsable2", "--format=State", f"-j{job_id}"]
    lines = run(argv).stdout.split()
    return lines[-1] if lines else ""


def wait_for(job_id: str, *wanted: str, timeout: float = 150) -> str:
    deadline = time.monotonic() + timeout
    current = ""
    while time.monotonic() < deadline:
        current = state(job_id)
        if current in wanted:
            return current
        time.sleep(0.3)
    raise SystemExit(f"job {job_id} is {current!r}, not one of {wanted}, after {timeout}s")


def squeue(name: str) -> None:
    capture(name, commands.squeue_argv("root"))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.std*"):
        old.unlink()
    index["slurm_version"] = run(["sinfo", "--version"]).stdout.strip()
    capture("scontrol_show_config", ["scontrol", "show", "config"])
    capture("sinfo_idle", commands.sinfo_argv())

    timeout = submit("timeout", "--time=1", "--wrap=sleep 600")
    completed = submit("completed", "--wrap=true")
    failed = submit("failed", "--wrap=exit 3")
    wait_for(completed, "COMPLETED")
    wait_for(failed, "FAILED")
    running = submit("running", "--wrap=sleep 600")
    wait_for(running, "RUNNING")
    pending = submit("pending", "--wrap=sleep 2")
    held = submit("held", "--hold", "--wrap=true")
    dependency = submit("dependency", f"--dependency=afterok:{running}", "--wrap=true")
    time.sleep(1.5)
    squeue("squeue_mixed")
    capture("scontrol_show_job_all", commands.scontrol_show_job_argv())
    capture("scontrol_show_job_pending", commands.scontrol_show_job_argv(pending))
    capture("sinfo_busy", commands.sinfo_argv())

    capture("scancel_running", commands.scancel_argv([running]))
    wait_for(running, "CANCELLED")
    wait_for(pending, "RUNNING", "COMPLETED")
    time.sleep(1.5)
    squeue("squeue_after_cancel")
    capture("scancel_held_dependency", commands.scancel_argv([held, dependency]))
    capture("scancel_finished", commands.scancel_argv([completed]))
    capture("scontrol_show_job_unknown", commands.scontrol_show_job_argv("999999"))

    for role, args in {
        "bad_partition": ["--partition=nosuch"],
        "bad_time": ["--time=soon"],
    }.items():
        capture(f"sbatch_{role}", ["sbatch", "--parsable", *args, "--wrap=true"])
    # Accepted, but can never run (EnforcePartLimits=NO): PENDING with reason PartitionConfig.
    too_big = submit("too_many_nodes", "--nodes=5", "--wrap=true")
    capture(
        "sbatch_ok",
        [
            "sbatch",
            "--parsable",
            "--job-name=stalwart-sbatch-ok",
            "--wrap=true",
            f"--output={WORK}/%j.out",
        ],
    )
    capture(
        "sbatch_plain",
        ["sbatch", "--job-name=stalwart-sbatch-plain", "--wrap=true", f"--output={WORK}/%j.out"],
    )
    gpus = submit("gpu", "--gpus-per-node=1", "--wrap=true")

    wait_for(timeout, "TIMEOUT")
    squeue("squeue_after_timeout")
    run(commands.scancel_argv([too_big]))
    wait_for(gpus, "COMPLETED", "FAILED")

    # Preemption: a requeueable debug job that takes every CPU, then an urgent one.
    cpus = run(["nproc", "--all"]).stdout.strip()
    preempted = submit("preempted", "--requeue", f"--cpus-per-task={cpus}", "--wrap=sleep 600")
    wait_for(preempted, "RUNNING")
    urgent = submit("urgent", "--partition=urgent", f"--cpus-per-task={cpus}", "--wrap=sleep 3")
    seen = set()
    for i in range(40):
        now = state(preempted)
        if now not in seen:
            seen.add(now)
            squeue(f"squeue_preempt_{i:02d}_{now.lower()}")
        if now == "RUNNING" and len(seen) > 1:
            break
        time.sleep(0.25)
    wait_for(urgent, "COMPLETED")
    wait_for(preempted, "RUNNING")
    squeue("squeue_requeued_running")
    capture("scontrol_show_job_requeued", commands.scontrol_show_job_argv(preempted))
    capture("scancel_requeued", commands.scancel_argv([preempted]))
    wait_for(preempted, "CANCELLED")

    # Node failure: a non-requeueable job on a node that goes DOWN.
    node = run(["hostname", "-s"]).stdout.strip()
    node_fail = submit("node_fail", "--no-requeue", "--wrap=sleep 600")
    wait_for(node_fail, "RUNNING")
    run(["scontrol", "update", f"nodename={node}", "state=down", "reason=capture"])
    try:
        wait_for(node_fail, "NODE_FAIL", timeout=30)
        squeue("squeue_node_fail")
    finally:
        run(["scontrol", "update", f"nodename={node}", "state=resume"])
    run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=capture"])
    try:
        capture("sinfo_drained", commands.sinfo_argv())
    finally:
        run(["scontrol", "update", f"nodename={node}", "state=resume"])

    all_ids = [str(v) for v in index["jobs"].values()]  # type: ignore[attr-defined]
    time.sleep(1)
    capture("sacct_completion", commands.sacct_argv(all_ids, completion=True))
    capture("sacct_no_dbd", commands.sacct_argv(all_ids, completion=False))
    capture("squeue_final", commands.squeue_argv("root"))
    (OUT / "index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"fixtures written to {OUT}")


if __name__ == "__main__":
    main()
