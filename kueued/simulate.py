"""``kueued simulate``: manifests in, decisions out, no cluster needed.

Reads conformance scenarios (a YAML mapping with ``objects``) or plain
multi-document manifests, applies every object through :class:`World` in order, runs
the engine to quiescence and reports per workload its state, ClusterQueue, flavors,
preemption count and (for a pending one) the reason; plus the refused objects and,
for ElasticQuota trees, each group's runtime quota.  The JSON shape is
``../shared/conformance/FORMAT.md``'s.

``queues`` says why one team went first: per Cohort and ClusterQueue (tree order) what
its subtree holds at the end of the run against the quota it owns (every nominal quota
in it), and the share its parent ranked it by: Kueue's weighted share under fair
sharing, else the parent's ``kueued.io/admission-policy`` number
(``kueued.scheduling.policies.shares``); and per LocalQueue of a ``fair`` ClusterQueue
its share there.  Shares are per mille.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from kueued.errors import ManifestError
from kueued.model.quantity import UNLIMITED, format_milli
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.explain import STRICT_FIFO_WAIT, explain
from kueued.scheduling.fairsharing.share import Shares, parse_weight
from kueued.scheduling.snapshot import Snapshot
from kueued.world import World

__all__ = ["Report", "WorkloadReport", "QueueReport", "simulate"]


class WorkloadReport(msgspec.Struct, omit_defaults=True, rename="camel"):
    state: str
    cluster_queue: str | None = None
    flavors: dict[str, dict[str, str]] | None = None
    preemptions: int = 0
    reason: str | None = None


class QueueReport(msgspec.Struct, omit_defaults=True, rename="camel"):
    """A Cohort, ClusterQueue or LocalQueue at the end of the run (amounts: flavor -> resource -> quantity)."""

    kind: str
    parent: str | None = None
    depth: int = 0
    policy: str | None = None       # its kueued.io/admission-policy
    weight: str | None = None       # spec.fairSharing.weight, when set
    usage: dict[str, dict[str, str]] = {}
    quota: dict[str, dict[str, str]] = {}
    share: int | None = None        # per mille, ceil; 2**63-1 stands for +Inf (Kueue's weightedShare)
    share_basis: str | None = None  # fairSharing | fair | capacity: what ``share`` measures


class Report(msgspec.Struct, rename="camel"):
    workloads: dict[str, WorkloadReport]
    rejected: dict[str, str]
    quota_groups: dict[str, dict[str, dict[str, str]]] = {}
    evictions: list[dict[str, str]] = []
    cycles: int = 0
    queues: dict[str, QueueReport] = {}


Runner = Callable[[World], "Report"]


def simulate(manifests: list[dict[str, Any]], *, runner: Runner) -> Report:
    """Apply the manifests and run them to quiescence with ``runner`` (``actors.simulation``
    passes the actor engine; this layer sits below it and names no engine)."""
    world = World()
    for m in manifests:
        world.apply(m)
    return runner(world)


def merge_outcome(report: Report, outcome: Any) -> None:
    """Put an ElasticOutcome into a Report; its evictions follow Kueue's."""
    for key, r in outcome.workloads.items():
        report.workloads[key] = WorkloadReport(r.state, r.cluster_queue if r.state == "admitted" else None,
                                               None, r.preemptions, r.reason or None)
    for name, g in outcome.quota_groups.items():
        report.quota_groups[name] = {"runtime": quantity_map(g.runtime), "request": quantity_map(g.request)}
    report.evictions = [*report.evictions,
                        *({"workload": e.workload, "by": e.by, "reason": e.reason} for e in outcome.evictions)]


def report_from(world: World, *, reasons: dict[str, str], unrouted: dict[str, str],
                events: list[tuple[str, str, str, str]], cycles: int, snapshot: Snapshot | None = None,
                evicted: Mapping[str, int] | None = None) -> Report:
    """The outcome of a run; with the final ``snapshot``, quota reasons name the blocking node;
    ``evicted``: how many times each workload was evicted."""
    workloads: dict[str, WorkloadReport] = {}
    evicted = evicted or {}
    for key, wl in sorted(world.workloads.items()):
        placed = world.placed.get(key)
        if placed is not None:
            workloads[key] = WorkloadReport("admitted", placed.cluster_queue, placed.flavors, evicted.get(key, 0))
            continue
        why = unrouted.get(key) or reasons.get(key) or STRICT_FIFO_WAIT
        if snapshot is not None and key not in unrouted and "quota" in why:
            cq_name = world.route(wl)[0]
            cq = snapshot.cluster_queues.get(cq_name or "")
            detail = explain(cq, wl) if cq is not None else ""
            if detail:
                why = f"{why} ({detail})"
        workloads[key] = WorkloadReport("pending", preemptions=evicted.get(key, 0), reason=why)
    for key in world.rejected:
        if key.startswith("Workload/") and key.split("/", 1)[1] not in workloads:
            workloads[key.split("/", 1)[1]] = WorkloadReport("pending", reason="rejected: " + world.rejected[key])
    evictions = [{"workload": w, "by": by, "reason": why} for kind, w, by, why in events if kind == "evicted"]
    queues = queue_reports(world, snapshot) if snapshot is not None else {}
    return Report(workloads=workloads, rejected=dict(world.rejected), evictions=evictions, cycles=cycles,
                  queues=queues)


