"""``kueued simulate`` on manifests: to quiescence in memory, or timed (arrivals and runtimes).

A plain run applies every manifest, schedules until nothing more can change and prints each
workload's outcome (a table, or FORMAT.md's JSON).  A timed run (``kueued.io/arrival``,
``--generator``, ``--clock real``, ``--plot``) plays a trace through the actors on a virtual or
real clock and prints a summary, with Kueue's thresholds when a rangespec sits beside the
generator file.  ``simulate --from-cluster`` is the operator's (:mod:`kueued.ops.commands`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import msgspec

from kueued.errors import KueuedError
from kueued.logging import fail, warn
from kueued.manifests import Problem, read_manifests

__all__ = ["simulate"]


def _read(files: list[Path]) -> tuple[list[dict], list[Problem]]:
    """The manifests of ``files``, each unreadable file or document reported once (warning)."""
    manifests, problems = read_manifests(files)
    for problem in problems:
        warn(str(problem), event="manifest_unreadable", file=problem.source, document=problem.document)
    return manifests, problems

def simulate(args: argparse.Namespace) -> int:
    from actors.simulation import simulate
    from kueued.trace import is_timed
    if args.generator is None and not args.files:
        fail("simulate: give manifest files or --generator FILE")
        return 2
    if args.plot is not None:
        _need_matplotlib()
    from kueued.ops.commands import with_config
    manifests, problems = _read(args.files)
    manifests = with_config(manifests, args.config)
    if args.generator is not None or is_timed(manifests) or args.plot is not None or args.clock == "real":
        _simulate_timed(args, manifests, problems)
        return 1 if problems else 0
    report = simulate(manifests)
    report.rejected.update((p.where, p.reason) for p in problems)
    _print_report(report, args.output)
    return 1 if problems else 0


def _need_matplotlib() -> None:
    """``--plot`` checked before the run, not after it."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        raise KueuedError("--plot needs matplotlib: pip install 'kueued[plot]'")


def _print_report(report, output: str) -> None:
    if output == "json":
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        from kueued.table import render
        render(report)


def _simulate_timed(args: argparse.Namespace, manifests: list[dict], problems: list[Problem]) -> None:
    from actors.simulation import simulate_timed
    from kueued.trace import trace_from
    if args.generator is not None:
        from kueued.generator import build_trace, load_generator
        trace = build_trace(load_generator(args.generator))
        trace.setup.extend(manifests)
    else:
        trace = trace_from(manifests)
    many = len(trace.arrivals) > 2_000
    with _progress(enabled=many and args.output == "table") as progress:
        run = simulate_timed(trace, real=args.clock == "real",
                             progress=progress, per_workload=not many or args.output == "json")
    run.report.rejected.update((p.where, p.reason) for p in problems)
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


def _rangespec(generator: Path | None) -> dict | None:
    """Kueue's thresholds beside a generator file (``x-generator.yaml`` -> ``x-rangespec.yaml``)."""
    if generator is None:
        return None
    spec = generator.with_name(generator.name.replace("generator", "rangespec"))
    if spec == generator or not spec.exists():
        return None
    loaded = read_manifests([spec])  # advisory figures: an unreadable one is skipped
    return loaded.manifests[0] if loaded.manifests and not loaded.problems else None


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

