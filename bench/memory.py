"""Peak RSS with many pending workloads (issue 6: 100,000 in <= 1 GiB).

    .venv/bin/python bench/memory.py                                   # 100,000 workloads, 1,000 ClusterQueues
    .venv/bin/python bench/memory.py --workloads 20000 --schedule      # also run to quiescence

Each measurement runs in a fresh subprocess (``resource.getrusage(RUSAGE_SELF).ru_maxrss``
at its end), so one run's garbage does not count against the next: the manifests are
generated in memory (``bench/generate_tree.py``'s tree), applied to a World (which keeps
every raw manifest, as an informer cache would) and queued by the engine: one actor per
ClusterQueue and Cohort, each with its heap.  ``--schedule`` also runs
the cycles to quiescence (slow at 100,000: every head that does not fit is parked one
cycle at a time).  A baseline row measures the interpreter with kueued imported.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
sys.path[:0] = [{root!r}, {bench!r}]
from generate_tree import generate
from kueued.logging import configure
from kueued.gc_tuning import tune
configure(level='WARNING')
tune()  # as the CLI does
from kueued.world import World
from kueued.engine.wiring import make_iterate, make_preemptor
mode, n_cq, n_wl, schedule = {mode!r}, {n_cq}, {n_wl}, {schedule}
t0 = time.perf_counter()
pending = 0
if mode != "baseline":
    world = World()
    for doc in generate(n_cq, n_wl):
        world.apply(doc)
    import anyio
    from actors.coordinator import Coordinator
    from kueued.kube.port import InMemoryPort
    async def main():
        coord = Coordinator(world, InMemoryPort(), preemptor=make_preemptor, iterate=make_iterate(world))
        async with anyio.create_task_group() as tg:
            await coord.sync_topology(tg)
            if schedule:
                await coord.run_to_quiescence()
            n = sum(1 for a in coord.cluster_queues.values() for _ in a.queue.pending())
            coord.stop()
        return n
    pending = anyio.run(main)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
print(json.dumps({{"rss": rss, "pending": pending, "seconds": time.perf_counter() - t0}}))
"""


def measure(mode: str, n_cq: int, n_wl: int, schedule: bool) -> dict:
    code = CHILD.format(root=str(ROOT), bench=str(ROOT / "bench"), mode=mode, n_cq=n_cq, n_wl=n_wl,
                        schedule=schedule)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster-queues", type=int, default=1_000)
    ap.add_argument("--workloads", type=int, default=100_000)
    ap.add_argument("--schedule", action="store_true", help="run the cycles to quiescence too")
    args = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    from kueued.native import engine
    t = Table(title=f"peak RSS: {args.cluster_queues} ClusterQueues, {args.workloads:,} workloads"
                    + (", scheduled" if args.schedule else ", queued"), caption=f"engine: {engine()}")
    for col in ("engine", "pending", "peak RSS (MiB)", "per workload (KiB)", "of 1 GiB", "seconds"):
        t.add_column(col, justify="right")
    base = None
    for mode in ("baseline", "actors"):
        started = time.perf_counter()
        r = measure(mode, args.cluster_queues, args.workloads, args.schedule)
        mib = r["rss"] / 2**20
        if base is None:
            base = r["rss"]
            t.add_row("interpreter + imports", "", f"{mib:.0f}", "", f"{r['rss'] / 2**30:.0%}", "")
            continue
        per = (r["rss"] - base) / 1024 / max(args.workloads, 1)
        t.add_row(mode, f"{r['pending']:,}", f"{mib:.0f}", f"{per:.2f}", f"{r['rss'] / 2**30:.0%}",
                  f"{time.perf_counter() - started:.1f}")
    Console(width=140).print(t)


if __name__ == "__main__":
    main()
