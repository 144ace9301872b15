"""kueued's command line: ``simulate``, ``validate``, ``run``.

The composition root: the only module of ``kueued`` that may import ``actors``.
Logging is configured once here (structlog, JSON lines or console).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from kueued.errors import KueuedError

EPILOG = """examples:
  kueued simulate config/examples/organisation.yaml            # a table for people
  kueued simulate scenario.yaml --output json                  # FORMAT.md's JSON
  kueued simulate --generator baseline-generator.yaml --plot out/ # Kueue's perf test, virtual time
  kueued simulate trace.yaml --clock real                      # kueued.io/arrival + runtime, live
  kueued validate manifests/*.yaml                             # refuse what Kueue would
  kueued --log-format json --log-level INFO run --manifests /etc/kueued/manifests
"""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kueued",
        description="Hierarchical quota scheduler for Kubernetes batch workloads: Kueue's cohorts, "
                    "ClusterQueues and preemption, and Koordinator's elastic quota.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log-level", default="WARNING", help="structlog level on stderr (default WARNING)")
    ap.add_argument("--log-format", choices=["console", "json"], default="console")
    sub = ap.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="run manifests to quiescence in memory and report decisions",
                         description="Apply the manifests (or conformance scenarios) in order, schedule until "
                                     "nothing more can change, and print every workload's outcome.")
    sim.add_argument("files", nargs="*", type=Path, help="YAML manifests or scenario files")
    sim.add_argument("--output", "-o", choices=["table", "json"], default="table")
    sim.add_argument("--engine", choices=["actors", "sync"], default="actors",
                     help="actors (default): one actor per ClusterQueue and Cohort; sync: the pure core")
    sim.add_argument("--generator", type=Path, metavar="FILE",
                     help="Kueue's scheduler-perf generator YAML (test/performance/scheduler) instead of files")
    sim.add_argument("--clock", choices=["virtual", "real"], default="virtual",
                     help="for timed runs (kueued.io/arrival, kueued.io/runtime, --generator): virtual jumps "
                          "from event to event; real sleeps until each, as Kueue's test does")
    sim.add_argument("--plot", type=Path, metavar="DIR",
                     help="write PNG charts of a timed run to DIR (needs the 'plot' extra: matplotlib)")
    run = sub.add_parser("run", help="run the daemon (objects from a manifest directory until the "
                                     "Kubernetes layer lands)",
                         description="Start one actor per ClusterQueue and Cohort and a root coordinator; "
                                     "apply objects from --manifests as they appear, change or disappear, and "
                                     "schedule after every change. Decisions are logged as structured events.")
    run.add_argument("--manifests", type=Path, default=Path("/etc/kueued/manifests"),
                     help="directory of YAML manifests to watch (default: /etc/kueued/manifests)")
    run.add_argument("--interval", type=float, default=2.0, help="seconds between directory scans")
    run.add_argument("--metrics-port", type=int, default=0,
                     help="serve Prometheus metrics on this port (default 0: off)")
    val = sub.add_parser("validate", help="check manifests as Kueue's and Koordinator's webhooks would")
    val.add_argument("files", nargs="+", type=Path)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from kueued.gc_tuning import tune
    from kueued.logging import configure
    configure(level=args.log_level, json=args.log_format == "json")
    tune()
    try:
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "validate":
            return _validate(args)
        if args.command == "run":
            return _run(args)
    except KueuedError as exc:
        print(f"kueued: {exc}", file=sys.stderr)
        return 2
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from kueued.simulate import load_manifests, simulate
    from kueued.timeline import is_timed
    if args.generator is None and not args.files:
        print("kueued simulate: give manifest files or --generator FILE", file=sys.stderr)
        return 2
    manifests = load_manifests(args.files)
    if args.generator is not None or is_timed(manifests) or args.plot is not None or args.clock == "real":
        return _simulate_timed(args, manifests)
    if args.engine == "actors":
        from actors.simulation import run_actors
        report = simulate(manifests, runner=run_actors)
    else:
        report = simulate(manifests)
    if args.output == "json":
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        from kueued.table import render
        render(report)
    return 0


def _simulate_timed(args: argparse.Namespace, manifests: list[dict]) -> int:
    from kueued.simulate import simulate_timed
    from kueued.timeline import trace_from
    if args.generator is not None:
        from kueued.generator import build_trace, load_generator
        trace = build_trace(load_generator(args.generator))
        trace.setup.extend(manifests)
    else:
        trace = trace_from(manifests)
    runner = run_actors_timed if args.engine == "actors" else None
    many = len(trace.arrivals) > 2_000
    with _progress(enabled=many and args.output == "table") as progress:
        run = simulate_timed(trace, runner=runner, engine=args.engine, real=args.clock == "real",
                             progress=progress, per_workload=not many or args.output == "json")
    if args.output == "json":
        body = {"summary": run.summary} if many else {"summary": run.summary, "report": run.report}
        sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
    else:
        from kueued.simulate import render_summary
        if not many:
            from kueued.table import render
            render(run.report)
        render_summary(run.summary, reference=_rangespec(args.generator))
    if args.plot is not None:
        from kueued.simulate import write_plots
        for path in write_plots(run.timeline, run.summary, args.plot):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _rangespec(generator: Path | None) -> dict | None:
    """Kueue's thresholds beside a generator file (``x-generator.yaml`` -> ``x-rangespec.yaml``)."""
    if generator is None:
        return None
    spec = generator.with_name(generator.name.replace("generator", "rangespec"))
    if spec == generator or not spec.exists():
        return None
    import yaml
    return yaml.safe_load(spec.read_text())


class _progress:
    """A rich progress bar on stderr over arrivals seen, for long runs; a no-op otherwise."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
        self.bar = Progress("arrivals", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task("arrivals", total=None)
        return lambda done, total: self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(*exc)


def run_actors_timed(world, timeline, *, real: bool = False, progress=None):  # -> Report
    """A timed run on the actor engine (``actors.simulation``; the composition root may import actors)."""
    from actors.simulation import run_actors_timed as run
    return run(world, timeline, real=real, progress=progress)


def _run(args: argparse.Namespace) -> int:
    from functools import partial

    import anyio

    from actors.daemon import run_daemon
    from kueued.kube.port import InMemoryPort
    if not args.manifests.is_dir():
        print(f"kueued: --manifests {args.manifests} is not a directory", file=sys.stderr)
        return 2
    from kueued.metrics import Metrics
    metrics = Metrics()
    if args.metrics_port:
        from prometheus_client import start_http_server
        start_http_server(args.metrics_port, registry=metrics.registry)
    anyio.run(partial(run_daemon, args.manifests, InMemoryPort(), interval=args.interval, metrics=metrics))
    return 0


def _validate(args: argparse.Namespace) -> int:
    from kueued.simulate import load_manifests
    from kueued.world import World
    world = World()
    for m in load_manifests(args.files):
        world.apply(m)
    for key, why in world.rejected.items():
        print(f"{key}: {why}")
    print(f"{len(world.raw)} accepted, {len(world.rejected)} rejected")
    return 1 if world.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
