"""The balances a round reads: ClusterQueues', and Cohorts' read a level at a time, deepest first.

:class:`Balances` is the part of :class:`~actors.coordinator.Coordinator` (a mixin: every
attribute is the Coordinator's) that reads what the actors own into a snapshot, keeps the
Cohorts' last reports until something below them moves (:meth:`Balances._changed`), waits
for releases still climbing (:meth:`Balances.drain_cohorts`), and marks the trees whose parked
workloads go back to their heaps once quota comes back (:meth:`Balances._requeue_tree`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from actors.messages import NodeReport, Report, RequeueParked
from kueued.scheduling.snapshot import Snapshot

if TYPE_CHECKING:
    from actors.cluster_queue import ClusterQueueActor
    from actors.cohort import CohortActor
    from kueued.scheduling.verdicts import Verdicts

__all__ = ["Balances"]


class Balances:
    """Reading balances (a mixin of the Coordinator)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        forest: Snapshot
        cluster_queues: dict[str, ClusterQueueActor]
        cohorts: dict[str, CohortActor]
        verdicts: Verdicts
        _cohort_usage: dict[str, dict]
        _depths: dict[str, int]
        _settle_finishes: Callable[[], Any]
        _stale_trees: dict[int, Any]
        _idle: dict[str, dict]

    async def assemble(self) -> Snapshot:
        """The current balances as a snapshot, without taking heads (reports, final state)."""
        await self._settle_finishes()
        snap = self.forest.clone()
        self._flush_requeues()
        for actor in self.cluster_queues.values():
            self._fill(snap, await actor.ask(Report()))
        await self._fill_cohorts(snap)
        return snap

    @staticmethod
    def _fill(snap: Snapshot, rep: NodeReport) -> None:
        cq = snap.cluster_queues[rep.name]
        cq.node.usage = rep.usage
        cq.workloads = {wl.key: wl for wl in rep.admitted}

    def _changed(self, cluster_queue: str | None) -> None:
        """A balance below ``cluster_queue``'s ancestors moved (an admission, eviction, release):
        its tree's verdicts no longer hold and its Cohorts must be read again."""
        self.verdicts.touch(cluster_queue)
        cq = self.forest.cluster_queues.get(cluster_queue or "")
        node = cq.node.parent if cq is not None else None
        while node is not None:
            self._cohort_usage.pop(node.name, None)
            node = node.parent

    async def _fill_cohorts(self, snap: Snapshot) -> None:
        """Each Cohort's balance, asked only of those below which something changed since.

        Every change to a balance is a reservation or release the coordinator started and
        marked (:meth:`_changed`; a topology change clears everything), so a Cohort not
        marked since it last reported still holds what it reported then.  Releases climb
        as tells, so the Cohorts are asked a level at a time, deepest first: a Cohort has
        answered, and so sent on every release it was holding, before its parent is asked.
        """
        asked = []
        for name in self.cohorts:
            cached = self._cohort_usage.get(name)
            if cached is not None:
                snap.cohorts[name].node.usage = dict(cached)
            else:
                asked.append(name)
        for level in self._deepest_first(asked):
            replies = [(name, self.cohorts[name].post(Report())) for name in level]
            for name, reply in replies:
                rep = await reply.result(self.cohorts[name].ask_timeout)
                self._cohort_usage[name] = rep.usage
                snap.cohorts[name].node.usage = dict(rep.usage)

    def _deepest_first(self, names: Iterable[str]) -> list[list[str]]:
        """Cohort actors grouped by their depth in the actors' tree, deepest first."""
        by_depth: dict[int, list[str]] = {}
        depths = self._depths
        for name in names:
            depth = depths.get(name)
            if depth is None:
                depth, up = 0, self.cohorts[name].parent
                while up is not None:
                    depth, up = depth + 1, up.parent
                depths[name] = depth
            by_depth.setdefault(depth, []).append(name)
        return [by_depth[d] for d in sorted(by_depth, reverse=True)]

    async def drain_cohorts(self, names: Iterable[str] | None = None) -> None:
        """Wait until these Cohorts (default: all) have handled every release sent up so far,
        a level at a time, deepest first (before a reconfiguration resets their balances,
        or borrow requests that should see what evictions gave back)."""
        for level in self._deepest_first(self.cohorts if names is None else names):
            for name in level:
                await self.cohorts[name].drain()

    # --- trees whose parked workloads go back -------------------------------------------------
    def _requeue_tree(self, cq_name: str) -> None:
        """Every parked workload of this tree goes back to its heap before its queue next pops:
        the request rides on the next ``Nominate`` (one message per queue however many
        workloads finished), or is told by :meth:`_flush_requeues`."""
        cq = self.forest.cluster_queues.get(cq_name)
        if cq is None:  # deleted since: its tree, if any, was requeued by the topology change
            return
        root = cq.node.root()
        self._stale_trees[id(root)] = root

    def _take_requeues(self) -> set[str]:
        """The queues of every tree marked by :meth:`_requeue_tree` since the last call."""
        names: set[str] = set()
        stack = list(self._stale_trees.values())
        self._stale_trees.clear()
        while stack:
            node = stack.pop()
            if not node.is_cohort:
                names.add(node.name)
            stack.extend(node.children)
        return names

    def _flush_requeues(self) -> None:
        for name in self._take_requeues():
            self._idle.pop(name, None)
            actor = self.cluster_queues.get(name)
            if actor is not None:
                actor.tell(RequeueParked())
