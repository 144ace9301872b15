"""Fair-sharing preemption: Kueue's ``fairPreemptions`` (KEP-1714, hierarchical since 0.11).

Candidates (``findCandidates``): the preemptor's own admitted workloads allowed by
``withinClusterQueue``, plus, when the ClusterQueue has a cohort and
``reclaimWithinCohort`` is not Never, the workloads allowed by it in every other
ClusterQueue of the tree that borrows on a flavor-resource needing preemption
(``borrowWithinCohort`` plays no part).  A candidate must use one of those
flavor-resources.  They are sorted by the shared candidate order
(``kueued.scheduling.preemption.ordering``).

With the preemptor's usage simulated on its ClusterQueue, :class:`TargetOrdering`
picks ClusterQueues by share and the first strategy (default
LessThanOrEqualToFinalShare) judges their candidates:

* a candidate of the preemptor's own ClusterQueue is taken (InClusterQueue);
* if the preemptor's ClusterQueue stays within nominal on every flavor-resource
  needing preemption (gate FairSharingPreemptWithinNominal), any candidate is taken
  (InCohortReclamation);
* otherwise the shares compared are those of the *almost-LCAs*, the children of the
  lowest common ancestor on the preemptor's and the target's paths: the preemptor
  side with the incoming workload (``new``), the target side before and after
  removing the candidate (``old``, ``after``).  LessThanOrEqualToFinalShare needs
  ``new <= after``, LessThanInitialShare ``new < old``.  A passing candidate is taken
  (InCohortFairSharing) and the walk restarts (shares moved); failing ones wait for
  the second strategy.  If the preemptor side is a zero-weight borrower (+Inf) and
  the target side is not, nothing there can pass: the whole queue waits.

The second strategy (LessThanInitialShare) walks the waiting candidates the same way
but takes at most one per ClusterQueue.  The search stops as soon as the preemptor
fits (borrowing allowed); if it never does, nothing is preempted.  Otherwise the
victims are filled back (``kueued.scheduling.preemption.minimal``) and returned.

The preemption oracle of the flavor assigner runs the same search for a single
flavor-resource: no victims means NO_CANDIDATES, a victim in the own queue PREEMPT,
all victims elsewhere RECLAIM; with the borrowing level the preemptor would have once
its victims are gone (that level ranks flavors, e.g. under PreemptionOverBorrowing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kueued.model.settings import Settings
from kueued.quota.node import FR
from kueued.scheduling.cycle import Target
from kueued.scheduling.fairsharing import gates
from kueued.scheduling.fairsharing.ordering import TargetOrdering, almost_lcas, cluster_queues_under
from kueued.scheduling.fairsharing.share import DRS, Shares, compare
from kueued.scheduling.flavors import Assignment, Mode
from kueued.scheduling.preemption.classical import oracle_mode
from kueued.scheduling.preemption.minimal import fill_back, restore, workload_fits
from kueued.scheduling.preemption.ordering import LocalQueueUsage, candidate_order_key, compare_candidates
from kueued.scheduling.preemption.policy import NEVER, satisfies_preemption_policy
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["FairPreemptor", "STRATEGIES", "less_than_or_equal_to_final_share", "less_than_initial_share",
           "fair_targets"]

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"


def less_than_or_equal_to_final_share(preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    """Rule S2-a: the preemptor ends no higher than the target after the removal."""
    return compare(preemptor_new, target_new) <= 0


def less_than_initial_share(preemptor_new: DRS, target_old: DRS, target_new: DRS | None = None) -> bool:
    """Rule S2-b: the preemptor ends strictly below where the target started."""
    return compare(preemptor_new, target_old) < 0


Strategy = Callable[[DRS, DRS, DRS], bool]

STRATEGIES: dict[str, Strategy] = {
    "LessThanOrEqualToFinalShare": less_than_or_equal_to_final_share,
    "LessThanInitialShare": less_than_initial_share,
}


class _Search:
    """One target search: the snapshot is mutated while it runs and restored by the caller."""

    def __init__(self, snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo,
                 usage: Mapping[FR, int], frs: set[FR], settings: Settings | None,
                 lq_usage: LocalQueueUsage | None) -> None:
        self.snapshot = snapshot
        self.cq = cq
        self.wl = wl
        self.usage = dict(usage)
        self.frs = frs
        self.settings = settings
        self.shares = Shares(snapshot)
        self.lq_usage = lq_usage
        self.compare: Callable[[WorkloadInfo, WorkloadInfo], int] = (
            lambda a, b: compare_candidates(a, b, cq.name, self.lq_usage))

    # --- candidates ------------------------------------------------------------------------
    def candidates(self) -> list[WorkloadInfo]:
        policy = self.cq.spec.preemption
        found: list[WorkloadInfo] = []
        if policy.within_cluster_queue not in ("", NEVER):
            found += self._allowed(self.cq, policy.within_cluster_queue)
        if self.cq.node.parent is not None and policy.reclaim_within_cohort not in ("", NEVER):
            for node in cluster_queues_under(self.cq.node.root()):
                other = self.snapshot.cluster_queues[node.name]
                if other is self.cq or not any(other.borrowing(fr) for fr in self.frs):
                    continue
                found += self._allowed(other, policy.reclaim_within_cohort)
        key: Any = candidate_order_key(self.cq.name, lq_usage=self.lq_usage)
        return sorted(found, key=key)

    def _allowed(self, cq: ClusterQueueSnapshot, policy: str) -> list[WorkloadInfo]:
        return [c for c in cq.workloads.values()
                if satisfies_preemption_policy(policy, self.wl, c) and any(fr in c.usage for fr in self.frs)]

    # --- simulation helpers ----------------------------------------------------------------
    def _add_preemptor(self) -> None:
        self.cq.add_usage(self.usage)

    def _remove_preemptor(self) -> None:
        self.cq.remove_usage(self.usage)

    def fits(self) -> bool:
        """With the preemptor's simulated usage taken out again, does it fit (borrowing allowed)?"""
        self._remove_preemptor()
        try:
            return workload_fits(self.cq, self.usage, allow_borrowing=True)
        finally:
            self._add_preemptor()

    def shares_at(self, target: ClusterQueueSnapshot) -> tuple[DRS, DRS]:
        mine, theirs = almost_lcas(self.cq.node, target.node)
        return self.shares.of(mine), self.shares.of(theirs)

    def target_share_after(self, target: ClusterQueueSnapshot, victim: WorkloadInfo) -> DRS:
        target.remove_usage(victim.usage)
        try:
            return self.shares.of(almost_lcas(self.cq.node, target.node)[1])
        finally:
            target.add_usage(victim.usage)

    # --- the strategies --------------------------------------------------------------------
    def first(self, candidates: list[WorkloadInfo], strategy: Strategy,
              within_nominal: bool) -> Iterator[Target | list[WorkloadInfo]]:
        """Yields targets (already removed from the snapshot); finally the retry list."""
        retry: list[WorkloadInfo] = []
        ordering = TargetOrdering(self.snapshot, self.shares, self.cq, candidates,
                                  compare_candidates=self.compare)
        for target_cq in ordering.targets():
            if target_cq is self.cq:
                yield self._take(ordering.pop(target_cq), IN_CLUSTER_QUEUE)
                continue
            if within_nominal:
                yield self._take(ordering.pop(target_cq), IN_COHORT_RECLAMATION)
                continue
            preemptor_new, target_old = self.shares_at(target_cq)
            if preemptor_new.zero_weight_borrows and not target_old.zero_weight_borrows:
                while ordering.has_workload(target_cq.name):
                    retry.append(ordering.pop(target_cq))
                continue
            while ordering.has_workload(target_cq.name):
                victim = ordering.pop(target_cq)
                target_new = self.target_share_after(target_cq, victim)
                if strategy(preemptor_new, target_old, target_new):
                    yield self._take(victim, IN_COHORT_FAIR_SHARING)
                    break  # shares moved: the walk may pick another queue now
                retry.append(victim)
        yield retry

    def second(self, candidates: list[WorkloadInfo]) -> Iterator[Target]:
        ordering = TargetOrdering(self.snapshot, self.shares, self.cq, candidates,
                                  compare_candidates=self.compare)
        for target_cq in ordering.targets():
            preemptor_new, target_old = self.shares_at(target_cq)
            victim = ordering.pop(target_cq)
            if less_than_initial_share(preemptor_new, target_old):
                yield self._take(victim, IN_COHORT_FAIR_SHARING)
            ordering.drop(target_cq)

    def _take(self, victim: WorkloadInfo, reason: str) -> Target:
        self.snapshot.remove_workload(victim)
        return Target(victim, reason)

    def within_nominal(self) -> bool:
        """Is the preemptor's queue (its usage simulated) within nominal on the contested FRs?"""
        return all(not self.cq.borrowing(fr) for fr in self.frs)

    def run(self, strategies: list[Strategy]) -> list[Target]:
        candidates = self.candidates()
        if not candidates:
            return []
        taken: list[Target] = []
        fits = False
        self._add_preemptor()
        try:
            fits = self._try(candidates, strategies, taken)
        finally:
            self._remove_preemptor()
        if not fits:
            restore(self.snapshot, reversed(taken))
            return []
        kept = fill_back(self.snapshot, taken,
                         lambda: workload_fits(self.cq, self.usage, allow_borrowing=True))
        restore(self.snapshot, reversed(kept))
        return kept

    def _try(self, candidates: list[WorkloadInfo], strategies: list[Strategy], taken: list[Target]) -> bool:
        retry: list[WorkloadInfo] = []
        for _ in range(2 if gates.enabled(self.settings, "FairSharingReevaluatePreemptionCandidates") else 1):
            # asked again each pass (Kueue's iterateWithFirstFsStrategy): what the last pass took
            # from the preemptor's own queue may have brought it back within nominal
            within = gates.enabled(self.settings, "FairSharingPreemptWithinNominal") and self.within_nominal()
            before = len(taken)
            for item in self.first(candidates, strategies[0], within):
                if isinstance(item, list):
                    retry = item
                    break
                taken.append(item)
                if self.fits():
                    return True
            own = any(t.workload.cluster_queue == self.cq.name for t in taken[before:])
            if not own:
                break
            candidates = retry  # the preemptor's share dropped: its skipped candidates may pass now
        if len(strategies) > 1:
            for target in self.second(retry):
                taken.append(target)
                if self.fits():
                    return True
        return False


