"""One ElasticQuota group as an actor: its workloads, its children's requests, its runtime.

The group owns a :class:`~kueued.scheduling.elastic.GroupState` (its workloads and the
forced recycling timer) and, for the scheduling passes, a heap of its pending workloads.
Whenever what it asks for moves (a workload held or released, a child's ``RequestUp``)
it tells its parent its limited request; whenever its runtime moves (``RuntimeDown``) an
inner group divides it among its own children.  The system and default groups sit
outside the tree; they tell the root what they use (``OutsideUsage``), since the root
shares the cluster's total minus that.

Every state change is a plain method (``hold``, ``release``, ``try_admit``, ...);
``handle`` only dispatches.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from actors.elastic.flow import Flow
from actors.elastic.messages import (
    Amounts,
    BeginPass,
    Decision,
    GroupReply,
    GroupReport,
    GroupStats,
    Handed,
    Handover,
    Hold,
    Order,
    OutsideUsage,
    Recycle,
    Recycled,
    Release,
    RequestUp,
    Restore,
    Revert,
    RuntimeDown,
    Stats,
    TryAdmit,
)
from actors.elastic.root import ElasticRootActor
from actors.elastic.tree import ParentActor, koord
from kueued.quota.elastic import (
    OUTSIDE_TREE,
    ElasticGroup,
    calculator_keys,
    limit_request,
    masked_runtime,
    sum_resources,
)
from kueued.scheduling.elastic import ElasticWorkload, GroupState, result_of

__all__ = ["ElasticGroupActor"]


class ElasticGroupActor(ParentActor):
    def __init__(self, state: GroupState, flow: Flow, *, usage_sink: ElasticRootActor | None = None) -> None:
        super().__init__(state.name, flow)
        self.state = state
        self.spec: ElasticGroup = state.spec
        self.outside = state.name in OUTSIDE_TREE
        self.parent: ParentActor | None = None  # where requests go; None: outside the tree or detached
        self.usage_sink = usage_sink  # the root, for the system and default groups
        self.total: Amounts | None = None  # runtime from the parent, Koordinator values; None: never reached
        self.scaled_min: Amounts = koord(self.spec.min)
        self._down_seq = 0
        self._sent_up: Amounts | None = None
        self._sent_usage: Amounts | None = None
        self.heap: list[tuple[Order, str]] = []
        self.aside: list[str] = []  # tried, evicted or reverted during this pass

    # --- amounts ---------------------------------------------------------------------------
    def request(self) -> tuple[Amounts, Amounts]:
        """(request, limited request): children's limited requests for a parent, workloads' for a leaf."""
        if self.outside:
            own = {r: max(v, 0) for r, v in self.state.own_request().items()}
            return own, dict(own)
        if self.state.inner:
            asked = sum_resources(self.child_limited[c] for c in sorted(self.child_limited))
        else:
            asked = self.state.own_request()
        return limit_request(self.spec, asked)

    def runtime(self) -> Amounts:
        """The runtime in milli-units on max's keys; the system and default groups' is their max."""
        if self.outside:
            return dict(self.spec.max)
        return masked_runtime(self.spec, self.total or {})

    def divide_total(self) -> Amounts | None:
        return self.total

    def division_keys(self) -> list[str]:
        return calculator_keys(self.spec)

    def request_moved(self) -> None:
        limited = self.request()[1]
        if self.parent is not None and limited != self._sent_up:
            self._sent_up = limited
            self.flow.tell(self.parent, RequestUp(self.name, limited, self.next_seq()))
        self.divide()

    def usage_moved(self) -> None:
        if self.usage_sink is None:
            return
        used = self.state.used()
        if used != self._sent_usage:
            self._sent_usage = used
            self.flow.tell(self.usage_sink, OutsideUsage(self.name, used, self.next_seq()))

    def on_runtime(self, runtime: Amounts, scaled_min: Amounts, seq: int) -> None:
        if seq <= self._down_seq:
            return
        self._down_seq = seq
        self.total, self.scaled_min = dict(runtime), dict(scaled_min)
        self.divide()

    # --- workloads come and go -------------------------------------------------------------
    def hold(self, workloads: Iterable[ElasticWorkload]) -> None:
        """Keep these workloads; a new version of one already held takes over what was decided for it."""
        for w in workloads:
            old = self._forget(w.key)
            if old is not None:
                w.carry(old)
            self.state.workloads[w.key] = w
            if not w.admitted:
                heapq.heappush(self.heap, (w.order(), w.key))
        self.request_moved()
        self.usage_moved()

    def release(self, key: str) -> ElasticWorkload | None:
        """A workload finished or was deleted: its usage and its request leave the group."""
        w = self._forget(key)
        if w is not None:
            self.request_moved()
            self.usage_moved()
        return w

    def _forget(self, key: str) -> ElasticWorkload | None:
        w = self.state.workloads.pop(key, None)
        if w is None:
            return None
        if key in self.aside:
            self.aside.remove(key)
        if any(k == key for _, k in self.heap):
            self.heap = [(o, k) for o, k in self.heap if k != key]
            heapq.heapify(self.heap)
        return w

    def handover(self) -> Handed:
        """Give up every workload and the recycling timer (the tree is being rebuilt)."""
        held = tuple(self.state.workloads.values())
        self.state.workloads.clear()
        self.heap.clear()
        self.aside.clear()
        return Handed(held, self.state.over_since)

    # --- a scheduling pass -----------------------------------------------------------------
    def head(self) -> Order | None:
        return self.heap[0][0] if self.heap else None

    def begin_pass(self) -> Order | None:
        for key in self.aside:
            w = self.state.workloads[key]
            if not w.admitted:
                heapq.heappush(self.heap, (w.order(), key))
        self.aside.clear()
        return self.head()

    def try_admit(self) -> Decision:
        _, key = heapq.heappop(self.heap)
        w = self.state.workloads[key]
        victims = self.state.schedule(w, self.runtime())
        if victims is None:
            self.aside.append(key)
            return Decision(key, False, (), w.reason, {}, self.head())
        self.aside.extend(v.key for v in victims)
        self.usage_moved()
        return Decision(key, True, tuple(v.key for v in victims), "", dict(w.request), self.head())

    def recycle(self, now: float | None = None, delay: float = 0.0) -> Recycled:
        runtime = self.runtime()
        victims = self.state.recycle(runtime, now=now, delay=delay)
        self.aside.extend(v.key for v in victims)
        if victims:
            self.usage_moved()
        return Recycled(tuple(v.key for v in victims), self.state.recycle_deadline(runtime, delay))

    def revert(self, key: str, reason: str) -> None:
        w = self.state.workloads[key]
        w.admitted, w.reason = False, reason
        self.aside.append(key)
        self.usage_moved()

    def restore(self, key: str) -> None:
        w = self.state.workloads[key]
        w.admitted, w.reason, w.preemptions = True, "", w.preemptions - 1
        if key in self.aside:
            self.aside.remove(key)
        self.usage_moved()

    def report(self) -> GroupReply:
        runtime = self.runtime()
        results = {}
        for key, w in self.state.workloads.items():
            if not w.admitted:
                w.reason = self.state.prefilter(w, runtime) or w.reason
            results[key] = result_of(w)
        return GroupReply(self.name, self.request()[0], runtime, dict(self.spec.min), dict(self.spec.max), results)

    # --- the shell -------------------------------------------------------------------------
    def handle(self, msg: Any) -> Any:
        match msg:
            case RequestUp(child=child, limited=limited, seq=seq):
                try:
                    if self.on_request(child, limited, seq):
                        self.request_moved()
                finally:
                    self.flow.done()
                return None
            case RuntimeDown(runtime=runtime, scaled_min=scaled_min, seq=seq):
                try:
                    self.on_runtime(runtime, scaled_min, seq)
                finally:
                    self.flow.done()
                return None
            case Hold(workloads=workloads):
                return self.hold(workloads)
            case Release(workload=key):
                return self.release(key)
            case Handover():
                return self.handover()
            case BeginPass():
                return self.begin_pass()
            case TryAdmit():
                return self.try_admit()
            case Recycle(now=now, delay=delay):
                return self.recycle(now, delay)
            case Revert(workload=key, reason=reason):
                return self.revert(key, reason)
            case Restore(workload=key):
                return self.restore(key)
            case GroupReport():
                return self.report()
            case Stats():
                s = self.stats()
                admitted = sum(1 for w in self.state.workloads.values() if w.admitted)
                return GroupStats(self.name, s.mailbox, s.handled, len(self.state.workloads) - admitted,
                                  admitted, self.request()[0], self.runtime(), dict(self.state.used()))
        raise TypeError(f"{self.name}: unexpected message {type(msg).__name__}")
