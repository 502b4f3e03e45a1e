"""Statistics and the side-by-side tables of the benchmarks against peers."""

from __future__ import annotations

import math
from pathlib import Path

import bench.b3
import pytest
from bench.__main__ import BENCHMARKS, main
from bench.b2 import TRIALS, rates
from bench.b3 import endpoint_paths, parse_locust_stats
from bench.b4 import not_worse
from bench.search.stats import bootstrap_ci, compute_to_reach, summarize
from bench.sidebyside import format_table, ratio, ratio_text


def test_bootstrap_ci_brackets_the_mean_and_is_deterministic() -> None:
    samples = [1.0, 2.0, 3.0, 4.0, 10.0]
    low, high = bootstrap_ci(samples)
    assert low < sum(samples) / len(samples) < high
    assert bootstrap_ci(samples) == (low, high)
    assert bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    with pytest.raises(ValueError, match="no samples"):
        bootstrap_ci([])


def test_summarize_and_compute_to_reach() -> None:
    grid = [1.0, 2.0, 3.0]
    summary = summarize(grid, [[math.inf, 0.4, 0.2], [0.9, 0.6, 0.2]])
    assert summary.mean[0] == math.inf
    assert summary.mean[1:] == pytest.approx([0.5, 0.2])
    assert summary.low[2] == summary.high[2] == pytest.approx(0.2)
    assert compute_to_reach(summary, 0.5) == 2.0
    assert compute_to_reach(summary, 0.1) is None
    with pytest.raises(ValueError, match="grid points"):
        summarize(grid, [[0.1, 0.2]])


def test_not_worse_compares_with_the_top_of_the_peer_ci() -> None:
    ours = summarize([1.0], [[0.30], [0.30]])
    peer = summarize([1.0], [[0.10], [0.40]])  # mean 0.25, CI up to 0.40
    assert not_worse(ours, peer, 0)
    assert not not_worse(summarize([1.0], [[0.5], [0.5]]), peer, 0)


def test_ratio_and_table_formatting() -> None:
    assert ratio(3.0, 1.5) == 2.0
    assert ratio(1.0, 0.0) is None
    assert ratio(None, 1.0) is None
    assert ratio(math.inf, 1.0) is None
    assert ratio_text(1.0, 4.0) == "0.25x"
    assert ratio_text(1.0, None) == "n/a"
    table = format_table("t", ("a", "long header"), [("xyz", "1"), ("p", "22")])
    assert table.splitlines() == [
        "== t",
        "a    long header",
        "---  -----------",
        "xyz  1",
        "p    22",
    ]
    with pytest.raises(ValueError, match="cells"):
        format_table("t", ("a", "b"), [("only one",)])


def test_b2_rates_compare_systems_measured_on_different_sizes() -> None:
    raw = {
        "points": 1_000_000,
        "trial_points": 10_000,
        "ingest_s": 5.0,
        "read_s": 2.0,
        "frame_s": [0.5, 0.25, 0.4],
        "chart": {"p50_ms": 12.5},
        "concurrent_s": 10.0,
    }
    assert rates(raw) == {
        "ingest": 200_000.0,
        "read": 500_000.0,
        "frame": 2_500_000.0,  # the median read
        "chart": 12.5,
        "concurrent": TRIALS * 10_000 / 10.0,
    }


def test_parse_locust_stats(tmp_path: Path) -> None:
    csv_path = tmp_path / "locust_stats.csv"
    header = (
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
        "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
        "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%"
    )
    csv_path.write_text(
        header + "\n"
        "GET,/trials/{id},120,0,8,9.5,3,80,900,4.0,0,8,9,10,11,14,20,30,40,80,80,80\n"
        "GET,/empty,0,0,0,0,0,0,0,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n"
        ",Aggregated,120,1,8,9.5,3,80,900,4.0,0,8,9,10,11,14,21,30,41,80,80,80\n",
        encoding="utf-8",
    )
    rows = parse_locust_stats(csv_path)
    assert [r["name"] for r in rows] == ["/trials/{id}", "/empty", "all requests"]
    assert rows[0]["p95_ms"] == 20.0
    assert rows[1]["p95_ms"] is None
    assert rows[-1]["failures"] == 1
    assert rows[-1]["p99_ms"] == 41.0


def test_the_peer_benchmarks_are_registered(capsys: pytest.CaptureFixture[str]) -> None:
    assert {"b1", "b2", "b3", "b4", "b5"} <= set(BENCHMARKS)
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    for name in ("b2", "b3", "b4", "b5"):
        assert f"\n{name} " in "\n" + listed
    assert main(["run", "no-such-benchmark"]) == 2


def test_b3_measures_alone_exactly_the_endpoints_the_locust_users_load() -> None:
    targets = {"experiments": [1], "trials": [2], "big_trial": 3, "big_experiment": 4}
    pairs = endpoint_paths(targets)
    locustfile = (Path(bench.b3.__file__).parent / "peers" / "locustfile.py").read_text()
    for name, path in pairs:
        assert f'"{name}"' in locustfile, name
        assert path.startswith("/api/v1/")
    assert len({name for name, _ in pairs}) == len(pairs)