def fair_targets(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo, usage: Mapping[FR, int],
                 frs: set[FR], *, settings: Settings | None = None,
                 strategies: list[str] | None = None, lq_usage: LocalQueueUsage | None = None) -> list[Target]:
    """The victims that let ``wl`` (with ``usage``) into ``cq`` under fair sharing; [] if none do.

    ``lq_usage`` is admission fair sharing's LocalQueue usage
    (:meth:`~kueued.scheduling.fairsharing.admission.AdmissionFairSharing.local_queue_usage`):
    within one ClusterQueue, candidates of busier LocalQueues go first.
    """
    names = strategies or (settings.preemption_strategies if settings is not None else None) \
        or ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    funcs = [STRATEGIES[n] for n in names if n in STRATEGIES]
    if not funcs or not frs:
        return []
    return _Search(snapshot, cq, wl, usage, frs, settings, lq_usage).run(funcs)


class FairPreemptor:
    """The cycle's :class:`~kueued.scheduling.cycle.Preemptor` when fair sharing is on."""

    def __init__(self, snapshot: Snapshot, *, settings: Settings | None = None,
                 lq_usage: LocalQueueUsage | None = None) -> None:
        self.snapshot = snapshot
        self.settings = settings
        self.lq_usage = lq_usage
        if settings is not None:
            gates.remember_settings(snapshot, settings)

    def oracle(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FR, value: int) -> tuple[Mode, int]:
        """Kueue's ``SimulatePreemption``: the mode and the borrowing level after the victims go."""
        targets = fair_targets(self.snapshot, cq, wl, {fr: value}, {fr}, settings=self.settings,
                               lq_usage=self.lq_usage)
        return oracle_mode(self.snapshot, cq, fr, value, targets)

    def get_targets(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, assignment: Assignment) -> list[Target]:
        return fair_targets(self.snapshot, cq, wl, assignment.usage, assignment.frs_needing_preemption(),
                            settings=self.settings, lq_usage=self.lq_usage)
