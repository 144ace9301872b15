"""``bench/throughput.py --repeat``: every run is shown, and the median is a run's own row."""

from __future__ import annotations

import gc
import sys

import pytest

from kueued.timeline import Summary
from tests.benches import load_bench


def _summary(host: float, admissions: int = 100) -> Summary:
    return Summary(clock="virtual", engine="actors", wall_ms=1000.0, host_seconds=host, admissions=admissions,
                   evictions=0, finished=admissions, pending=0, cluster_queue_classes={}, workload_classes={})


def test_the_median_run_is_the_middle_host_time() -> None:
    bench = load_bench("throughput")
    runs = [_summary(3.0), _summary(1.0), _summary(2.0)]
    assert bench.median_run(runs) is runs[2]
    assert bench.median_run(runs[:2]) is runs[1]  # of two, the faster
    assert bench.rate(_summary(0.5, admissions=100)) == 200


def test_repeated_runs_print_a_row_each_and_the_median(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench("throughput")
    monkeypatch.setattr(gc, "set_threshold", lambda *t: None)  # main tunes the collector, as the CLI does
    monkeypatch.setattr(sys, "argv", ["throughput.py", "--cluster-queues", "4", "--workloads", "40",
                                      "--no-preemption", "--repeat", "2"])
    bench.main()
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "actors," in line]
    assert [r.split("│")[1].strip() for r in rows] == ["actors, run 1", "actors, run 2", "actors, median"]
    admitted = {r.split("│")[2].strip() for r in rows}
    assert len(admitted) == 1 and int(admitted.pop()) >= 40  # the same trace each time, every workload in
