"""Wiring: which preemptor, admission order and queue order a World's settings call for, and
the quota forest its objects make; the actors' coordinator builds each cycle from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kueued.scheduling.cycle import Iterate, Preemptor, Target
from kueued.scheduling.fairsharing import FairPreemptor, fair_order
from kueued.scheduling.fairsharing.classical import AfsClassicalPreemptor
from kueued.scheduling.flavors import Assignment, Mode
from kueued.scheduling.forest import build_forest
from kueued.scheduling.policies import PolicyOrder, local_queue_hook
from kueued.scheduling.preemption import ClassicalPreemptor
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import World

if TYPE_CHECKING:
    from kueued.scheduling.fairsharing.admission import AdmissionFairSharing

__all__ = ["PreemptorFactory", "make_preemptor", "make_iterate", "NoPreemption", "elastic_inputs",
           "queue_order_hook", "forest_of"]


class PreemptorFactory(Protocol):
    """Makes each cycle's preemptor; ``afs`` is the coordinator's admission fair sharing."""

    def __call__(self, snapshot: Snapshot, world: World, /, *, afs: AdmissionFairSharing) -> Preemptor: ...


class NoPreemption:
    """A preemptor that never finds candidates (used where preemption is not wanted)."""

    def oracle(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: tuple[str, str], value: int) -> Mode:
        return Mode.NO_CANDIDATES

    def get_targets(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, assignment: Assignment) -> list[Target]:
        return []


def make_preemptor(snapshot: Snapshot, world: World, *, afs: AdmissionFairSharing | None = None) -> Preemptor:
    """The cycle's preemptor; ``afs`` is the engine's admission fair sharing, whose
    LocalQueue usage orders the candidates within a ClusterQueue (busier LocalQueue first),
    with fair sharing and classically alike, as Kueue does when AFS is enabled."""
    lq_usage = afs.local_queue_usage() if afs is not None else None
    if world.settings.fair_sharing:
        return FairPreemptor(snapshot, settings=world.settings, lq_usage=lq_usage)
    if lq_usage is not None:
        return AfsClassicalPreemptor(snapshot, settings=world.settings, lq_usage=lq_usage)
    return ClassicalPreemptor(snapshot, settings=world.settings)


def make_iterate(world: World) -> Iterate:
    """Fair sharing's tournament; else KEP-1093 policies, which are Kueue's order without annotations.

    With fair sharing on, ``kueued.io/admission-policy`` annotations are ignored.
    """
    if world.settings.fair_sharing:
        return fair_order
    return PolicyOrder(world)


def elastic_inputs(world: World) -> tuple[list[dict], list[dict], list[dict]] | None:
    """(ElasticQuotas, the workloads carrying the quota label, Nodes), or None without ElasticQuotas."""
    if not world.elastic_quotas:
        return None
    labelled = [world.raw[f"Workload/{k}"] for k, wl in world.workloads.items()
                if world.route(wl)[1] == "elastic" and f"Workload/{k}" in world.raw]
    return list(world.elastic_quotas.values()), labelled, list(world.nodes.values())


def queue_order_hook(owner, cq: ClusterQueueSnapshot, *, afs: AdmissionFairSharing):  # owner: the Coordinator
    """How a ClusterQueue's pending heap orders workloads beyond Kueue's default: admission
    fair sharing (KEP-4136, the owner's ``afs``) where its admissionScope asks, else a
    KEP-1093 LocalQueue policy (``fair``, ``capacity``), whose usage is gathered again
    whenever ``afs.observe`` marks a new round."""
    return afs.usage_hook(cq) or local_queue_hook(owner.world, cq, epoch=lambda: afs.epoch)


def forest_of(world: World) -> Snapshot:
    """The quota forest (zero usage) for the world's current objects and settings."""
    return build_forest(cluster_queues=world.cluster_queues, cohorts=world.cohorts, flavors=world.flavors,
                        fair_sharing=world.settings.fair_sharing, settings=world.settings)
