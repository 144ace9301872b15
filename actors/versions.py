"""A Workload's new version meets the queue that holds it: kept in place where Kueue keeps it, else moved.

:class:`Versions` is the part of :class:`~actors.coordinator.Coordinator` that reacts to a
Workload's update or deletion (a watch event in the daemon, an edited file).  The World holds
the new version as an immutable spec; the ClusterQueue actor that holds the workload owns its
scheduling state.  Where the update asks for nothing new (a label, a priority, the echo of
kueued's own status write, the echo of an eviction's first phase) the queue keeps the workload
where it is and swaps its spec (``Replace``); otherwise the old version leaves its queue
(``Finish``, answered with its history) and the new one is placed with that history, so a
preemptor never forgets whom it evicted and a victim's eviction count stands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.messages import Finish, Left, Replace
from kueued.scheduling.workload import Placement, WorkloadSpec

if TYPE_CHECKING:
    from actors.cluster_queue import ClusterQueueActor
    from kueued.world import World

__all__ = ["Versions"]


class Versions:
    """The version half of the Coordinator (a mixin: every attribute is the Coordinator's)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        world: World
        cluster_queues: dict[str, ClusterQueueActor]
        unrouted: dict[str, str]
        reasons: dict[str, str]
        evicted: dict[str, int]
        _evicting: dict[str, str]
        _uncounted: set[str]
        _taken: set[str]
        _left: dict[str, Left]
        _idle: dict[str, dict]
        _deadlines: dict[str, tuple[float, float]]
        _past: dict[str, int]

        async def _place(self, spec: WorkloadSpec, history: Left | None = None) -> None: ...
        def _changed(self, cluster_queue: str | None) -> None: ...
        def _requeue_tree(self, cq_name: str) -> None: ...

    async def _new_version(self, key: str, old: WorkloadSpec | None, new: WorkloadSpec | None,
                           status_kept: bool) -> None:
        """A Workload changed: the queue that holds it keeps it where it can, else it moves."""
        placed = self.world.placed.get(key)
        held = placed is not None and placed.cluster_queue in self.cluster_queues
        if old is not None and new is not None and placed is not None and held and (
                (key in self._evicting and new.observed is not None and _evicted(new))
                or (not (status_kept and new.observed is None) and self._keeps_admission(old, new, placed))):
            # The echo of an eviction's first phase while its second is still to land: the queue keeps
            # holding the victim, with the quota it reserved, until Released (never a release and a
            # re-adoption, which would leave it admitted once the second lands).  Or an edit that
            # keeps the admission.  The queue holds the new version in the old one's place.
            if await self.cluster_queues[placed.cluster_queue].ask(Replace(new)):
                self._changed(placed.cluster_queue)  # its priority may differ: what preemption finds changed
                return
        history = await self._drop(key, old) if old is not None else None
        self._taken.discard(key)
        if new is None:  # deleted (or finished): nothing is kept for it, however long the daemon runs
            self.unrouted.pop(key, None)
            self.reasons.pop(key, None)
            self.evicted.pop(key, None)
            self._left.pop(key, None)
            self._deadlines.pop(key, None)
            self._past.pop(key, None)
            return
        if old is not None and placed is None and new.observed is not None and _evicted(new):
            # The echo of an eviction's first phase that kueued has already taken to its end (the
            # reservation cleared, the quota given back): the quota is not held again.
            self._taken.add(key)
        await self._place(new, history)

    def _keeps_admission(self, old: WorkloadSpec, new: WorkloadSpec, placed: Placement) -> bool:
        """Whether an admission is kept across an edit that asks for nothing new, as Kueue does.

        The new version must have the same pod sets and LocalQueue and still route to the
        same ClusterQueue: a label, an annotation or a priority may change.  The manifest
        source carries no status, so without this any edit released the quota and queued
        the workload again (a version that comes with a status and no admission is never
        kept: its reservation was cleared, by an eviction's second phase or by hand).
        On a cluster the new version is usually the echo of kueued's own status write: it
        holds the same reservation, which is kept as it stands.
        """
        cq = placed.cluster_queue
        if (cq not in self.cluster_queues or new.queue_name != old.queue_name
                or new.obj.spec.pod_sets != old.obj.spec.pod_sets):
            return False
        if new.observed is not None:  # the API server's echo of the admission kueued wrote: the same one
            return new.observed.cluster_queue == cq and new.observed.usage == placed.usage
        return self.world.route(new)[0] == cq

    async def _drop(self, key: str, old: WorkloadSpec) -> Left | None:
        """Take a workload's old version out of its queue or, if admitted, release its quota; what
        the queue gave back (its history), if it held it.

        Only the queue that holds it is asked: the one it is admitted in, or the one its
        LocalQueue routes to (a routing change re-routes every pending workload at once,
        so that is where it waits).  A workload that routes nowhere is asked of every queue.
        """
        self._idle.clear()
        self._evicting.pop(key, None)
        self._uncounted.discard(key)
        placed = self.world.placed.pop(key, None)
        name = placed.cluster_queue if placed is not None else self.world.route(old)[0]
        holders = [name] if name in self.cluster_queues else list(self.cluster_queues)
        left = None
        for name in holders:
            answer = await self.cluster_queues[name].ask(Finish(key))
            if answer is not None:
                left = answer
                if answer.admitted:
                    self._changed(name)
                    self._requeue_tree(name)
        return left


def _evicted(spec: WorkloadSpec) -> bool:
    """Whether the Workload's status says it was evicted (Kueue's ``Evicted`` condition, True)."""
    return any(c.type == "Evicted" and c.status == "True" for c in spec.obj.status.conditions)
