"""How long the daemon's gauges take to refresh on a large tree (``actors.observe.Gauges``).

    .venv/bin/python bench/gauges_refresh.py                          # 1,000 ClusterQueues, 2,000 workloads
    .venv/bin/python bench/gauges_refresh.py --cluster-queues 5000 --workloads 10000

The tree is ``bench/generate_tree.py``'s; its workloads are applied and run to quiescence on the
actor engine (``LiveEngine``), then the gauges are refreshed as the daemon refreshes them after a
pass: with nothing changed since the last refresh, and after one more arrival and a round.  A quiet
daemon refreshes after every pass, so under a trickle of Workloads this is paid per pass.  The table
prints the median of ``--repeat`` refreshes of each kind.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate_tree import generate  # noqa: E402

from actors.harness import LiveEngine  # noqa: E402
from actors.observe import Gauges  # noqa: E402
from kueued.metrics import Metrics  # noqa: E402
from kueued.world import World  # noqa: E402


def main() -> None:
    from kueued.gc_tuning import tune
    from kueued.logging import configure
    configure(level="WARNING")
    tune()  # as the CLI does
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster-queues", type=int, default=1000)
    ap.add_argument("--workloads", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=20, help="refreshes of each kind (the median is printed)")
    args = ap.parse_args()
    docs = generate(args.cluster_queues, args.workloads + args.repeat, preemption=False)
    world = World()
    for d in docs:
        if d["kind"] != "Workload":
            world.apply(d)
    workloads = [d for d in docs if d["kind"] == "Workload"]
    quiet: list[float] = []
    moved: list[float] = []
    with LiveEngine(world) as engine:
        for d in workloads[:args.workloads]:
            engine.apply(d)
        engine.run()
        gauges = Gauges(metrics=Metrics(), coord=engine.coordinator, elastic=SimpleNamespace(groups={}),  # type: ignore[arg-type]
                        source=SimpleNamespace(queued=lambda: 0), clock=time.monotonic)  # type: ignore[arg-type]
        engine._call(gauges.observe)
        for d in workloads[args.workloads:]:
            started = time.perf_counter()
            engine._call(gauges.observe)
            quiet.append(time.perf_counter() - started)
            engine.apply(d)
            engine.run()
            started = time.perf_counter()
            engine._call(gauges.observe)
            moved.append(time.perf_counter() - started)
    t = Table(title=f"gauges' refresh: {args.cluster_queues} ClusterQueues, {args.workloads} workloads applied")
    for col in ("refresh", "median (ms)", "max (ms)"):
        t.add_column(col, justify="right")
    for label, times in (("nothing changed", quiet), ("one arrival and a round", moved)):
        t.add_row(label, f"{statistics.median(times) * 1000:.1f}", f"{max(times) * 1000:.1f}")
    Console(width=120).print(t)


if __name__ == "__main__":
    main()
