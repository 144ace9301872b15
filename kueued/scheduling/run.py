"""Wiring: which preemptor and admission order a World's settings call for, and a
synchronous run to quiescence producing a :class:`~kueued.simulate.Report`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kueued.scheduling.cycle import Iterate, Preemptor, Target
from kueued.scheduling.flavors import Assignment, Mode
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import World

if TYPE_CHECKING:
    from kueued.scheduling.fairsharing.admission import AdmissionFairSharing

__all__ = ["make_preemptor", "make_iterate", "run_sync", "NoPreemption", "elastic_inputs", "merge_outcome"]


class NoPreemption:
    """A preemptor that never finds candidates (used where preemption is not wanted)."""

    def oracle(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: tuple[str, str], value: int) -> Mode:
        return Mode.NO_CANDIDATES

    def get_targets(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, assignment: Assignment) -> list[Target]:
        return []


def make_preemptor(snapshot: Snapshot, world: World, *, afs: AdmissionFairSharing | None = None) -> Preemptor:
    """The cycle's preemptor; ``afs`` is the engine's admission fair sharing, whose
    LocalQueue usage orders fair-sharing candidates within a ClusterQueue."""
    try:
        if world.settings.fair_sharing:
            from kueued.scheduling.fairsharing import FairPreemptor
            return FairPreemptor(snapshot, settings=world.settings,
                                 lq_usage=afs.local_queue_usage() if afs is not None else None)
        from kueued.scheduling.preemption import ClassicalPreemptor
        return ClassicalPreemptor(snapshot, settings=world.settings)
    except ImportError:
        return NoPreemption()


def make_iterate(world: World) -> Iterate:
    """Fair sharing's tournament; else KEP-1093 policies, which are Kueue's order without annotations.

    With fair sharing on, ``kueued.io/admission-policy`` annotations are ignored.
    """
    if world.settings.fair_sharing:
        try:
            from kueued.scheduling.fairsharing import fair_order
            return fair_order
        except ImportError:
            pass
    from kueued.scheduling.policies import PolicyOrder
    return PolicyOrder(world)


def run_sync(world: World):  # -> Report
    from kueued.scheduling.engine import Engine
    from kueued.simulate import report_from
    engine = Engine(world, preemptor=make_preemptor, iterate=make_iterate(world))
    engine.rebuild()
    engine.run()
    report = report_from(world, reasons=engine.reasons, unrouted=engine.unrouted, events=engine.events,
                         cycles=engine.cycles, snapshot=engine.state)
    merge_elastic(world, report)
    return report


def elastic_inputs(world: World) -> tuple[list[dict], list[dict], list[dict]] | None:
    """(ElasticQuotas, the workloads carrying the quota label, Nodes), or None without ElasticQuotas."""
    if not world.elastic_quotas:
        return None
    labelled = [world.raw[f"Workload/{k}"] for k, wl in world.workloads.items()
                if world.route(wl)[1] == "elastic" and f"Workload/{k}" in world.raw]
    return list(world.elastic_quotas.values()), labelled, list(world.nodes.values())


def merge_elastic(world: World, report) -> None:
    inputs = elastic_inputs(world)
    if inputs is None:
        return
    try:
        from kueued.scheduling.elastic import run_elastic
    except ImportError:
        return
    merge_outcome(report, run_elastic(*inputs))


def merge_outcome(report, outcome) -> None:
    """Put an ElasticOutcome (from either engine) into a Report; its evictions follow Kueue's."""
    from kueued.simulate import WorkloadReport, quantity_map
    for key, r in outcome.workloads.items():
        report.workloads[key] = WorkloadReport(r.state, r.cluster_queue if r.state == "admitted" else None,
                                               None, r.preemptions, r.reason or None)
    for name, g in outcome.quota_groups.items():
        report.quota_groups[name] = {"runtime": quantity_map(g.runtime), "request": quantity_map(g.request)}
    report.evictions = [*report.evictions,
                        *({"workload": e.workload, "by": e.by, "reason": e.reason} for e in outcome.evictions)]


def queue_order_hook(owner, cq: ClusterQueueSnapshot, *, afs: AdmissionFairSharing):  # owner: Engine or Coordinator
    """How a ClusterQueue's pending heap orders workloads beyond Kueue's default: admission
    fair sharing (KEP-4136, the owner's ``afs``) where its admissionScope asks, else a
    KEP-1093 LocalQueue policy.  One place, so the pure core and the actors can never
    order differently."""
    from kueued.scheduling.policies import local_queue_hook
    return afs.usage_hook(cq) or local_queue_hook(owner, cq)


def forest_of(world: World) -> Snapshot:
    """The quota forest (zero usage) for the world's current objects and settings."""
    from kueued.scheduling.forest import build_forest
    return build_forest(cluster_queues=world.cluster_queues, cohorts=world.cohorts, flavors=world.flavors,
                        fair_sharing=world.settings.fair_sharing, settings=world.settings)
