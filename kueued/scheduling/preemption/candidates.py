"""Collecting and classifying classical preemption candidates across a cohort tree.

Mirrors Kueue's ``classical/hierarchical_preemption.go`` and
``classical/candidate_generator.go``.  A candidate is an admitted workload that uses
at least one FR needing preemption and passes the preemptor's policy
(:mod:`.policy`).  Where it sits relative to the preemptor decides its class:

* ``WITHIN_CQ``: the preemptor's own ClusterQueue (reason InClusterQueue);
* ``HIERARCHICAL_RECLAIM``: the preemptor has *hierarchical advantage*: the request
  fits the quota of some subtree containing the preemptor (its own ClusterQueue or
  an ancestor cohort) and the candidate uses quota of that subtree from outside it.
  Evictable whatever borrowWithinCohort says (InCohortReclamation);
* otherwise a *priority* candidate: ``RECLAIM_WITHOUT_BORROWING`` (usable only in an
  attempt where the preemptor ends up not borrowing; InCohortReclamation) or, with
  borrowWithinCohort LowerPriority and a priority below the preemptor's and at most
  the threshold, ``RECLAIM_WHILE_BORROWING`` (InCohortReclaimWhileBorrowing).

Collection walks from the preemptor's parent up to the root.  At each ancestor it
visits the subtrees not seen yet, pruning every cohort and ClusterQueue that is within
its quota on the needed FRs (nothing there can be reclaimed), and records for each
candidate the ancestor where it was found (``lca``).  Advantage starts as "the
request fits the ClusterQueue's own quota" and turns on for good at the first
ancestor whose subtree fits what the request still needs beyond the local quotas
below it.

Validity is re-checked as candidates are removed (:func:`is_valid`): a candidate of
another ClusterQueue stops being one once its ClusterQueue, or a cohort between it
and ``lca``, is back within quota, so evicting one borrower can protect the rest.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping

from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.preemption import policy
from kueued.scheduling.preemption.ordering import LocalQueueUsage, candidate_order_key, is_evicted
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["Variant", "Candidate", "CandidateSet", "collect_candidates", "reclaim_reach", "is_valid",
           "uses_resources", "within_nominal", "quantities_fit_in_quota", "classify"]


class Variant(enum.Enum):
    NEVER = "Never"
    WITHIN_CQ = "WithinCQ"
    HIERARCHICAL_RECLAIM = "HierarchicalReclaim"
    RECLAIM_WITHOUT_BORROWING = "ReclaimWithoutBorrowing"
    RECLAIM_WHILE_BORROWING = "ReclaimWhileBorrowing"

    @property
    def reason(self) -> str:
        return _REASONS[self]


_REASONS = {
    Variant.NEVER: "Unknown",
    Variant.WITHIN_CQ: "InClusterQueue",
    Variant.HIERARCHICAL_RECLAIM: "InCohortReclamation",
    Variant.RECLAIM_WITHOUT_BORROWING: "InCohortReclamation",
    Variant.RECLAIM_WHILE_BORROWING: "InCohortReclaimWhileBorrowing",
}


class Candidate:
    __slots__ = ("wl", "lca", "variant")

    def __init__(self, wl: WorkloadInfo, lca: QuotaNode | None, variant: Variant) -> None:
        self.wl = wl
        self.lca = lca  # the ancestor of the preemptor where this candidate was found
        self.variant = variant

    def __repr__(self) -> str:
        return f"Candidate({self.wl.key}, {self.variant.value})"


# --- quota predicates (Kueue's pkg/cache/scheduler helpers) ---------------------------------

def uses_resources(wl: WorkloadInfo, frs: Iterable[FR]) -> bool:
    return any(fr in wl.usage for fr in frs)


def within_nominal(node: QuotaNode, frs: Iterable[FR]) -> bool:
    """``IsWithinNominalInResources``: usage <= subtree quota on every FR of ``frs``."""
    usage, subtree = node.usage, node.subtree
    for fr in frs:  # a loop, not all(...): called for every node walked and candidate tried
        if usage.get(fr, 0) > subtree.get(fr, 0):
            return False
    return True


def quantities_fit_in_quota(node: QuotaNode, requests: Mapping[FR, int]) -> tuple[bool, dict[FR, int]]:
    """Does ``requests`` fit the node's subtree quota, and what is left for the parent?"""
    fits = all(node.usage.get(fr, 0) + v <= node.subtree.get(fr, 0) for fr, v in requests.items())
    remaining = {fr: max(0, v - qn.local_available(node, fr)) for fr, v in requests.items()}
    return fits, remaining


# --- classification ---------------------------------------------------------------------------

def classify(cq: ClusterQueueSnapshot, preemptor: WorkloadInfo, candidate: WorkloadInfo,
             frs: Iterable[FR], *, advantage: bool) -> Variant:
    """Kueue's ``classifyPreemptionVariant``."""
    if not uses_resources(candidate, frs):
        return Variant.NEVER
    same_cq = candidate.cluster_queue == cq.name
    spec = cq.spec.preemption
    rule = spec.within_cluster_queue if same_cq else spec.reclaim_within_cohort
    if not policy.satisfies_preemption_policy(rule, preemptor, candidate):
        return Variant.NEVER
    if same_cq:
        return Variant.WITHIN_CQ
    if advantage:
        return Variant.HIERARCHICAL_RECLAIM
    forbidden, threshold = policy.borrow_within_cohort(cq)
    if forbidden or policy.above_borrowing_threshold(candidate.priority, preemptor.priority, threshold):
        return Variant.RECLAIM_WITHOUT_BORROWING
    return Variant.RECLAIM_WHILE_BORROWING


