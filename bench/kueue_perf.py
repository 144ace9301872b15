"""Kueue's scheduler-performance configurations on kueued, beside Kueue's published figures.

    .venv/bin/python bench/kueue_perf.py                                  # baseline, virtual clock
    .venv/bin/python bench/kueue_perf.py --config large-scale
    .venv/bin/python bench/kueue_perf.py --clock real                     # live, as Kueue's test runs
    .venv/bin/python bench/kueue_perf.py --config large-scale --clock real --repeat 5

Reads ``../shared/reference/kueue-perf/<config>-generator.yaml`` (Kueue's own generator files),
runs them through ``kueued simulate --generator``'s code path, and prints wall time, ClusterQueue
usage and per-class average time to admission beside Kueue's rangespec means and the ideal lower
bound (``../shared/reference/anchors.md`` section 3), with ratios.  On the virtual clock "wall" is
the schedule's makespan, which the scheduler decides; "host" is how long this machine took to
compute it.  On the real clock both are the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from actors.simulation import simulate_timed  # noqa: E402
from kueued.generator import build_trace, load_generator  # noqa: E402
from kueued.native import engine  # noqa: E402

PERF = ROOT.parent / "shared" / "reference" / "kueue-perf"
# Kueue's rangespec means (anchors.md section 3) and the lower bound work / quota.
KUEUE = {
    "baseline": {"wall": 351.1, "usage": 55.9, "small": 215.5, "medium": 76.8, "large": 16.5, "bound": 66.0},
    "large-scale": {"wall": 1179.4, "usage": 38.6, "small": 700.4, "medium": 256.4, "large": 105.6, "bound": 4.03},
}


def run(config: str, clock: str):
    trace = build_trace(load_generator(PERF / f"{config}-generator.yaml"))
    return simulate_timed(trace, real=clock == "real", per_workload=False).summary


def table(config: str, rows: list[tuple[str, object]]) -> Table:
    k = KUEUE[config]
    t = Table(title=f"{config}: kueued beside Kueue (ratio < 1: kueued better)", caption=f"engine: {engine()}")
    for col in ("clock", "metric", "kueued", "Kueue", "kueued / Kueue", "lower bound", "kueued / bound"):
        t.add_column(col, justify="right")
    for label, s in rows:
        t.add_row(label, "wall (s)", f"{s.wall_ms / 1000:.1f}", f"{k['wall']:g}", f"{s.wall_ms / 1000 / k['wall']:.3f}",
                  f"{k['bound']:g}", f"{s.wall_ms / 1000 / k['bound']:.2f}")
        t.add_row("", "host (s)", f"{s.host_seconds:.1f}", f"{k['wall']:g}", f"{s.host_seconds / k['wall']:.3f}",
                  f"{k['bound']:g}", f"{s.host_seconds / k['bound']:.2f}")
        usage = s.cluster_queue_classes["cq"].cpu_usage_percent
        t.add_row("", "cq usage (%)", f"{usage:.1f}", f"{k['usage']:g}", f"{usage / k['usage']:.2f}", "100", "")
        for cls in ("small", "medium", "large"):
            avg = (s.workload_classes[cls].average_time_to_admission_ms or 0) / 1000
            t.add_row("", f"{cls} wait (s)", f"{avg:.2f}", f"{k[cls]:g}", f"{avg / k[cls]:.3f}", "", "")
        t.add_row("", "admissions/host s", f"{s.admissions / max(s.host_seconds, 1e-9):.0f}", "42.5", "", "", "")
        t.add_row("", "evictions", str(s.evictions), "", "", "", "")
    return t


def main() -> None:
    from kueued.gc_tuning import tune
    from kueued.logging import configure
    configure(level="WARNING")  # the engines log every decision at INFO
    tune()  # as the CLI does
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=[*KUEUE, "all"], default="baseline")
    ap.add_argument("--clock", choices=["virtual", "real"], default="virtual")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs; real-clock runs vary with timing (different preemption "
                         "cascades), so report their spread")
    args = ap.parse_args()
    console = Console(width=140)
    for config in (list(KUEUE) if args.config == "all" else [args.config]):
        rows = [(args.clock + (f" #{i + 1}" if args.repeat > 1 else ""), run(config, args.clock))
                for i in range(args.repeat)]
        console.print(table(config, rows))
        if args.repeat > 1:
            walls = sorted(s.wall_ms / 1000 for _, s in rows)
            console.print(f"{config} {args.clock}: wall over {len(walls)} runs min {walls[0]:.1f} s, "
                          f"median {statistics.median(walls):.1f} s, max {walls[-1]:.1f} s "
                          f"(bound {KUEUE[config]['bound']:g} s)")


if __name__ == "__main__":
    main()
