"""``b1``: scheduling overhead against the peers, side by side (issue 10, B1; issue 25).

The same workload on Stalwart and on each peer, back to back in one invocation, so that the
ratios hold on a shared machine where absolute times drift: N trials, each a Python trial that
starts its framework's trial API, sleeps 1 s and reports one metric, 16 at a time
(oversubscribed on purpose on a small machine), against the floor of N x 1 s / 16. N is 1,000
(floor 62.5 s); ``--quick`` runs 160 (floor 10 s); ``--trials N`` any other number (10,000 is
the shape of Ray Tune's published benchmark).

- Stalwart: ``stalwart master`` + ``stalwart agent --slots 16`` on a fresh SQLite home, a random
  search with ``max_concurrent_trials: 16`` whose trial (:data:`TRIAL`) is a Python process that
  imports the harness, opens ``core.init()``, sleeps 1 s and reports one validation metric.
- Ray Tune, Optuna: ``bench/peers/sleep_trials.py`` in the peers' own virtual environment
  ``.cache/bench-peers``, created here from ``bench/requirements-peers.txt`` on first use (and
  again when that file changes). See that script for each peer's setup. Ray's default (a new
  actor process per trial) is left out above 1,000 trials (it takes ten times the floor);
  ``--peer`` picks peers.

The gap (a trial's end to the next trial's start, p50 and p99) is measured the same way on both
sides where the peer allows it: from times the trial stamps itself (Stalwart: the script's first
line, before any import, and after its report; Ray: the trainable's first line and its report;
Optuna: its own start and completion times). Failed trials are counted per trial: Stalwart's
trials that did not complete, the peers' trials that raised. Wall time is the search alone:
starting the master and agent, or Ray, is not counted (it is in the raw results). ``x Stalwart``
is the peer's overhead over the floor divided by Stalwart's, measured in the same invocation.
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cluster import _config, _create, _ended_at, _login, _wait
from bench.common import (
    REPO,
    BenchError,
    Measurement,
    Options,
    _free_port,
    latency_stats,
    write_results,
)
from stalwart.local import LocalCluster

__all__ = ["NAME", "PEERS", "ensure_peers_venv", "run", "stamped_spans", "trial_gaps"]

NAME = "b1"
SLOTS = 16
# ray_tune: Ray's defaults (a new actor per trial); ray_tune_reuse: reuse_actors=True, the
# setting of Ray's own published benchmark for this shape.
PEERS: tuple[str, ...] = ("ray_tune", "ray_tune_reuse", "optuna")
PEERS_VENV = REPO / ".cache" / "bench-peers"
PEERS_REQUIREMENTS = Path(__file__).resolve().parent / "requirements-peers.txt"
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "sleep_trials.py"
DEFAULT_ACTOR_LIMIT = 1000
"""Above this many trials Ray's default (a new actor per trial) is left out unless asked for."""

TRIAL = """\
import time
start = time.time()  # before any import: the process start-up is in the gap, as on the peers'
import os
import stalwart as det

info = det.get_cluster_info()
with det.core.init() as core_context:
    time.sleep(1.0)
    x = float(info.trial.hparams["x"])
    core_context.train.report_validation_metrics(steps_completed=1, metrics={"loss": x})
    end = time.time()
with open(os.path.join(os.environ["STAMPS"], os.environ["DET_TRIAL_ID"]), "w") as out:
    out.write(f"{start!r} {end!r}")
"""
"""Stalwart's B1 trial (the Core API, as a Determined user writes it; ``import stalwart as det``
is the harness ``import determined as det`` resolves to on Stalwart)."""