def queue_reports(world: World, snapshot: Snapshot) -> dict[str, QueueReport]:
    """Usage against quota and the ranking share of every node, roots first, depth first."""
    from kueued.scheduling import policies as pol
    fair_sharing = Shares(snapshot) if snapshot.fair_sharing else None
    out: dict[str, QueueReport] = {}
    stack = [(n, 0) for n in sorted((n for n in snapshot.nodes() if n.parent is None), key=_tree_order,
                                    reverse=True)]
    while stack:
        node, depth = stack.pop()
        obj = (world.cohorts if node.is_cohort else world.cluster_queues).get(node.name)
        spec = snapshot.owner(node).spec
        fs = spec.fair_sharing if spec is not None else None
        used, quota = pol.consumption(node), pol.owned(node)
        row = QueueReport("Cohort" if node.is_cohort else "ClusterQueue", depth=depth,
                          parent=node.parent.name if node.parent is not None else None,
                          policy=obj.metadata.annotations.get(pol.ADMISSION_POLICY) if obj is not None else None,
                          weight=_quantity(fs.weight if fs is not None else None),
                          usage=_by_flavor({fr: used.get(fr, 0) for fr in {*quota, *used}}),
                          quota=_by_flavor(quota))
        ranked_by = pol.policy_of(world.cohorts.get(node.parent.name)) if node.parent is not None else pol.FIFO
        if fair_sharing is not None:
            row.share, row.share_basis = fair_sharing.of(node).rounded(), "fairSharing"
        elif ranked_by == pol.FAIR:
            assert node.parent is not None
            share = pol.fair_share(pol.per_resource(used), pol.capacity_of(node.parent), weight=parse_weight(fs))
            row.share, row.share_basis = _per_mille(share), "fair"
        elif ranked_by == pol.CAPACITY:
            row.share, row.share_basis = _per_mille(pol.guarantee_in_use(node, used)), "capacity"
        out[f"{row.kind}/{node.name}"] = row
        if not node.is_cohort and fair_sharing is None and pol.policy_of(obj) == pol.FAIR:
            out.update(_local_queue_reports(world, node, depth + 1))
        stack.extend((c, depth + 1) for c in sorted(node.children, key=_tree_order, reverse=True))
    return out


def _local_queue_reports(world: World, cq: QuotaNode, depth: int) -> dict[str, QueueReport]:
    from kueued.scheduling import policies as pol
    held = pol.local_queue_usage(world, cq.name)
    capacity = pol.capacity_of(cq)
    out = {}
    for key, lq in sorted(world.local_queues.items()):
        if lq.spec.cluster_queue != cq.name:
            continue
        fs, used = lq.spec.fair_sharing, held.get(key, {})
        share = pol.fair_share(pol.per_resource(used), capacity, weight=parse_weight(fs))
        out[f"LocalQueue/{key}"] = QueueReport("LocalQueue", parent=cq.name, depth=depth,
                                               weight=_quantity(fs.weight if fs is not None else None),
                                               usage=_by_flavor(used), share=_per_mille(share), share_basis="fair")
    return out


def _tree_order(node: QuotaNode) -> tuple[bool, str]:
    return (not node.is_cohort, node.name)


