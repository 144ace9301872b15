"""Engine throughput: admissions per host second in virtual time on the actor engine.

    .venv/bin/python bench/throughput.py                                   # 100 ClusterQueues, 5,000 workloads
    .venv/bin/python bench/throughput.py --cluster-queues 1000 --workloads 50000   # issue 6's shape
    .venv/bin/python bench/throughput.py --no-preemption    # queues that never preempt
    .venv/bin/python bench/throughput.py --no-preemption --cluster-queues 1000 --workloads 50000 --quota-scale 10
    .venv/bin/python bench/throughput.py --no-preemption --cluster-queues 1000 --workloads 50000 --repeat 5

By default the workloads ask far more than the tree holds, so each cycle judges every
queue's head and admits the few that fit (Kueue parks a head that does not fit and its
queue's next comes up; every completion requeues the tree): that measures judging under
contention.  ``--quota-scale 10`` gives the tree ten times the quota, so nearly every head
is admitted: that measures what an admission costs.

The tree is ``bench/generate_tree.py``'s (4 cohort levels, quota at every level); every
workload arrives at 0 and runs 1..``--runtime`` whole seconds, so the virtual clock plays
the whole queue through in waves and every workload is admitted at least once, through
``simulate``'s timeline code path (events in, decisions out through the API port); the
table prints admissions per host second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate_tree import generate  # noqa: E402

from actors.simulation import simulate_timed  # noqa: E402
from kueued.native import engine  # noqa: E402
from kueued.timeline import Summary  # noqa: E402
from kueued.trace import trace_from  # noqa: E402


def main() -> None:
    from kueued.gc_tuning import tune
    from kueued.logging import configure
    configure(level="WARNING")  # the engines log every decision at INFO
    tune()  # as the CLI does
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster-queues", type=int, default=100)
    ap.add_argument("--workloads", type=int, default=5_000)
    ap.add_argument("--runtime", type=int, default=5, help="each workload runs 1..N seconds (virtual)")
    ap.add_argument("--no-preemption", action="store_true",
                    help="no preemption (default: withinClusterQueue LowerPriority, reclaimWithinCohort Any)")
    ap.add_argument("--quota-scale", type=int, default=1, help="multiply every quota and limit by N")
    ap.add_argument("--repeat", type=int, default=1, help="play the trace N times, print each run and the median")
    args = ap.parse_args()
    docs = generate(args.cluster_queues, args.workloads, runtime=args.runtime, preemption=not args.no_preemption,
                    quota_scale=args.quota_scale)
    runs = [simulate_timed(trace_from(docs), per_workload=False).summary for _ in range(max(args.repeat, 1))]
    t = Table(title=f"throughput: {args.cluster_queues} ClusterQueues, {args.workloads} workloads, virtual clock"
                    + (", no preemption" if args.no_preemption else ", preemption on every queue")
                    + (f", quota x{args.quota_scale}" if args.quota_scale != 1 else ""))
    for col in ("engine", "admissions", "evictions", "virtual wall (s)", "host (s)", "admissions / host s"):
        t.add_column(col, justify="right")
    for i, s in enumerate(runs, 1):
        t.add_row("actors" if len(runs) == 1 else f"actors, run {i}", str(s.admissions), str(s.evictions),
                  f"{s.wall_ms / 1000:.0f}", f"{s.host_seconds:.2f}", f"{rate(s):,.0f}")
    if len(runs) > 1:
        mid = median_run(runs)
        t.add_row("actors, median", str(mid.admissions), str(mid.evictions), f"{mid.wall_ms / 1000:.0f}",
                  f"{mid.host_seconds:.2f}", f"{rate(mid):,.0f}")
    t.caption = f"engine: {engine()}"
    console = Console(width=140)
    console.print(t)


def rate(summary: Summary) -> float:
    """Admissions per host second."""
    return summary.admissions / max(summary.host_seconds, 1e-9)


def median_run(runs: list[Summary]) -> Summary:
    """The run of median host time (the lower middle one of an even count): a real run, not an average."""
    return sorted(runs, key=lambda s: s.host_seconds)[(len(runs) - 1) // 2]


if __name__ == "__main__":
    main()
