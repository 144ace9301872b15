"""Two orders over the cohort tree that fair sharing needs.

**Admission order** (:func:`fair_order`, Kueue's ``pkg/scheduler/fair_sharing_iterator.go``).
A cycle nominates one head per ClusterQueue; with fair sharing they are processed by
a tournament, re-run before every pop because each processed entry adds its usage to
the snapshot (the cycle consumes the iterator lazily).  For a tree, every ClusterQueue
that still has an entry simulates adding that entry's usage and records the share of
every node on its path (the ClusterQueue, then each Cohort below the root), keyed by
(parent Cohort, workload).  Then, bottom-up, each Cohort picks one entry among its
children's winners.  At a Cohort, ``a`` beats ``b`` when, in order:

0. ``a`` waits for the preemptions it issued (gate PrioritizePreemptorWorkloads);
1. ``a``'s child subtree would not borrow on a flavor-resource ``a`` requests and
   ``b``'s would (gate FairSharingPrioritizeNonBorrowing, on by default);
2. ``a``'s child subtree has the lower share (:func:`~.share.compare`);
3. higher priority (PrioritySortingWithinCohort);
4. older queue-order timestamp.

A ClusterQueue without a cohort just yields its entry.  "Waits for its preemptions"
is the workload's own scheduling state (``WorkloadInfo.preempting``), which its queue
records from each round's outcome and keeps across new versions and re-routing.

**Victim queue order** (:class:`TargetOrdering`, ``preemption/fairsharing/ordering.go``).
Preemption walks from the root towards the child with the highest share, until it
reaches a ClusterQueue that still has candidates.  ClusterQueues with share 0 (other
than the preemptor's) or without candidates are pruned, and so are Cohorts with share 0
off the preemptor's path; a Cohort whose children are all pruned is pruned.  Ties:
between ClusterQueues, the one whose next candidate sorts first; a Cohort beats a
ClusterQueue.  Shares are recomputed at every step, so removing a victim can move the
walk elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.cycle import Entry
from kueued.scheduling.fairsharing import gates
from kueued.scheduling.fairsharing.share import DRS, NEGATIVE, Shares, compare
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["fair_order", "Tournament", "TargetOrdering", "almost_lcas",
           "cluster_queues_under"]




class Tournament:
    """The per-pop state of the admission tournament over one root Cohort."""

    def __init__(self, shares: Shares, *, prioritize_non_borrowing: bool, prioritize_preemptors: bool,
                 priority_sorting: bool) -> None:
        self.shares = shares
        self.prioritize_non_borrowing = prioritize_non_borrowing
        self.prioritize_preemptors = prioritize_preemptors
        self.priority_sorting = priority_sorting
        self.values: dict[tuple[int, str], DRS] = {}
        self.requested: dict[str, frozenset[FR]] = {}

    def compute(self, root: QuotaNode, heads: dict[str, Entry]) -> None:
        """Shares of every node on each head's path, with the head's usage added."""
        self.values.clear()
        self.requested.clear()
        for cq_node in cluster_queues_under(root):
            e = heads.get(cq_node.name)
            if e is None:
                continue
            usage = e.assignment.usage if e.assignment is not None else {}
            for fr, v in usage.items():
                qn.add_usage(cq_node, fr, v)
            try:
                self.requested[e.wl.key] = frozenset(fr for fr, v in usage.items() if v > 0)
                drs = self.shares.of(cq_node)
                for ancestor in cq_node.ancestors():
                    self.values[(id(ancestor), e.wl.key)] = drs
                    drs = self.shares.of(ancestor)
            finally:
                for fr, v in usage.items():
                    qn.remove_usage(cq_node, fr, v)

    def less(self, a: Entry, b: Entry, parent: QuotaNode) -> bool:
        if self.prioritize_preemptors:
            pa, pb = a.wl.preempting, b.wl.preempting
            if pa != pb:
                return pa
        da, db = self.values[(id(parent), a.wl.key)], self.values[(id(parent), b.wl.key)]
        if self.prioritize_non_borrowing:
            ba = da.borrowing_on(self.requested[a.wl.key])
            bb = db.borrowing_on(self.requested[b.wl.key])
            if ba != bb:
                return not ba
        c = compare(da, db)
        if c:
            return c < 0
        if self.priority_sorting and a.wl.priority != b.wl.priority:
            return a.wl.priority > b.wl.priority
        return a.wl.created < b.wl.created

    def winner(self, cohort: QuotaNode, heads: dict[str, Entry]) -> Entry | None:
        candidates = [w for child in cohort.children if child.is_cohort
                      if (w := self.winner(child, heads)) is not None]
        candidates += [heads[child.name] for child in cohort.children
                       if not child.is_cohort and child.name in heads]
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if self.less(current, best, cohort):
                best = current
        return best


def cluster_queues_under(node: QuotaNode) -> Iterator[QuotaNode]:
    """Every ClusterQueue node in the subtree of ``node``, depth first."""
    stack = [node]
    while stack:
        n = stack.pop()
        if not n.is_cohort:
            yield n
        stack.extend(reversed(n.children))


def _within_cq(e: Entry) -> tuple:
    return (-e.wl.priority, e.wl.created, e.wl.uid)


def fair_order(entries: list[Entry], snapshot: Snapshot) -> Iterator[Entry]:
    """The cycle's processing order under fair sharing (see the module notes)."""
    settings = gates.settings_of(snapshot)
    by_cq: dict[str, list[Entry]] = {}
    for e in entries:
        by_cq.setdefault(e.cq, []).append(e)
    for queue in by_cq.values():
        queue.sort(key=_within_cq)
    tournament = Tournament(
        Shares(snapshot),
        prioritize_non_borrowing=gates.enabled(settings, "FairSharingPrioritizeNonBorrowing"),
        prioritize_preemptors=gates.enabled(settings, "PrioritizePreemptorWorkloads"),
        priority_sorting=gates.enabled(settings, "PrioritySortingWithinCohort"))
    while by_cq:
        cq_name = next(iter(by_cq))
        node = snapshot.cluster_queues[cq_name].node
        if node.parent is None:
            chosen = by_cq[cq_name][0]
        else:
            root = node.root()
            heads = {name: queue[0] for name, queue in by_cq.items()}
            tournament.compute(root, heads)
            found = tournament.winner(root, heads)
            assert found is not None  # cq_name itself has an entry in this tree
            chosen = found
        queue = by_cq[chosen.cq]
        queue.pop(0)
        if not queue:
            del by_cq[chosen.cq]
        yield chosen


