"""Which admitted workloads a preemptor may evict at all: Kueue's preemption policies.

A ClusterQueue's ``spec.preemption`` holds three knobs (``apis/kueue/v1beta2``):

* ``withinClusterQueue`` judges the workloads of the preemptor's own ClusterQueue;
* ``reclaimWithinCohort`` judges the workloads of every other ClusterQueue of the
  cohort tree;
* ``borrowWithinCohort`` (KEP-1337) says whether a preemptor that will still borrow
  afterwards may take quota from other ClusterQueues, and below which priority.

The first two share one vocabulary (``common/preemption_policy.go``
``SatisfiesPreemptionPolicy``): ``Never``; ``LowerPriority`` (strictly lower);
``LowerOrNewerEqualPriority`` (lower, or equal and queued after the preemptor);
``Any``.  Priorities are effective priorities; the queue-order timestamp is the
creation time (a preempted workload keeps it).

KEP-1337 guards against flopping: a borrowing preemptor may only evict, in other
ClusterQueues, workloads of strictly lower priority than its own, and with
``maxPriorityThreshold`` only those at or below the threshold.  Workloads above that
line stay evictable only if the preemptor would not borrow afterwards
(:func:`above_borrowing_threshold`), so a victim can never turn around and evict its
preemptor with the same rule.
"""

from __future__ import annotations

from kueued.scheduling.snapshot import ClusterQueueSnapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["NEVER", "LOWER_PRIORITY", "LOWER_OR_NEWER_EQUAL_PRIORITY", "ANY",
           "never_preempts", "satisfies_preemption_policy", "borrow_within_cohort", "above_borrowing_threshold"]

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
ANY = "Any"


def never_preempts(cq: ClusterQueueSnapshot) -> bool:
    """Neither withinClusterQueue nor reclaimWithinCohort preempts: the classical search finds no
    candidates for ``cq`` whatever is admitted (and a verdict of its may outlive its generation)."""
    spec = cq.spec.preemption
    return spec.within_cluster_queue in ("", NEVER) and spec.reclaim_within_cohort in ("", NEVER)


def satisfies_preemption_policy(policy: str, preemptor: WorkloadInfo, candidate: WorkloadInfo) -> bool:
    """May ``preemptor`` evict ``candidate`` under ``policy``?"""
    lower = candidate.priority < preemptor.priority
    if policy == LOWER_PRIORITY:
        return lower
    if policy == LOWER_OR_NEWER_EQUAL_PRIORITY:
        return lower or (candidate.priority == preemptor.priority and preemptor.created < candidate.created)
    return policy == ANY


def borrow_within_cohort(cq: ClusterQueueSnapshot) -> tuple[bool, int | None]:
    """(forbidden, maxPriorityThreshold): Kueue's ``IsBorrowingWithinCohortForbidden``."""
    bwc = cq.spec.preemption.borrow_within_cohort
    if bwc is None or bwc.policy in ("", NEVER):
        return True, None
    return False, bwc.max_priority_threshold


def above_borrowing_threshold(candidate_priority: int, preemptor_priority: int,
                              threshold: int | None) -> bool:
    """Is the candidate out of reach for a preemptor that keeps borrowing?"""
    if candidate_priority >= preemptor_priority:
        return True
    return threshold is not None and candidate_priority > threshold
