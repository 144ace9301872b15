"""The cycle's admission order with per-Cohort policies: a tournament through the tree.

:class:`PolicyOrder` is the cycle's ``iterate`` whenever Kueue's fair sharing is off.
Each pull re-runs the tournament, because the cycle adds every processed entry's
usage to the snapshot before pulling the next (``run_cycle`` consumes lazily):

* a ClusterQueue offers its nominated head (the cycle has one per ClusterQueue);
* a Cohort collects the winners of its children, each tagged with the child it came
  through, and keeps the first by its own policy's key, then by Kueue's classical order
  to break ties (each entry's rank in :func:`~kueued.scheduling.cycle.classical_order`,
  sorted once per cycle: preemptors waiting for their evictions, borrowing level,
  priority, creation time; every part of it is fixed for the cycle):

  - ``fifo``: no policy key, the classical rank alone;
  - ``fair``: children whose subtree stays within its own quota with the entry's
    request before those it would make borrow (Kueue's fair sharing does the same,
    gate FairSharingPrioritizeNonBorrowing: a team within its nominal quota is not
    kept waiting behind one that would borrow, however little the borrower holds),
    then the child's fair share (:func:`~.shares.fair_share`) ascending;
  - ``capacity``: children below their guarantee (guarantee in use < 1000 per mille)
    first, by guarantee in use ascending; the rest after them, classical order;

* the roots' winners (and ClusterQueues without a cohort) are taken in classical order.

Under ``fair`` and ``capacity`` too, a workload waiting for the evictions it issued in
an earlier cycle goes before every policy key (gate PrioritizePreemptorWorkloads, as in
the classical order and fair sharing's tournament): otherwise a victim whose team now
looks lighter would take the freed quota back, and the two would flop forever.

When no Cohort carries ``fair`` or ``capacity`` this *is* Kueue's order: the rank
is a total order fixed for the cycle, so the minimum of minima is the global minimum,
pull after pull.  :class:`PolicyOrder` then simply hands over to
:func:`~kueued.scheduling.cycle.classical_order`, so trees without the annotation stay
on exactly Kueue's code path.  Policies are read from the World at every
cycle, so annotations applied while the daemon runs take effect at the next cycle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction

from kueued.model.validation.policy import CAPACITY, FAIR, FIFO
from kueued.quota import node as qn
from kueued.quota.node import QuotaNode
from kueued.scheduling.cycle import Entry, classical_order
from kueued.scheduling.fairsharing import gates
from kueued.scheduling.policies.shares import (
    Share,
    capacity_of,
    consumption,
    fair_share,
    guarantee_in_use,
    parse_weight,
    per_resource,
    policy_of,
)
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.view import WorldView as World

__all__ = ["PolicyOrder", "policy_order", "cohort_policies"]


def cohort_policies(world: World) -> dict[str, str]:
    """Every Cohort whose annotation asks for more than ``fifo``."""
    return {name: p for name, co in world.cohorts.items() if (p := policy_of(co)) != FIFO}


class PolicyOrder:
    """``iterate`` for :func:`~kueued.scheduling.cycle.run_cycle`, reading policies from ``world``."""

    def __init__(self, world: World) -> None:
        self.world = world

    def __call__(self, entries: list[Entry], snapshot: Snapshot) -> Iterator[Entry]:
        policies = cohort_policies(self.world)
        if not policies:
            return classical_order(entries, snapshot)
        return policy_order(entries, snapshot, policies=policies)


def policy_order(entries: list[Entry], snapshot: Snapshot, *, policies: Mapping[str, str]) -> Iterator[Entry]:
    """The tournament (module notes); ``policies`` maps Cohort names to fair/capacity."""
    ordered = list(classical_order(entries, snapshot))
    rank = {id(e): i for i, e in enumerate(ordered)}
    by_cq: dict[str, list[Entry]] = {}
    for e in ordered:
        by_cq.setdefault(e.cq, []).append(e)
    ranker = _Ranker(snapshot, policies, rank=rank)
    while by_cq:
        heads = {name: queue[0] for name, queue in by_cq.items()}
        roots: dict[int, QuotaNode] = {}
        for name in heads:
            root = snapshot.cluster_queues[name].node.root()
            roots.setdefault(id(root), root)
        winners = [w for root in roots.values() if (w := ranker.winner(root, heads)) is not None]
        chosen = min(winners, key=ranker.classical)
        queue = by_cq[chosen.cq]
        queue.pop(0)
        if not queue:
            del by_cq[chosen.cq]
        yield chosen


class _Ranker:
    """One cycle's tournament; caches what depends on quota alone (capacities, weights)."""

    def __init__(self, snapshot: Snapshot, policies: Mapping[str, str], *, rank: Mapping[int, int]) -> None:
        self.snapshot = snapshot
        self.policies = policies
        self.rank = rank
        settings = gates.settings_of(snapshot)
        self.preemptors_first = gates.enabled(settings, "PrioritizePreemptorWorkloads")
        self.non_borrowing_first = gates.enabled(settings, "FairSharingPrioritizeNonBorrowing")
        self._capacity: dict[int, dict[str, int]] = {}
        self._weight: dict[int, Fraction] = {}

    def winner(self, node: QuotaNode, heads: Mapping[str, Entry]) -> Entry | None:
        if not node.is_cohort:
            return heads.get(node.name)
        candidates = [(child, w) for child in node.children if (w := self.winner(child, heads)) is not None]
        if not candidates:
            return None
        policy = self.policies.get(node.name, FIFO)
        if policy == FIFO:
            return min((w for _, w in candidates), key=self.classical)
        return min(candidates, key=lambda cw: (not self.waiting(cw[1]), self.policy_key(policy, node, *cw),
                                               self.classical(cw[1])))[1]

    def classical(self, e: Entry) -> int:
        return self.rank[id(e)]

    def waiting(self, e: Entry) -> bool:
        return self.preemptors_first and bool(getattr(e.wl, "preempting", False))

    def policy_key(self, policy: str, parent: QuotaNode, child: QuotaNode, e: Entry) -> tuple[int, Share]:
        if policy == FAIR:
            borrows = self.non_borrowing_first and self.borrows(child, e)
            return (int(borrows), fair_share(per_resource(consumption(child)), self.capacity(parent),
                                             weight=self.weight(child)))
        assert policy == CAPACITY
        in_use = guarantee_in_use(child)
        if in_use is not None and in_use < 1000:
            return (0, in_use)
        return (1, 0)

    def borrows(self, child: QuotaNode, e: Entry) -> bool:
        """Would ``child``'s subtree be above its own quota on a resource ``e`` requests, once
        ``e`` is admitted?  Simulated from ``e``'s ClusterQueue up, as Kueue's fair sharing
        iterator does, so quota a lending limit keeps below counts."""
        if e.assignment is None or not e.assignment.usage:
            return False
        leaf = self.snapshot.cluster_queues[e.cq].node
        usage = e.assignment.usage
        for fr, v in usage.items():
            qn.add_usage(leaf, fr, v)
        try:
            return any(child.usage.get(fr, 0) > child.subtree.get(fr, 0) for fr in usage)
        finally:
            for fr, v in usage.items():
                qn.remove_usage(leaf, fr, v)

    def capacity(self, node: QuotaNode) -> dict[str, int]:
        cap = self._capacity.get(id(node))
        if cap is None:
            cap = self._capacity[id(node)] = capacity_of(node)
        return cap

    def weight(self, node: QuotaNode) -> Fraction:
        w = self._weight.get(id(node))
        if w is None:
            spec = self.snapshot.owner(node).spec
            w = self._weight[id(node)] = parse_weight(spec.fair_sharing if spec is not None else None)
        return w
