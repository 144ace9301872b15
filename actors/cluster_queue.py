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
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["ClusterQueueActor"]


class ClusterQueueActor(NodeActor):
    def __init__(self, name: str, *, strict: bool) -> None:
        super().__init__(name, is_cohort=False)
        self.queue = PendingQueue(name, strict=strict)
        self.admitted: dict[str, WorkloadInfo] = {}
        self.active = True
        self.version = 0  # moves whenever ``admitted`` does (Nominate sends the set only then)
        # what changed in ``admitted`` since the version last sent (``_sent``): a Nominate
        # from a coordinator holding that version gets only this, not the whole set
        self._sent: int | None = None
        self._added: dict[str, WorkloadInfo] = {}
        self._removed: set[str] = set()
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
                report = self._report(seen)
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
            case Sample():
                return self.sample()
            case Admit():
                return self._admit(msg)
            case Revert(key=key):
                wl = self._unhold(key)
                assert wl is not None
                self.release(key, wl.usage)
                wl.release()
                self.queue.push(wl)
                return None
            case Evict(key=key):
                wl = self._unhold(key)
                if wl is None:
                    return False
                self.release(key, wl.usage)
                wl.release()
                wl.evictions += 1
                self.queue.push(wl)
                return True
            case Finish(key=key):
                wl = self._unhold(key)
                if wl is None:
                    return self.queue.remove(key) is not None
                self.release(key, wl.usage)
                return True
            case Adopt(workload=wl):
                if wl.key in self.admitted:
                    return None
                self._hold(wl)
                return self.reserve(wl.key, wl.usage, force=True)
            case Replace(workload=wl):
                if wl.key not in self.admitted:
                    return False
                self.admitted[wl.key] = wl  # the same place in the set
                self.version += 1
                self._added[wl.key] = wl  # the holder replaces its copy in place (or appends it)
                return True
            case Report():
                return self._report(None)
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
            self._hold(wl)
        return answer

    # --- the admitted set and what the coordinator holds of it -----------------------------------
    def _hold(self, wl: WorkloadInfo) -> None:
        self.admitted[wl.key] = wl
        self.version += 1
        # new to the holder, or dropped since the last send (then it is in _removed, and the
        # holder drops its copy before appending this one: the order matches the set's)
        self._added[wl.key] = wl

    def _unhold(self, key: str) -> WorkloadInfo | None:
        wl = self.admitted.pop(key, None)
        if wl is not None:
            self.version += 1
            self._added.pop(key, None)
            self._removed.add(key)
        return wl

    def _report(self, seen: int | None) -> NodeReport:
        """The balance and, for a holder of version ``seen``, the admitted set: nothing when
        it is current, the changes when it holds the version last sent, else the whole set."""
        usage = dict(self.node.usage)
        if seen is not None and seen == self.version:
            return NodeReport(self.name, usage, None, self.version)
        if seen is not None and seen == self._sent:
            report = NodeReport(self.name, usage, None, self.version, True,
                                tuple(self._added.values()), tuple(self._removed))
        else:
            report = NodeReport(self.name, usage, tuple(self.admitted.values()), self.version)
        self._sent = self.version
        self._added, self._removed = {}, set()
        return report
