"""A ClusterQueue actor: its balance, its heap of pending workloads, its admissions.

It owns the scheduling state of every workload it holds (``WorkloadInfo``): it builds it
from the spec an ``Enqueue`` or ``Adopt`` brings, changes it, and gives its history back
when the workload leaves (``Finish``, ``Forget``: :class:`~actors.messages.Left`).

State changes are plain methods on :class:`PendingQueue` and the node balance;
``handle`` only matches messages to them.  An :class:`Admit` reserves up the tree and,
when granted, holds the workload as admitted (the coordinator then commits it through
the API port, or sends :class:`Revert`).  An :class:`Evict` releases a victim's quota
and returns it to the heap with its original queue order.  A :class:`Reclaim` query is
answered with the admitted workloads that use one of its FRs (all of them for the
preemptor's own queue, which also sends the query up the tree).
"""

from __future__ import annotations

from typing import Any

from actors.messages import (
    Admit,
    Adopt,
    Configure,
    Denied,
    Enqueue,
    Evict,
    Finish,
    Forget,
    Granted,
    Left,
    LookFurther,
    NodeReport,
    Nominate,
    Nomination,
    Queued,
    Reached,
    Recharge,
    Reclaim,
    Released,
    Replace,
    Report,
    Requeue,
    RequeueParked,
    Revert,
    Sample,
    Unpark,
)
from actors.node import NodeActor
from kueued.metrics import QueueSample
from kueued.scheduling.queues import PendingQueue
from kueued.scheduling.workload import Placement, WorkloadInfo, WorkloadSpec, holdings_by_local_queue

__all__ = ["ClusterQueueActor", "left_of"]


