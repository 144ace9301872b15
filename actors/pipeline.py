"""Admissions written while the next rounds run: Kueue's assume, then apply.

Kueue's scheduler does not wait for the API server between cycles: an admitted workload is
*assumed* in its cache (its quota counts from then on) and the admission is written from a
goroutine (``scheduler.admit``: ``cache.AssumeWorkload``, then ``applyAdmission`` run by the
``admissionRoutineWrapper``); a write that fails forgets the workload in the cache and requeues
it.  Waiting for every round's writes instead puts one commit latency into every round of a
backlog (a round admits at most one head per ClusterQueue).  Measured on Kueue's baseline through
the API server, the difference was within noise (13.3 s before, 13.0 s after, at a tenth of the
baseline): in steady state a pass runs one or two rounds, and a run still waits for its writes
before the next pass applies the watch's events (below).

Here the ClusterQueue actors are the cache.  Once a round's reservations are granted, the
queues hold the workloads and their quota is charged up the tree, so no later round can hand
it out again; the commits go out in a task (:meth:`Pipeline._commit_later`, at most
``COMMITS_IN_FLIGHT`` writes at once over all rounds) and the coordinator *settles* them at
the start of the next round (:meth:`Pipeline.settle_commits`): the bookkeeping of an admission
(``World.placed``, deadline, metrics, Events, its log line) for those committed, a ``Revert``
for those refused (back in their queue, which is asked again).  Nothing else runs concurrently
with a round: state changes only where the coordinator settles.

A round waits for what is in flight:

* before its evictions, when it has some: a victim may be a workload whose admission is still
  being written.  A victim whose admission was refused meanwhile is back in its queue holding
  nothing (its placement cleared), so its eviction is dropped and its preemptor judged again
  next round;
* at the end of every :meth:`~actors.coordinator.Coordinator.run_to_quiescence`: quiescence
  needs nothing in flight (a refused commit requeues), and the daemon applies the watch's
  events, writes status and answers signals between runs, always on settled state.

Only where no decision reads what was committed before the round: admission fair sharing
(the entry penalty it charges a LocalQueue once the admission is committed) and KEP-1093's
LocalQueue policies (what a LocalQueue holds, read from ``World.placed``) order the heads by
it, so under either every round waits for its own commits, as a port that answers at once
does (``simulate``: decisions committed in exactly the order made).  A port opts in with
``pipelined = True`` (the API server's).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from actors.commits import COMMITS_IN_FLIGHT, commit_all
from actors.messages import Revert
from kueued.scheduling.workload import Placement

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from actors.cluster_queue import ClusterQueueActor
    from kueued.kube.port import ApiPort
    from kueued.scheduling.cycle import Entry
    from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
    from kueued.world import World

__all__ = ["Pipeline"]

log = structlog.get_logger("kueued.coordinator")

Granted = list[tuple["Entry", Placement]]
Commit = Callable[[], Awaitable[bool]]


class Pipeline:
    """The commit half of a round (a mixin: every attribute is the Coordinator's)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        world: World
        port: ApiPort
        cluster_queues: dict[str, ClusterQueueActor]
        reasons: dict[str, str]
        afs: AdmissionFairSharing
        admissions: int
        refused_in_round: bool
        _idle: dict[str, dict]
        _tg: TaskGroup | None

        def _changed(self, cluster_queue: str | None) -> None: ...
        def _requeue_tree(self, cq_name: str) -> None: ...
        def _watch_deadline(self, key: str, placement: Placement) -> None: ...
        def _record_admission(self, wl: Any, cluster_queue: str, now: float) -> None: ...

    def _init_pipeline(self) -> None:
        self.usage_ordered = False  # some queue orders its heads by committed usage (module notes)
        self._in_flight = 0  # commit tasks not yet landed
        self._landed: list[tuple[Granted, list[bool], float]] = []
        self._landing = anyio.Event()
        self._commit_limiter = anyio.CapacityLimiter(COMMITS_IN_FLIGHT)

    def _pipelining(self) -> bool:
        return (bool(getattr(self.port, "pipelined", False)) and self._tg is not None
                and self.world.settings.admission_fair_sharing is None and not self.usage_ordered)

    @property
    def commits_in_flight(self) -> bool:
        return bool(self._in_flight or self._landed)

    async def _commit(self, granted: Granted, now: float) -> None:
        """Commit a round's granted admissions: in a task when pipelining, else here."""
        admit = self.port.admit
        calls: list[Commit] = [
            partial(admit, e.wl.key, cluster_queue=e.cq, flavors=placement.flavors, usage=placement.usage,
                    **({"counts": placement.counts} if placement.counts is not None else {}))
            for e, placement in granted]
        if not self._pipelining():
            await self._settle(granted, await commit_all(self.port, calls), now)
            return
        assert self._tg is not None
        self._in_flight += 1
        self._tg.start_soon(self._commit_later, granted, calls, now)

    async def _commit_later(self, granted: Granted, calls: list[Commit], now: float) -> None:
        try:
            committed = await commit_all(self.port, calls, limiter=self._commit_limiter)
            self._landed.append((granted, committed, now))
        finally:
            self._in_flight -= 1
            self._landing.set()

    async def settle_commits(self, *, wait: bool) -> bool:
        """Settle the commits that landed (with ``wait``, first every one in flight); whether one
        was refused (reverted: its workload is back in its queue)."""
        if self._in_flight and not wait:
            # the actors answer without yielding, so rounds back to back never would: the writes
            # get the event loop here, once a round, to go out and land
            await anyio.lowlevel.checkpoint()
        while wait and self._in_flight:
            self._landing = event = anyio.Event()
            await event.wait()
        refused = False
        while self._landed:
            granted, committed, now = self._landed.pop(0)
            refused = await self._settle(granted, committed, now) or refused
        return refused

    async def _settle(self, granted: Granted, committed: list[bool], now: float) -> bool:
        refused = False
        for (e, placement), ok in zip(granted, committed, strict=True):
            if not ok:
                refused = self.refused_in_round = True
                await self.cluster_queues[e.cq].ask(Revert(e.wl.key))  # back in its queue
                self._changed(e.cq)
                self._idle.pop(e.cq, None)  # asked again: it has a head now, and holds less
                # quota came back, as at a finish: heads parked for want of it (by a later round,
                # which counted this reservation) are judged again
                self._requeue_tree(e.cq)
                self.reasons[e.wl.key] = ("the API server refused the admission; retrying"
                                          if getattr(self.port, "leading", True)
                                          else "this process follows: the leader admits it")
                continue
            self.reasons.pop(e.wl.key, None)
            self.admissions += 1
            self.world.placed[e.wl.key] = placement  # the one its queue holds
            self._watch_deadline(e.wl.key, placement)
            self.afs.record_admission(e)  # KEP-4136 entry penalty, only once committed
            self._record_admission(e.wl, e.cq, now)
            log.info("workload_admitted", workload=e.wl.key, cluster_queue=e.cq)
        return refused