def _from_cq(owner: ClusterQueueSnapshot, lca: QuotaNode | None, cq: ClusterQueueSnapshot,
             preemptor: WorkloadInfo, frs: frozenset[FR], advantage: bool) -> Iterator[Candidate]:
    for wl in owner.workloads.values():
        variant = classify(cq, preemptor, wl, frs, advantage=advantage)
        if variant is not Variant.NEVER:
            yield Candidate(wl, lca, variant)


# --- collection -------------------------------------------------------------------------------

class CandidateSet:
    """The three lists of Kueue's candidate generator, each in CandidatesOrdering."""

    __slots__ = ("hierarchy", "priority", "same_queue")

    def __init__(self, hierarchy: list[Candidate], priority: list[Candidate],
                 same_queue: list[Candidate]) -> None:
        self.hierarchy = hierarchy
        self.priority = priority
        self.same_queue = same_queue

    @property
    def none_from_other_queues(self) -> bool:
        return not self.hierarchy and not self.priority

    @property
    def none_for_hierarchical_reclaim(self) -> bool:
        return not self.hierarchy

    def ordered(self) -> list[Candidate]:
        """Evicted ones of every list first, then the rest: hierarchy, priority, same queue."""
        lists = (self.hierarchy, self.priority, self.same_queue)
        evicted = [c for lst in lists for c in lst if is_evicted(c.wl)]
        return evicted + [c for lst in lists for c in lst if not is_evicted(c.wl)]

    def __len__(self) -> int:
        return len(self.hierarchy) + len(self.priority) + len(self.same_queue)


def collect_candidates(snapshot: Snapshot, cq: ClusterQueueSnapshot, preemptor: WorkloadInfo,
                       requests: Mapping[FR, int], frs: Iterable[FR], *,
                       lq_usage: LocalQueueUsage | None = None) -> CandidateSet:
    needed = frozenset(frs)
    same: list[Candidate] = []
    if cq.spec.preemption.within_cluster_queue not in ("", policy.NEVER):
        same = list(_from_cq(cq, None, cq, preemptor, needed, False))
    hierarchy: list[Candidate] = []
    prio: list[Candidate] = []
    if cq.node.parent is not None and cq.spec.preemption.reclaim_within_cohort not in ("", policy.NEVER):
        advantage, remaining = quantities_fit_in_quota(cq.node, requests)
        previous: QuotaNode | None = None
        for root in cq.node.ancestors():
            out = hierarchy if advantage else prio
            _collect_in_subtree(snapshot, cq, preemptor, needed, root, root, previous, advantage, out)
            fits, remaining = quantities_fit_in_quota(root, remaining)
            advantage = advantage or fits
            previous = root
    key = candidate_order_key(cq.name, lq_usage=lq_usage)
    for lst in (hierarchy, prio, same):
        lst.sort(key=lambda c: key(c.wl))
    return CandidateSet(hierarchy, prio, same)


def _collect_in_subtree(snapshot: Snapshot, cq: ClusterQueueSnapshot, preemptor: WorkloadInfo,
                        frs: frozenset[FR], current: QuotaNode, lca: QuotaNode, skip: QuotaNode | None,
                        advantage: bool, out: list[Candidate]) -> None:
    for owner in _queues_below(snapshot, current, frs, skip, cq.node):
        out.extend(_from_cq(owner, lca, cq, preemptor, frs, advantage))


def _queues_below(snapshot: Snapshot, current: QuotaNode, frs: frozenset[FR], skip: QuotaNode | None,
                  own: QuotaNode) -> Iterator[ClusterQueueSnapshot]:
    """The active ClusterQueues below ``current`` the walk reaches: a child subtree within its
    quota on every FR of ``frs`` is pruned (nothing there can be reclaimed), ``skip`` (the
    subtree already searched) and the preemptor's own queue are left out."""
    for child in current.children:
        if child is skip or child is own or within_nominal(child, frs):
            continue
        if child.is_cohort:
            yield from _queues_below(snapshot, child, frs, skip, own)
        else:
            owner = snapshot.owner(child)
            assert isinstance(owner, ClusterQueueSnapshot)
            if owner.active:  # Kueue leaves inactive ClusterQueues out of the snapshot
                yield owner


def reclaim_reach(snapshot: Snapshot, cq: ClusterQueueSnapshot, frs: Iterable[FR]) -> set[str]:
    """The ClusterQueues whose workloads a classical search from ``cq`` for ``frs`` looks at
    (its own, and those :func:`collect_candidates`'s walk up the tree reaches): what a
    reclaim query sent through the tree must reach (``actors.reclaim``)."""
    needed = frozenset(frs)
    out = {cq.name}
    previous: QuotaNode | None = None
    for root in cq.node.ancestors():
        out.update(o.name for o in _queues_below(snapshot, root, needed, previous, cq.node))
        previous = root
    return out


def is_valid(snapshot: Snapshot, cq: ClusterQueueSnapshot, candidate: Candidate, frs: Iterable[FR], *,
             borrowing: bool) -> bool:
    """Kueue's ``candidateIsValid``, against the snapshot as the search has left it."""
    if candidate.wl.cluster_queue == cq.name:
        return True
    if borrowing and candidate.variant is Variant.RECLAIM_WITHOUT_BORROWING:
        return False
    node = snapshot.cluster_queues[candidate.wl.cluster_queue].node  # type: ignore[index]
    if within_nominal(node, frs):
        return False
    for ancestor in node.ancestors():
        if ancestor is candidate.lca:
            break
        if within_nominal(ancestor, frs):
            return False
    return True