def ensure_peers_venv() -> tuple[Path, float]:
    """The peers' Python, creating or refreshing ``.cache/bench-peers``; and the seconds it took.

    The venv is rebuilt when ``bench/requirements-peers.txt`` differs from the copy stored in it
    at the last install (0 seconds when nothing had to be done). A fresh install is written to
    disk (``os.sync``) before this returns, so its write-back does not fall into a timed part.
    """
    python = PEERS_VENV / "bin" / "python"
    stamp = PEERS_VENV / "requirements-peers.txt"
    wanted = PEERS_REQUIREMENTS.read_text(encoding="utf-8")
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        return python, 0.0
    print(f"{NAME}: installing the peers into {PEERS_VENV} (once; about a minute)", flush=True)
    started = time.monotonic()
    shutil.rmtree(PEERS_VENV, ignore_errors=True)
    PEERS_VENV.parent.mkdir(parents=True, exist_ok=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    steps = [[sys.executable, "-m", "venv", str(PEERS_VENV)], [*pip, "-r", str(PEERS_REQUIREMENTS)]]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
            raise BenchError(f"could not install the peers ({' '.join(cmd[:3])}...):\n{tail}")
    stamp.write_text(wanted, encoding="utf-8")
    # The install leaves hundreds of MB of dirty pages; written back during a timed part,
    # they stalled every running trial at once (docs/benchmarks.md, B1 on the seventh
    # machine). Write them now, before anything is timed.
    os.sync()
    took = time.monotonic() - started
    print(f"{NAME}: peers installed in {took:.0f} s (written to disk)", flush=True)
    return python, took


def trial_gaps(spans: Sequence[tuple[float, float]], slots: int) -> list[float]:
    """For each trial end (but the last ``slots``), the time until the next trial starts."""
    starts = sorted(start for start, _ in spans)
    ends = sorted(end for _, end in spans)
    gaps = []
    for end in ends[: max(len(ends) - slots, 0)]:
        i = bisect.bisect_left(starts, end)
        if i < len(starts):
            gaps.append(starts[i] - end)
    return gaps


def _stalwart(trials: int, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    stamps = work / "stamps"
    stamps.mkdir(exist_ok=True)
    config = work / "master.yaml"
    config.write_text("cluster:\n  tick: 1.0\n")
    cluster = LocalCluster(home=work / "home", port=_free_port(), master_config=config)
    experiment = _config("b1", "python3 trial.py", trials, SLOTS)
    experiment += f"environment:\n  environment_variables: [STAMPS={stamps}]\n"
    try:
        started = time.monotonic()
        cluster.start_master()
        cluster.start_agent("bench", slots=SLOTS)
        client = _login(cluster.url)
        startup = time.monotonic() - started
        started_at = time.time()
        exp_id = _create(client, experiment, {"trial.py": TRIAL})
        state = _wait(client, exp_id, trials / SLOTS * 10 + 120, trials / SLOTS, every=1.0)
        wall = _ended_at(cluster.home / "master.db", exp_id) - started_at
        client.close()
        states = _trial_states(cluster.home / "master.db", exp_id)
    finally:
        cluster.stop()
    spans = list(stamped_spans(stamps).values())
    gaps = trial_gaps(spans, SLOTS)
    return {
        "wall_s": wall,
        "startup_s": startup,
        "experiment_state": state,
        "errors": sum(1 for s in states if s != "COMPLETED") + max(trials - len(states), 0),
        "stamped": len(spans),
        "gap": latency_stats(gaps) if gaps else {},
        "version": _stalwart_version(),
        "span_source": "stamped by the trial (first line, before imports; after its report)",
    }


def stamped_spans(stamps: Path) -> dict[int, tuple[float, float]]:
    """Trial id -> (first line, after its report), as :data:`TRIAL` stamped them in
    ``stamps`` (one file per trial, named by its id)."""
    spans = {}
    for stamp in stamps.iterdir():
        start, end = stamp.read_text().split()
        spans[int(stamp.name)] = (float(start), float(end))
    return spans


def _trial_states(db: Path, exp_id: int) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select state from trials where experiment_id = ?", (exp_id,))
        return [str(state) for (state,) in rows.fetchall()]


def _stalwart_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stalwart")
    except PackageNotFoundError:
        return "source"


def _peer(python: Path, peer: str, trials: int, work: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    out = work / "result.json"
    log_path = work / "peer.log"
    floor = trials / SLOTS
    cmd = [str(python), str(PEER_SCRIPT), peer, "--trials", str(trials), "--slots", str(SLOTS)]
    cmd += ["--out", str(out), "--work", str(work)]
    started = time.monotonic()
    with log_path.open("wb") as log:
        try:
            done = subprocess.run(
                cmd, stdout=log, stderr=subprocess.STDOUT, timeout=floor * 30 + 300, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"{peer} did not finish within {exc.timeout:g}s") from exc
    process_s = time.monotonic() - started
    if done.returncode != 0 or not out.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise BenchError(f"{peer} exited with {done.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    spans = [(float(s), float(e)) for s, e in result.pop("spans")]
    gaps = trial_gaps(spans, SLOTS)
    result["gap"] = latency_stats(gaps) if gaps else {}
    result["completed"] = len(spans)
    result["process_s"] = process_s
    return result


def _measurements(system: str, trials: int, result: dict[str, Any]) -> list[Measurement]:
    floor = trials / SLOTS
    wall = float(result["wall_s"])
    overhead = (wall - floor) / floor * 100
    result["floor_s"] = floor
    result["overhead_pct"] = overhead
    gap = result.get("gap") or {}
    ours = system == "stalwart"
    return [
        Measurement(
            name=f"{system}_wall",
            value=wall,
            unit="s",
            stats={k: v for k, v in result.items() if k != "gap"},
            note=f"{trials} trials x 1 s, {SLOTS} at a time, floor {floor:g} s",
        ),
        Measurement(
            name=f"{system}_overhead",
            value=overhead,
            unit="%",
            target="<= 5 %" if ours else None,
            passed=overhead <= 5.0 if ours else None,
        ),
        Measurement(
            name=f"{system}_trial_gap",
            value=gap["p50_ms"] / 1000 if gap.get("count") else None,
            unit="s",
            stats=gap,
            note=f"p50; p99 in stats ({result['span_source']})",
        ),
    ]


def _print_side_by_side(trials: int, results: dict[str, dict[str, Any]]) -> None:
    base = results["stalwart"]["overhead_pct"]
    header = ("system", "version", "wall s", "floor s", "overhead", "x Stalwart", "gap p50")
    rows = [(*header, "gap p99", "failed")]
    for system, r in results.items():
        gap = r.get("gap") or {}
        ratio = "1.00" if system == "stalwart" else f"{r['overhead_pct'] / base:.2f}"
        rows.append(
            (
                system,
                str(r["version"]),
                f"{r['wall_s']:.1f}",
                f"{r['floor_s']:g}",
                f"{r['overhead_pct']:.1f} %",
                ratio if base > 0 else "n/a",
                f"{gap['p50_ms']:.0f} ms" if gap.get("count") else "n/a",
                f"{gap['p99_ms']:.0f} ms" if gap.get("count") else "n/a",
                str(r["errors"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(f"\n== {NAME}: {trials} trials x 1 s, {SLOTS} at a time (Stalwart target <= 5 %)")
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * width for width in widths))


def _peers(options: Options, trials: int) -> tuple[str, ...]:
    if options.peers is not None:
        return options.peers
    if trials > DEFAULT_ACTOR_LIMIT:
        return tuple(p for p in PEERS if p != "ray_tune")
    return PEERS


def run(options: Options) -> list[Measurement]:
    """Run B1 on Stalwart and then on each peer (see the module docstring)."""
    python, install_s = ensure_peers_venv()
    trials = options.trials or (160 if options.quick else 1000)
    peers = _peers(options, trials)
    work = options.workdir or Path(tempfile.mkdtemp(prefix="stalwart-bench-b1-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    measurements: list[Measurement] = []
    try:
        for system in ("stalwart", *peers):
            print(f"{NAME}: {system} ...", flush=True)
            if system == "stalwart":
                results[system] = _stalwart(trials, work / system)
            else:
                results[system] = _peer(python, system, trials, work / system)
            measurements += _measurements(system, trials, results[system])
    finally:
        if options.workdir is None and not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    base = results["stalwart"]["overhead_pct"]
    for peer in peers:
        measurements.append(
            Measurement(
                name=f"{peer}_overhead_ratio",
                value=results[peer]["overhead_pct"] / base if base > 0 else None,
                unit="x",
                note="the peer's overhead over the floor / Stalwart's, same invocation",
            )
        )
    _print_side_by_side(trials, results)
    setup = {"slots": SLOTS, "trials": trials, "peers_install_s": install_s}
    path = write_results(NAME, options, measurements, {"setup": setup})
    print(f"raw results: {path}")
    return measurements
