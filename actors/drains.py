"""Evictions that are not preemptions, and workloads that may not queue.

Kueue's workload controller evicts an admitted workload, whatever the quota says, when

* the Workload is deactivated (``spec.active: false``): Evicted, reason ``Deactivated``, or
  ``DeactivatedDueTo<reason>`` when its ``DeactivationTarget`` condition says why (a maximum
  execution time run out, ``actors.deadlines``);
* its LocalQueue's ``stopPolicy`` is ``HoldAndDrain``: reason ``LocalQueueStopped``;
* its ClusterQueue's ``stopPolicy`` is ``HoldAndDrain``: reason ``ClusterQueueStopped``;

and its queue manager keeps a pending workload out of the queues while it is deactivated or
its LocalQueue is stopped (``Hold`` or ``HoldAndDrain``); a stopped ClusterQueue is inactive
instead (``kueued.scheduling.forest``), so its workloads wait in it.

:func:`held_back` says why a pending workload may not queue (the coordinator leaves it
unrouted, with that reason, until a change lets it in); :func:`drain_reason` says why an
admitted one must go.  :class:`Drains` (a mixin of the Coordinator) evicts those at the
start of a round, only after a change that can call for it (a new version of a Workload, a
routing or topology change, a start): two phases as for a preemption (``kueued.kube.commits``;
Evicted carries the drain's reason and no Preempted condition), and once the reservation is
cleared the workload goes back to its queue, or, held back, leaves it.  A drain is not a
preemption: ``simulate`` does not count it as one.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import structlog

from actors.commits import commit_all
from actors.messages import Evict, Forget
from kueued.model.validation.workload_gates import ADMISSION_GATED_BY, GATE_ADMISSION_GATED_BY, enabled
from kueued.scheduling.workload import Placement, WorkloadSpec

if TYPE_CHECKING:
    from actors.cluster_queue import ClusterQueueActor
    from actors.versions import Left
    from kueued.kube.port import ApiPort
    from kueued.world import World

__all__ = ["Drains", "held_back", "drain_reason", "DEACTIVATED", "LOCAL_QUEUE_STOPPED", "CLUSTER_QUEUE_STOPPED"]

DEACTIVATED = ("Deactivated", "The workload is deactivated")
LOCAL_QUEUE_STOPPED = ("LocalQueueStopped", "The LocalQueue is stopped")
CLUSTER_QUEUE_STOPPED = ("ClusterQueueStopped", "The ClusterQueue is stopped")

log = structlog.get_logger("kueued.coordinator")


def held_back(world: World, spec: WorkloadSpec) -> str:
    """Why a pending workload may not queue now, or ""."""
    if not spec.obj.spec.active:
        return "the Workload is deactivated (spec.active is false)"
    gates = spec.obj.metadata.annotations.get(ADMISSION_GATED_BY, "")
    if gates and enabled(world.settings.feature_gates, GATE_ADMISSION_GATED_BY):
        return f"Admission is gated by: {gates}"  # Kueue's workload controller, reason AdmissionGated
    lq = world.local_queues.get(spec.local_queue)
    if lq is not None and lq.spec.stop_policy not in ("", "None"):
        return f"LocalQueue {spec.queue_name} is stopped (stopPolicy {lq.spec.stop_policy})"
    return ""


def drain_reason(world: World, spec: WorkloadSpec, placement: Placement) -> tuple[str, str] | None:
    """The Evicted condition's (reason, message) an admitted workload must be evicted with, or None."""
    if not spec.obj.spec.active:
        target = next((c for c in spec.obj.status.conditions
                       if c.type == "DeactivationTarget" and c.status == "True"), None)
        if target is not None:  # why it was deactivated (actors.deadlines), as Kueue words it
            return f"{DEACTIVATED[0]}DueTo{target.reason}", f"{DEACTIVATED[1]} due to {target.message}"
        return DEACTIVATED
    lq = world.local_queues.get(spec.local_queue)
    if lq is not None and lq.spec.stop_policy == "HoldAndDrain":
        return LOCAL_QUEUE_STOPPED
    cq = world.cluster_queues.get(placement.cluster_queue)
    if cq is not None and cq.spec.stop_policy == "HoldAndDrain":
        return CLUSTER_QUEUE_STOPPED
    return None


class Drains:
    """The drain half of the Coordinator (a mixin: every attribute is the Coordinator's)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        world: World
        port: ApiPort
        cluster_queues: dict[str, ClusterQueueActor]
        unrouted: dict[str, str]
        _evicting: dict[str, str]
        _uncounted: set[str]
        _taken: set[str]
        _left: dict[str, Left]
        _drain_due: bool

        async def _settle_evictions(self) -> None: ...
        async def _place(self, spec: WorkloadSpec, history: Left | None = None) -> None: ...
        def _record_drain(self, key: str, reason: str, message: str) -> None: ...

    async def drain(self) -> bool:
        """Evict every admitted workload that must go (module notes); whether any eviction was tried."""
        if not self._drain_due:
            return False
        self._drain_due = False
        due = [(key, placed.cluster_queue, why) for key, placed in self.world.placed.items()
               if key not in self._evicting and (spec := self.world.workloads.get(key)) is not None
               and (why := drain_reason(self.world, spec, placed)) is not None]
        if not due:
            return False
        committed = await commit_all(self.port, [
            partial(self.port.evict, key, cluster_queue=cq, reason=why[0], message=why[1], preempted=False)
            for key, cq, why in due])
        for (key, cq, why), ok in zip(due, committed, strict=True):
            actor = self.cluster_queues.get(cq)
            if not ok:
                self._drain_due = True  # refused: tried again next round
                continue
            if actor is None or not await actor.ask(Evict(key)):
                continue
            log.info("workload_evicted", workload=key, cluster_queue=cq, reason=why[0], message=why[1])
            self._record_drain(key, *why)
            self._evicting[key] = cq
            self._uncounted.add(key)  # not a preemption
        await self._settle_evictions()  # where the second phase is the first (simulate), released now
        return True

    async def hold_back(self, key: str, cq_name: str) -> None:
        """A workload whose eviction was just released is back in the queue that held it; Kueue
        requeues an evicted workload through its LocalQueue instead.  So it leaves that queue if
        it may not queue now, or if its LocalQueue is gone or routes elsewhere (edited since it
        was admitted, or a Workload admitted without one), and is placed as a pending one is."""
        spec = self.world.workloads.get(key)
        actor = self.cluster_queues.get(cq_name)
        if spec is None or actor is None:
            return
        why = held_back(self.world, spec)
        routed, unrouted = self.world.route(spec)
        if not why and (routed == cq_name or unrouted == "elastic"):
            return
        self._left.update(await actor.ask(Forget(frozenset({key}))))
        if why:  # still taken either way: the admission its status carried is not adopted again (once
            self.unrouted[key] = why  # it was, every change to the tree evicted it anew)
        else:
            await self._place(spec, self._left.pop(key, None))