# --- victim queue order ------------------------------------------------------------------------

CandidateCompare = Callable[[WorkloadInfo, WorkloadInfo], int]


class TargetOrdering:
    """Kueue's ``TargetClusterQueueOrdering``: which ClusterQueue to take the next victim from.

    ``candidates`` must already be sorted by the candidate order; each ClusterQueue's
    list keeps that order.  :meth:`targets` yields ClusterQueue snapshots; the caller
    must :meth:`pop` a candidate or :meth:`drop` the queue before asking for the next.
    """

    def __init__(self, snapshot: Snapshot, shares: Shares, preemptor_cq: ClusterQueueSnapshot,
                 candidates: list[WorkloadInfo], *, compare_candidates: CandidateCompare) -> None:
        self.snapshot = snapshot
        self.shares = shares
        self.preemptor_cq = preemptor_cq
        self.path = {id(a) for a in preemptor_cq.node.ancestors()}
        self.queues: dict[str, list[WorkloadInfo]] = {}
        for wl in candidates:
            self.queues.setdefault(wl.cluster_queue, []).append(wl)  # type: ignore[arg-type]
        self.compare_candidates = compare_candidates
        self.pruned: set[int] = set()

    def has_workload(self, cq_name: str) -> bool:
        return bool(self.queues.get(cq_name))

    def pop(self, cq: ClusterQueueSnapshot) -> WorkloadInfo:
        return self.queues[cq.name].pop(0)

    def drop(self, cq: ClusterQueueSnapshot) -> None:
        self.pruned.add(id(cq.node))

    def targets(self) -> Iterator[ClusterQueueSnapshot]:
        if self.preemptor_cq.node.parent is None:
            while self.has_workload(self.preemptor_cq.name):
                yield self.preemptor_cq
            return
        root = self.preemptor_cq.node.root()
        while id(root) not in self.pruned:
            cq = self._next(root)
            if cq is not None:
                yield cq

    def _next(self, cohort: QuotaNode) -> ClusterQueueSnapshot | None:
        best_cq: QuotaNode | None = None
        best_cq_drs = NEGATIVE
        best_cohort: QuotaNode | None = None
        best_cohort_drs = NEGATIVE
        for child in cohort.children:
            if child.is_cohort or id(child) in self.pruned:
                continue
            drs = self.shares.of(child)
            if (drs.is_zero and child is not self.preemptor_cq.node) or not self.has_workload(child.name):
                self.pruned.add(id(child))
                continue
            c = compare(drs, best_cq_drs)
            if c > 0:
                best_cq, best_cq_drs = child, drs
            elif c == 0 and best_cq is not None:
                head, current = self.queues[child.name][0], self.queues[best_cq.name][0]
                if self.compare_candidates(head, current) < 0:
                    best_cq = child
        for child in cohort.children:
            if not child.is_cohort or id(child) in self.pruned:
                continue
            drs = self.shares.of(child)
            if drs.is_zero and id(child) not in self.path:
                self.pruned.add(id(child))
            elif compare(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cohort is None and best_cq is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and compare(best_cohort_drs, best_cq_drs) >= 0:
            return self._next(best_cohort)
        assert best_cq is not None
        return self.snapshot.cluster_queues[best_cq.name]


def almost_lcas(preemptor: QuotaNode, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """The children of the lowest common ancestor on the preemptor's and the target's paths."""
    path = {id(a) for a in preemptor.ancestors()}
    lca: QuotaNode | None = next((a for a in target.ancestors() if id(a) in path), None)
    if lca is None:
        raise ValueError(f"{preemptor} and {target} share no cohort")
    return _child_towards(preemptor, lca), _child_towards(target, lca)


def _child_towards(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    current = node
    while current.parent is not lca:
        assert current.parent is not None
        current = current.parent
    return current