class ClusterQueueActor(NodeActor):
    def __init__(self, name: str, *, strict: bool) -> None:
        super().__init__(name, is_cohort=False)
        self.queue = PendingQueue(name, strict=strict)
        self.admitted: dict[str, WorkloadInfo] = {}
        # admitted, eviction committed, reservation not yet cleared -> its queue order time once back
        self.evicting: dict[str, float | None] = {}
        self.active = True
        # the last fold-ahead: the parked (with their verdicts), the head, their flags before parking
        self._ahead: tuple[list[tuple[WorkloadInfo, Any]], WorkloadInfo | None, list[bool]] = ([], None, [])

    def sample(self, *, local_queues: bool = False) -> QueueSample:
        """A statistics record for metrics and status (read between rounds); ``local_queues``: with
        the pending workloads of each LocalQueue, (active, inadmissible) as the queue's own, and
        its admitted ones here, (how many, their usage)."""
        by_lq: dict[str, tuple[int, int]] = {}
        holdings: dict[str, tuple[int, dict[tuple[str, str], int]]] = {}
        if local_queues:
            parked = self.queue.inadmissible
            for wl in self.queue.pending():
                active, inadmissible = by_lq.get(wl.local_queue, (0, 0))
                by_lq[wl.local_queue] = ((active, inadmissible + 1) if wl.key in parked
                                         else (active + 1, inadmissible))
            holdings = holdings_by_local_queue(self.admitted.values())
        return QueueSample(self.name, active=self.queue.heap_size(), inadmissible=len(self.queue.inadmissible),
                           admitted=len(self.admitted), usage=dict(self.node.usage), mailbox=self.stats().mailbox,
                           local_queues=by_lq, holdings=holdings, changes=self.changes)

    def handle(self, msg: Any) -> Any:
        """A value, or a coroutine for the messages that wait on the parent (the runtime
        awaits it): most messages never wait, and a coroutine per message was measurable.
        Here the messages about the heap; the rest in :meth:`_handle_admitted`."""
        match msg:  # the most frequent first: every head not admitted is requeued, every round nominates
            case Requeue(workload=wl, reason=reason, preempting=preempting, evicted=evicted):
                wl.preempting = preempting
                if evicted:
                    wl.victims.update(evicted)
                self.queue.requeue(wl, reason)
                return wl.key in self.queue.inadmissible
            case Nominate(known=known, limit=limit, requeue_parked=requeue_parked):
                if requeue_parked:
                    self.queue.requeue_inadmissible()
                report = NodeReport(self.name, dict(self.node.usage))
                if not self.active:
                    return Nomination(None, report)
                if known is None or not self.queue.can_look_ahead():
                    return Nomination(self.queue.pop_head(), report)
                self._ahead = ([], None, [])
                return self._look_ahead(known, limit, report, None)
            case LookFurther(known=known, limit=limit):
                return self._look_ahead(known, limit, NodeReport(self.name, dict(self.node.usage)),
                                        self._ahead[:2])
            case Unpark(keep=keep):
                parked, head, was = self._ahead
                self._ahead = ([], None, [])
                for (wl, _), flag in zip(parked[keep:], was[keep:], strict=True):
                    wl.preempting = flag  # never parked after all
                return self.queue.unpark(parked, head, keep)
            case Enqueue(spec=spec, history=history):
                self.queue.push(_state(spec, None, history))
                return None
            case Forget(keys=keys):
                held = [wl for wl in self.queue.pending() if keys is None or wl.key in keys]
                for wl in held:
                    self.queue.remove(wl.key)
                return [(wl.key, left_of(wl)) for wl in held]
            case RequeueParked():
                return self.queue.requeue_inadmissible()
            case Queued():
                self.reads += 1
                return frozenset(wl.key for wl in self.queue.pending())
            case Sample(local_queues=local_queues):
                self.reads += 1
                return self.sample(local_queues=local_queues)
        return self._handle_admitted(msg)

    def _look_ahead(self, known: Any, limit: int, report: NodeReport, ahead: Any) -> Nomination:
        """Park the heads ``known`` answers (from ``ahead``, the last fold's, when going on)."""
        parked, head = self.queue.pop_known(known, limit, ahead)
        was = self._ahead[2]
        for wl, _ in parked[len(was):]:  # a verdict answered it: it issues no eviction this round
            was.append(wl.preempting)
            wl.preempting = False
        self._ahead = (parked, head, was)
        return Nomination(head, report, tuple(parked), True)

    def _handle_admitted(self, msg: Any) -> Any:
        """The messages about the admitted set: reserve, revert, evict, finish, adopt, report."""
        match msg:
            case Admit():
                return self._admit(msg)
            case Revert(key=key):
                wl = self._unhold(key)
                if wl is None:  # it left meanwhile (a commit refused after its finish)
                    return None
                self.release(key, wl.usage)
                wl.release()
                self.queue.push(wl)
                return None
            case Evict(key=key, requeue_at=requeue_at):
                if key not in self.admitted:
                    return False
                self.evicting[key] = requeue_at  # still holds its quota: a preemptor waits for Released
                return True
            case Released(key=key):
                requeue_at = self.evicting.pop(key, None)
                wl = self._unhold(key)
                if wl is None:
                    return False
                self.release(key, wl.usage)
                wl.release()
                wl.evictions += 1
                if requeue_at is not None:
                    wl.created = requeue_at
                self.queue.push(wl)
                return True
            case Finish(key=key):
                self.evicting.pop(key, None)
                wl = self._unhold(key)
                if wl is not None:
                    self.release(key, wl.usage)
                else:
                    wl = self.queue.remove(key)
                return None if wl is None else left_of(wl)
            case Adopt(spec=spec, placement=placement, history=history):
                if spec.key in self.admitted:
                    return None
                wl = _state(spec, placement, history)
                self._hold(wl)
                return self.reserve(wl.key, wl.usage, force=True)
            case Replace(spec=spec):
                held = self.admitted.get(spec.key)
                if held is None:
                    return False
                self.admitted[spec.key] = held.carry(spec, held.placement)  # the same place in the set
                return True
            case Report():
                self.reads += 1
                return NodeReport(self.name, dict(self.node.usage), tuple(self.admitted.values()))
            case Recharge():
                return self.reserve("recharge", self._held_usage(), force=True)
            case Reclaim():
                return self.reclaim(msg)
            case Configure():
                self._configure(msg)
        return self.handle_node(msg)

    def _configure(self, msg: Configure) -> None:
        """Whether it is active, and its strategy: the same workloads, queued by the other one."""
        self.active = msg.active
        if msg.strict != self.queue.strict:
            fresh = PendingQueue(self.name, strict=msg.strict, usage_of=self.queue.usage_of)
            for wl in self.queue.pending():
                fresh.push(wl)
            self.queue = fresh

    def order_by(self, usage_of: Any) -> None:
        """How the heap ranks workloads beyond Kueue's default (``kueued.engine.wiring.queue_order_hook``):
        wiring the coordinator hands the queue with each topology, as it would a constructor argument
        (a function, so never inside a message)."""
        self.queue.usage_of = usage_of

    def reclaim(self, query: Reclaim) -> Reached:
        """The admitted workloads here a preemptor could take quota back from, by Kueue's
        rules for where candidates may be: all of the preemptor's own queue's (within
        ClusterQueue); elsewhere an active queue's, only under fair sharing when it borrows
        on one of the FRs (a queue within its quota is no fair-sharing target)."""
        own = query.up and query.preemptor == self.name
        more: tuple[Any, ...] = ()
        if own and query.cohort and self.parent is not None and self.parent.key not in query.skip:
            more = (self.parent.post(Reclaim(query.preemptor, query.frs, query.fair, came_from=self.key,
                                             skip=query.skip)),)
        if not own and (not self.active or (query.fair and not self._borrows(query.frs))):
            return Reached(searched=(self.key,))
        frs = query.frs
        found = tuple(wl for wl in self.admitted.values() if not frs.isdisjoint(wl.usage))
        return Reached(((self.name, found),), (self.key,), more)

    def _borrows(self, frs: frozenset[tuple[str, str]]) -> bool:
        usage, nominal = self.node.usage, self.node.subtree
        return any(usage.get(fr, 0) > nominal.get(fr, 0) for fr in frs)

    def _admit(self, msg: Admit) -> Any:
        answer = self.reserve(msg.workload.key, msg.placement.usage)
        if isinstance(answer, Granted | Denied):
            return self._reserved(answer, msg)
        return self._reserving(answer, msg)  # the parent answers later

    async def _reserving(self, pending: Any, msg: Admit) -> Any:
        return self._reserved(await pending, msg)

    def _reserved(self, answer: Any, msg: Admit) -> Any:
        if isinstance(answer, Granted):
            wl = msg.workload
            wl.preempting = False
            wl.admit(msg.placement)
            self._hold(wl)
        return answer

    # --- the admitted set ------------------------------------------------------------------------
    def _held_usage(self) -> dict[tuple[str, str], int]:
        total: dict[tuple[str, str], int] = {}
        for wl in self.admitted.values():
            for fr, v in wl.usage.items():
                total[fr] = total.get(fr, 0) + v
        return total

    def _hold(self, wl: WorkloadInfo) -> None:
        self.admitted[wl.key] = wl

    def _unhold(self, key: str) -> WorkloadInfo | None:
        return self.admitted.pop(key, None)


def left_of(wl: WorkloadInfo) -> Left:
    """What a workload leaving its queue carries on."""
    return Left(wl.admitted, wl.evictions, frozenset(wl.victims), wl.preempting)


def _state(spec: WorkloadSpec, placement: Placement | None, history: Left | None) -> WorkloadInfo:
    if history is None:
        return WorkloadInfo(spec, placement)
    return WorkloadInfo(spec, placement, evictions=history.evictions, victims=history.victims,
                        preempting=history.preempting)
