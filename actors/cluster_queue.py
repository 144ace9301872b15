"""A ClusterQueue actor: its balance, its heap of pending workloads, its admissions.

State changes are plain methods on :class:`PendingQueue` and the node balance;
``handle`` only matches messages to them.  An :class:`Admit` reserves up the tree and,
when granted, holds the workload as admitted (the coordinator then commits it through
the API port, or sends :class:`Revert`).  An :class:`Evict` releases a victim's quota
and returns it to the heap with its original queue order.
"""

from __future__ import annotations

from typing import Any

from actors.messages import (
    Admit,
    Adopt,
    Denied,
    Enqueue,
    Evict,
    Fingerprint,
    Finish,
    Forget,
    Granted,
    NodeReport,
    Nominate,
    Nomination,
    PopHead,
    Recharge,
    Report,
    Requeue,
    RequeueParked,
    Revert,
    Unpark,
)
from actors.node import NodeActor
from kueued.metrics import QueueSample
from kueued.scheduling.queues import PendingQueue
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["ClusterQueueActor"]


class ClusterQueueActor(NodeActor):
    def __init__(self, name: str, *, strict: bool) -> None:
        super().__init__(name, is_cohort=False)
        self.queue = PendingQueue(name, strict=strict)
        self.admitted: dict[str, WorkloadInfo] = {}
        self.active = True
        self.version = 0  # moves whenever ``admitted`` does (Nominate sends the set only then)
        self._ahead: tuple[list[tuple[WorkloadInfo, Any]], WorkloadInfo | None] = ([], None)  # last fold-ahead

    def sample(self) -> QueueSample:
        """A statistics record for metrics and status (read between rounds)."""
        return QueueSample(self.name, active=self.queue.heap_size(), inadmissible=len(self.queue.inadmissible),
                           admitted=len(self.admitted), usage=dict(self.node.usage), mailbox=self.stats().mailbox)

    def handle(self, msg: Any) -> Any:
        """A value, or a coroutine for the messages that wait on the parent (the runtime
        awaits it): most messages never wait, and a coroutine per message was measurable."""
        match msg:
            case Nominate(known=known, limit=limit, requeue_parked=requeue_parked, seen=seen):
                if requeue_parked:
                    self.queue.requeue_inadmissible()
                # the admitted set travels only when it changed since the version the coordinator holds
                report = NodeReport(self.name, dict(self.node.usage),
                                    tuple(self.admitted.values()) if seen != self.version else None, self.version)
                if not self.active:
                    return Nomination(None, report)
                if known is None or not self.queue.can_look_ahead():
                    return Nomination(self.queue.pop_head(), report)
                parked, head = self.queue.pop_known(known, limit)
                self._ahead = (parked, head)
                return Nomination(head, report, tuple(parked), True)
            case Unpark(keep=keep):
                parked, head = self._ahead
                self._ahead = ([], None)
                return self.queue.unpark(parked, head, keep)
            case PopHead():
                return self.queue.pop_head()
            case Enqueue(workload=wl):
                self.queue.push(wl)
                return None
            case Forget(keys=keys):
                held = [wl.key for wl in self.queue.pending() if wl.key in keys]
                for key in held:
                    self.queue.remove(key)
                return len(held)
            case Requeue(workload=wl, reason=reason):
                self.queue.requeue(wl, reason)
                return wl.key in self.queue.inadmissible
            case RequeueParked():
                return self.queue.requeue_inadmissible()
            case Admit():
                return self._admit(msg)
            case Revert(key=key):
                wl = self.admitted.pop(key)
                self.version += 1
                self.release(key, wl.usage)
                wl.release()
                self.queue.push(wl)
                return None
            case Evict(key=key):
                wl = self.admitted.pop(key, None)
                if wl is None:
                    return False
                self.version += 1
                self.release(key, wl.usage)
                wl.release()
                wl.evictions += 1
                self.queue.push(wl)
                return True
            case Finish(key=key):
                wl = self.admitted.pop(key, None)
                if wl is None:
                    return self.queue.remove(key) is not None
                self.version += 1
                self.release(key, wl.usage)
                return True
            case Adopt(workload=wl):
                if wl.key in self.admitted:
                    return None
                self.admitted[wl.key] = wl
                self.version += 1
                return self.reserve(wl.key, wl.usage, force=True)
            case Report():
                return NodeReport(self.name, dict(self.node.usage), tuple(self.admitted.values()), self.version)
            case Recharge():
                total: dict[tuple[str, str], int] = {}
                for wl in self.admitted.values():
                    for fr, v in wl.usage.items():
                        total[fr] = total.get(fr, 0) + v
                return self.reserve("recharge", total, force=True)
            case Fingerprint():
                return (self.queue.peek_keys(), tuple(sorted(self.queue.inadmissible)))
        return self.handle_node(msg)

    def _admit(self, msg: Admit) -> Any:
        answer = self.reserve(msg.workload.key, msg.usage)
        if isinstance(answer, Granted | Denied):
            return self._reserved(answer, msg)
        return self._reserving(answer, msg)  # the parent answers later

    async def _reserving(self, pending: Any, msg: Admit) -> Any:
        return self._reserved(await pending, msg)

    def _reserved(self, answer: Any, msg: Admit) -> Any:
        if isinstance(answer, Granted):
            wl = msg.workload
            wl.admit(self.name, dict(msg.usage), msg.flavors, at=msg.at)
            self.admitted[wl.key] = wl
            self.version += 1
        return answer
