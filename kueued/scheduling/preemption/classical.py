"""Classical preemption (fair sharing off): Kueue's ``classicalPreemptions``.

The scheduling cycle asks two questions of a :class:`ClassicalPreemptor`, both
answered by the same search on the cycle's snapshot:

* during flavor assignment, :meth:`~ClassicalPreemptor.oracle` (Kueue's
  ``PreemptionOracle.SimulatePreemption``) runs the search for one FR and the amount
  the workload would put on it: no victims => NO_CANDIDATES, a victim in the own
  ClusterQueue => PREEMPT, victims only elsewhere => RECLAIM; with the borrowing level
  the workload would have once those victims are gone;
* for a head whose assignment needs preemption, :meth:`~ClassicalPreemptor.get_targets`
  runs it over every FR whose mode needs preemption, with the workload's whole usage.

The search (:func:`classical_targets`) collects and classifies candidates
(:mod:`.candidates`) and makes one or two *attempts*, each either allowing the
preemptor to borrow afterwards or not:

* no candidate outside the own ClusterQueue, or borrowWithinCohort forbidden while
  the ClusterQueue is not strictly under nominal on every needed FR => [borrow];
* borrowWithinCohort forbidden and no hierarchical-reclaim candidate => [no-borrow,
  borrow];
* otherwise [borrow, no-borrow].

An attempt walks the ordered candidates, skipping invalid ones (:func:`is_valid`:
ReclaimWithoutBorrowing in a borrowing attempt, or a ClusterQueue back within quota),
removing each from the snapshot until the workload fits (:mod:`.minimal`), then fills
back.  The first attempt that fits wins; the snapshot is always restored.

Candidates come from :func:`~.stream.candidate_stream` (the same sequence as
``collect_candidates(...).ordered()``, produced lazily).  A head whose one pod set asks
for one resource gets the same search from ``get_targets`` as from the oracle of the
flavor it was given, on the same snapshot: the oracle keeps its targets for the
``get_targets`` that follows it in the same nomination.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kueued.quota.node import FR
from kueued.scheduling.cycle import Target
from kueued.scheduling.flavors import Assignment, Mode, lowest_fitting_height
from kueued.scheduling.preemption import policy
from kueued.scheduling.preemption.candidates import CandidateSet, is_valid
from kueued.scheduling.preemption.minimal import minimal_targets, workload_fits
from kueued.scheduling.preemption.policy import borrow_within_cohort
from kueued.scheduling.preemption.stream import CandidateStream, candidate_stream
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["ClassicalPreemptor", "classical_targets", "attempts", "search_attempts"]


class ClassicalPreemptor:
    """The cycle's :class:`~kueued.scheduling.cycle.Preemptor` when fair sharing is off."""

    def __init__(self, snapshot: Snapshot, *, settings: object = None) -> None:
        self.snapshot = snapshot
        self.settings = settings
        # the oracle's searches for the workload being nominated, by (queue, FR, amount)
        self._nominee: WorkloadInfo | None = None
        self._found: dict[tuple[str, FR, int], list[Target]] = {}

    def oracle(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FR, value: int) -> tuple[Mode, int]:
        targets = classical_targets(self.snapshot, cq, wl, {fr: value}, {fr})
        if wl is not self._nominee:
            self._nominee, self._found = wl, {}
        self._found[(cq.name, fr, value)] = targets
        return oracle_mode(self.snapshot, cq, fr, value, targets)

    def get_targets(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, assignment: Assignment) -> list[Target]:
        frs = assignment.frs_needing_preemption()
        if not frs:
            return []
        found, self._nominee, self._found = self._found if wl is self._nominee else {}, None, {}
        if len(assignment.usage) == 1 and len(frs) == 1:
            # Nothing changed the snapshot since the flavor assigner asked the oracle
            # this very question (run_cycle nominates one head at a time).
            (fr, value), = assignment.usage.items()
            if fr in frs and (cq.name, fr, value) in found:
                return list(found[(cq.name, fr, value)])
        return classical_targets(self.snapshot, cq, wl, assignment.usage, frs)


def attempts(cq: ClusterQueueSnapshot, candidates: CandidateSet | CandidateStream, frs: set[FR]) -> list[bool]:
    """Which attempts to make, in order: True = the preemptor may borrow afterwards."""
    forbidden, _ = borrow_within_cohort(cq)
    if candidates.none_from_other_queues or (forbidden and not _under_nominal(cq, frs)):
        return [True]
    if forbidden and candidates.none_for_hierarchical_reclaim:
        return [False, True]
    return [True, False]


def _under_nominal(cq: ClusterQueueSnapshot, frs: set[FR]) -> bool:
    """Kueue's ``queueUnderNominalInResourcesNeedingPreemption``: strictly under, every FR."""
    return all(cq.usage(fr) < cq.nominal(fr) for fr in frs)


def classical_targets(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo,
                      requests: Mapping[FR, int], frs: set[FR]) -> list[Target]:
    """The victims that let ``wl`` fit in ``cq``, or [] when preemption cannot help."""
    if policy.never_preempts(cq):
        return []  # a queue that never preempts has no candidates (the stream would be empty)
    candidates = candidate_stream(snapshot, cq, wl, requests, frs)
    if candidates.empty:
        return []
    return search_attempts(snapshot, cq, requests, frs, attempts(cq, candidates, frs),
                           lambda borrowing: candidates.ordered(borrowing=borrowing))


def search_attempts(snapshot: Snapshot, cq: ClusterQueueSnapshot, requests: Mapping[FR, int], frs: set[FR],
                    tries: Iterable[bool], ordered: Callable[[bool], Iterable[Any]]) -> list[Target]:
    """The first attempt (borrowing or not, in ``tries`` order) whose valid candidates, taken in
    ``ordered(borrowing)`` order, yield a minimal victim set that lets the request fit."""
    for borrowing in tries:
        def valid(borrowing: bool = borrowing) -> Iterator[Target]:
            for c in ordered(borrowing):
                if is_valid(snapshot, cq, c, frs, borrowing=borrowing):
                    yield Target(c.wl, c.variant.reason)

        def fits(borrowing: bool = borrowing) -> bool:
            return workload_fits(cq, requests, allow_borrowing=borrowing)

        # workload_fits only turns false as usage comes back (available shrinks, borrowing grows)
        targets = minimal_targets(snapshot, valid(), fits, monotone=True)
        if targets:
            return targets
    return []


def oracle_mode(snapshot: Snapshot, cq: ClusterQueueSnapshot, fr: FR, value: int,
                targets: list[Target]) -> tuple[Mode, int]:
    """Kueue's ``SimulatePreemption`` verdict from the targets found for one FR: no candidates,
    preempt (a target in the preemptor's own queue) or reclaim, with the borrowing level the
    preemptor would have once the targets are gone."""
    if not targets:
        return Mode.NO_CANDIDATES, lowest_fitting_height(cq, fr, value)[0]
    with snapshot.without(t.workload for t in targets):
        borrow = lowest_fitting_height(cq, fr, value)[0]
    if any(t.workload.cluster_queue == cq.name for t in targets):
        return Mode.PREEMPT, borrow
    return Mode.RECLAIM, borrow
