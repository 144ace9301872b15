"""Classical preemption with admission fair sharing's victim order (KEP-4136, Kueue >= 0.13).

Kueue's ``CandidatesOrdering`` has one rule that only admission fair sharing turns on:
within one ClusterQueue, a victim of a LocalQueue with higher consumed usage goes
before one of a LocalQueue with lower usage, ahead of priority (key 2 of
:mod:`kueued.scheduling.preemption.ordering`).  Kueue applies it whenever admission fair
sharing is enabled, with or without ``fairSharing``; the fair-sharing preemptor already
takes the usage, this is the classical one's.

The classical search streams candidates from per-ClusterQueue runs sorted by priority
(:mod:`kueued.scheduling.preemption.stream`), which this rule breaks, so the search here
takes Kueue's straightforward candidate lists
(:func:`~kueued.scheduling.preemption.candidates.collect_candidates`, sorted with the
usage) and otherwise runs exactly :func:`~kueued.scheduling.preemption.classical.classical_targets`:
the same attempts, validity rule, minimal set and fill-back.  Only a cycle in which some
ClusterQueue uses admission fair sharing pays for it (:func:`kueued.engine.wiring.make_preemptor`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kueued.quota.node import FR
from kueued.scheduling.cycle import Target
from kueued.scheduling.flavors import Assignment, Mode
from kueued.scheduling.preemption.candidates import collect_candidates
from kueued.scheduling.preemption.classical import attempts, oracle_mode, search_attempts
from kueued.scheduling.preemption.ordering import LocalQueueUsage
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["AfsClassicalPreemptor", "afs_classical_targets"]

_OFF = ("", "Never")


def afs_classical_targets(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo,
                          requests: Mapping[FR, int], frs: set[FR], lq_usage: LocalQueueUsage) -> list[Target]:
    """``classical_targets`` with the candidates in admission fair sharing's order."""
    spec = cq.spec.preemption
    if spec.within_cluster_queue in _OFF and spec.reclaim_within_cohort in _OFF:
        return []
    candidates = collect_candidates(snapshot, cq, wl, requests, frs, lq_usage=lq_usage)
    if not len(candidates):
        return []
    ordered = candidates.ordered()
    return search_attempts(snapshot, cq, requests, frs, attempts(cq, candidates, frs), lambda _: ordered)


class AfsClassicalPreemptor:
    """The cycle's preemptor when fair sharing is off and some ClusterQueue uses AFS."""

    def __init__(self, snapshot: Snapshot, *, lq_usage: LocalQueueUsage, settings: object = None) -> None:
        self.snapshot = snapshot
        self.settings = settings
        self.lq_usage = lq_usage

    def oracle(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FR, value: int) -> tuple[Mode, int]:
        targets = afs_classical_targets(self.snapshot, cq, wl, {fr: value}, {fr}, self.lq_usage)
        return oracle_mode(self.snapshot, cq, fr, value, targets)

    def get_targets(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, assignment: Assignment) -> list[Target]:
        frs = assignment.frs_needing_preemption()
        if not frs:
            return []
        return afs_classical_targets(self.snapshot, cq, wl, assignment.usage, set(frs), self.lq_usage)
