"""``bench/kueue_perf_api.py`` at a tiny scale on the session's control plane.

The bench's runner, recorder, trivial admitter and ``kueued run`` process work end to end:
every row of its tables is printed and every Workload is admitted and finished, in both
runs.  No figure is asserted: on a shared machine they are the bench's to print, not a
test's to judge.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from tests.benches import load_bench

pytestmark = pytest.mark.control_plane

NAMESPACE = "perf-smoke"


@pytest.mark.timeout(120)
def test_a_tiny_baseline_runs_through_the_api_server(installed: Any, tmp_path: Path) -> None:
    bench = load_bench("kueue_perf_api")
    trace = bench.load_trace("baseline", 0.01, namespace=NAMESPACE, prefix="smoke-")
    shape = bench.shape_of(trace)
    schedule = bench.schedule_floor(trace)
    pids = installed.control_plane.pids if installed.control_plane is not None else []
    options = bench.Options(namespace=NAMESPACE, timeout=90, state=tmp_path, server_pids=pids)
    try:
        floor, ours = anyio.run(partial(bench.measure, trace, admin=installed.kubeconfig,
                                        kueued_kubeconfig=installed.user_kubeconfig("kueued"), options=options))
    finally:
        anyio.run(bench.remove, installed.kubeconfig, trace, NAMESPACE)

    console = Console(record=True, width=220)
    console.print(bench.report("baseline", 0.01, shape, schedule.summary, floor, ours))
    console.print(bench.targets(schedule.summary, floor, ours))
    text = console.export_text()
    for row in ("wall (s)", "cq usage (%)", "small wait (s)", "medium wait (s)", "large wait (s)", "API writes",
                "wall / max(API floor, schedule floor)", "kueued cpu / wall", "commit p99 (s)", "commit median (s)",
                "API-side CPU floor (s)"):
        assert row in text, row
    everyone = {a.key for a in trace.arrivals}
    for run in (floor, ours):
        assert set(run.first_admit) == everyone, run.label
        assert set(run.finished) == everyone, run.label
    assert ours.process["cpu_s"] > 0 and ours.process["rss_mib"] > 0


def test_repeated_pairs_are_reported_by_their_median_ratio() -> None:
    """``--repeat``: the tables show the pair whose wall over the larger floor is the median one."""
    bench = load_bench("kueue_perf_api")
    pairs = [(bench.Result("API floor", wall=floor), bench.Result("kueued", wall=ours))
             for floor, ours in ((30.0, 45.0), (35.0, 40.0), (29.0, 38.0))]  # 1.50x, 1.14x, 1.31x
    assert bench.median_pair(pairs, schedule_s=1.4) == 2
    assert bench.median_pair(pairs[:2], schedule_s=1.4) == 0  # of two, the higher
    assert bench.median_pair([(None, bench.Result("kueued", wall=10.0))], schedule_s=8.0) == 0
    assert bench.median_pair(pairs, schedule_s=40.0) == 1  # the schedule floor the larger: 1.13x, 1.0x, 0.95x


def test_the_api_side_cpu_floor_is_the_servers_and_runners_cpu_over_the_cores() -> None:
    """A run whose API server, etcd and runner used 240 CPU seconds on 2 cores cannot end before
    120 s, whatever the scheduler: the targets table says so, and over the larger floor."""
    import os
    from types import SimpleNamespace
    bench = load_bench("kueue_perf_api")
    cores = len(os.sched_getaffinity(0))
    floor = bench.Result("API floor", wall=80.0)
    ours = bench.Result("kueued", wall=150.0, servers_cpu=220.0 * cores / 2, bench_cpu=20.0 * cores / 2,
                        process={"cpu_s": 40.0, "rss_mib": 250.0, "p50": 0.1, "p99": 0.5, "ready_s": 1.0})
    console = Console(record=True, width=220)
    console.print(bench.targets(SimpleNamespace(wall_ms=60_000), floor, ours))
    lines = console.export_text().splitlines()
    [served] = [line for line in lines if "API-side CPU floor (s)" in line]
    assert "120.0" in served
    [ratio] = [line for line in lines if "that floor / max(API floor, schedule floor)" in line]
    assert "1.50" in ratio  # 120 s over the API floor's 80 s, the larger