def _by_flavor(amounts: dict[FR, int]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for (flavor, res), v in sorted(amounts.items()):
        if v < UNLIMITED:  # "no limit" is no quantity: it is left out, never written as a word
            out.setdefault(flavor, {})[res] = format_milli(v, resource=res)
    return out


def _quantity(value: str | int | float | None) -> str | None:
    return None if value is None else str(value)


def _per_mille(share: Fraction | float | None) -> int | None:
    if share is None:
        return None
    return 2**63 - 1 if share == math.inf else math.ceil(share)


def quantity_map(amounts: dict[str, int]) -> dict[str, str]:
    return {r: format_milli(v, resource=r) for r, v in sorted(amounts.items()) if v < UNLIMITED}


# --- time: arrivals, run times, a clock (kueued.timeline) ----------------------------------------
TimedRunner = Callable[..., Report]  # (world, timeline, *, real, progress) -> Report


class TimedRun(NamedTuple):
    report: Report
    summary: Any       # kueued.timeline.Summary
    timeline: Any      # kueued.timeline.Timeline: samples and times, for plots


def simulate_timed(manifests: list[dict[str, Any]] | Any, *, runner: TimedRunner,
                   real: bool = False, progress: Callable[[int, int], None] | None = None,
                   per_workload: bool = True) -> TimedRun:
    """Apply the setup, play the arrivals on a clock with ``runner`` (``actors.simulation``'s).

    ``manifests`` is a list of manifests or a :class:`kueued.trace.Trace`.  Returns the final
    :class:`Report` (finished workloads appear as ``finished``), the ``Summary`` and the timeline.
    """
    import time

    from kueued.timeline import Timeline
    from kueued.trace import Trace, trace_from
    trace = manifests if isinstance(manifests, Trace) else trace_from(manifests)
    world = World()
    for m in trace.setup:
        world.apply(m)
    timeline = Timeline(trace, world)
    started = time.perf_counter()
    report = runner(world, timeline, real=real, progress=progress)
    host = time.perf_counter() - started
    for key, t in timeline.times.items():
        if t.finished_ms is not None:
            report.workloads[key] = WorkloadReport("finished", t.cluster_queue, preemptions=t.evictions)
    report.workloads = dict(sorted(report.workloads.items()))
    summary = timeline.summary(clock="real" if real else "virtual", engine="actors",
                               host_seconds=host, per_workload=per_workload)
    return TimedRun(report, summary, timeline)


def render_summary(summary: Any, console: Any = None, *, reference: dict[str, Any] | None = None) -> None:
    """The checker's figures as tables (``reference``: Kueue's, from a rangespec, shown beside)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    console = console or Console(width=160)
    head = Table(title=f"Timeline ({summary.clock} clock, {summary.engine} engine)")
    for col in ("wall", "host time", "admissions", "evictions", "finished", "pending"):
        head.add_column(col, justify="right")
    head.add_row(f"{summary.wall_ms / 1000:.3f} s", f"{summary.host_seconds:.2f} s", str(summary.admissions),
                 str(summary.evictions), str(summary.finished), str(summary.pending))
    console.print(head)
    ref_usage = (reference or {}).get("clusterQueueClassesMinUsage") or {}
    cqs = Table(title="ClusterQueue classes")
    for col in ("class", "queues", "nominal cpu", "cpu usage", "Kueue's minimum"):
        cqs.add_column(col, justify="right")
    for name, c in summary.cluster_queue_classes.items():
        cqs.add_row(Text(name), str(c.cluster_queues), f"{c.nominal_cpu:g}", f"{c.cpu_usage_percent:.1f} %",
                    f"{ref_usage[name]} %" if name in ref_usage else "")
    console.print(cqs)
    ref_wait = (reference or {}).get("wlClassesMaxAvgTimeToAdmissionMs") or {}
    wls = Table(title="Workload classes")
    for col in ("class", "workloads", "admitted", "avg time to admission", "Kueue's maximum"):
        wls.add_column(col, justify="right")
    for name, w in summary.workload_classes.items():
        avg = "" if w.average_time_to_admission_ms is None else f"{w.average_time_to_admission_ms / 1000:.3f} s"
        wls.add_row(Text(name), str(w.workloads), str(w.admitted), avg,
                    f"{ref_wait[name] / 1000:g} s" if name in ref_wait else "")
    console.print(wls)


def usage_by_cohort(world: World, samples: list[tuple[int, dict[str, int]]]) -> dict[str, list[float]]:
    """The usage chart's lines: reserved cpu per sample, summed per cohort ("cohort NAME"); a
    ClusterQueue in no cohort is a line of its own ("ClusterQueue NAME", never merged into a
    Cohort of the same name)."""
    line_of = {n: f"cohort {cq.spec.cohort_name}" if cq.spec.cohort_name else f"ClusterQueue {n}"
               for n, cq in world.cluster_queues.items()}
    lines: dict[str, list[float]] = {}
    for i, (_, held) in enumerate(samples):
        for cq, v in held.items():
            series = lines.setdefault(line_of.get(cq, f"ClusterQueue {cq}"), [0.0] * len(samples))
            series[i] += v / 1000
    return lines


def write_plots(timeline: Any, summary: Any, directory: Path) -> list[Path]:
    """PNG charts: usage over time per cohort, time-to-admission distribution per class."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ManifestError("--plot needs matplotlib: pip install 'kueued[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    directory.mkdir(parents=True, exist_ok=True)
    xs = [t / 1e6 for t, _ in timeline.samples]
    per_cohort = usage_by_cohort(timeline.world, timeline.samples)
    fig, ax = plt.subplots(figsize=(10, 5))
    for name, ys in sorted(per_cohort.items()):
        ax.step(xs, ys, where="post", label=name)
    ax.set(xlabel="time (s)", ylabel="reserved cpu", title="Usage over time per cohort")
    if len(per_cohort) <= 12:
        ax.legend(fontsize="small")
    usage = directory / "usage.png"
    fig.savefig(usage, dpi=110)
    plt.close(fig)
    waits: dict[str, list[float]] = {}
    for a in timeline.trace.arrivals:
        t = timeline.times.get(a.key)
        if t is not None and t.admitted_ms is not None:
            waits.setdefault(a.klass, []).append((t.admitted_ms - t.arrival_ms) / 1000)
    fig, ax = plt.subplots(figsize=(10, 5))
    for name, ws in sorted(waits.items()):
        ax.hist(ws, bins=50, alpha=0.6, label=f"{name} (n={len(ws)})")
    ax.set(xlabel="time to admission (s)", ylabel="workloads", title="Time to admission per class")
    ax.legend(fontsize="small")
    tta = directory / "time_to_admission.png"
    fig.savefig(tta, dpi=110)
    plt.close(fig)
    return [usage, tta]
