"""A ClusterQueue's pending workloads: the heap, the inadmissible set, the head.

Mirrors Kueue's ``pkg/cache/queue/cluster_queue.go``.  Pending workloads sit in a heap
ordered by (priority desc, queue-order timestamp asc, uid); each cycle pops one head.
After a failed attempt the head goes back to the heap (retried next cycle) or to the
inadmissible set (parked until capacity frees in its cohort tree):

* StrictFIFO: always back to the heap, so it keeps blocking the queue (except a
  namespace mismatch, which is parked);
* BestEffortFIFO: back to the heap only when it was skipped after nomination or waits
  for its preemptions; otherwise parked, and the next workload becomes head.

``requeue_inadmissible`` moves every parked workload back (an eviction, a finished or
deleted workload, a queue change).  The heap deletes lazily: a removed workload's
entry stays until popped, then is dropped by key.

An optional ``usage_of`` hook (admission fair sharing) puts a LocalQueue's usage ahead
of priority in the order; those keys change as usage changes, so such a queue finds
its head by scanning instead of trusting the heap.

A BestEffortFIFO head requeued while its preemptions are pending becomes *sticky*
(Kueue#6929, #7101): it stays the head, ahead of priority, until it is popped and not
requeued (admitted) or removed, so a higher-priority workload that cannot be admitted
does not take the head back and let the freed quota be re-taken by the victims.  Kueue
ranks LocalQueue usage (admission fair sharing, KEP-1093 policies) before it; kueued
ranks the sticky head first there too.  With usage first, the victim (from a quieter
LocalQueue) took its freed quota straight back, and since a preemptor never evicts the
same workload twice (no flopping) the preemptor, of higher priority, waited for good;
Kueue flops instead until the usages cross.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any, Final

from kueued.scheduling.workload import WorkloadInfo

__all__ = ["PendingQueue", "RequeueReason", "parks"]


class RequeueReason:
    GENERIC: Final = "Generic"
    NAMESPACE_MISMATCH: Final = "NamespaceMismatch"
    FAILED_AFTER_NOMINATION: Final = "FailedAfterNomination"
    PENDING_PREEMPTION: Final = "PendingPreemption"


def parks(strict: bool, reason: str) -> bool:
    """Does a head requeued for ``reason`` go to the inadmissible set of a queue (StrictFIFO or
    not), rather than straight back to its heap?"""
    if strict:
        return reason == RequeueReason.NAMESPACE_MISMATCH
    return reason not in (RequeueReason.FAILED_AFTER_NOMINATION, RequeueReason.PENDING_PREEMPTION)


class PendingQueue:
    __slots__ = ("name", "strict", "_heap", "_items", "inadmissible", "usage_of", "_seq", "sticky",
                 "_inflight", "_sticky_after")

    def __init__(self, name: str, *, strict: bool,
                 usage_of: Callable[[WorkloadInfo], float] | None = None) -> None:
        self.name = name
        self.strict = strict
        self._heap: list[tuple[int, float, str, int, WorkloadInfo]] = []
        self._items: dict[str, WorkloadInfo] = {}
        self.inadmissible: dict[str, WorkloadInfo] = {}
        self.usage_of = usage_of
        self._seq = 0
        self.sticky: str | None = None
        self._inflight: str | None = None
        self._sticky_after: list[str | None] = []  # pop_known's record, for unpark

    def __len__(self) -> int:
        return len(self._items) + len(self.inadmissible)

    def pending(self) -> Iterator[WorkloadInfo]:
        yield from self._items.values()
        yield from self.inadmissible.values()

    def heap_size(self) -> int:
        return len(self._items)

    def push(self, wl: WorkloadInfo) -> None:
        self.inadmissible.pop(wl.key, None)
        self._items[wl.key] = wl
        self._seq += 1
        heapq.heappush(self._heap, (-wl.priority, wl.created, wl.uid, self._seq, wl))

    def remove(self, key: str) -> WorkloadInfo | None:
        if key == self.sticky:
            self.sticky = None
        return self._items.pop(key, None) or self.inadmissible.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._items or key in self.inadmissible

    def pop_head(self) -> WorkloadInfo | None:
        if self._inflight is not None and self._inflight == self.sticky:
            self.sticky = None  # popped last time and never requeued: admitted
        head = self._pop_head()
        self._inflight = head.key if head is not None else None
        return head

    def _pop_head(self) -> WorkloadInfo | None:
        sticky = self.sticky
        if self.usage_of is not None:
            if not self._items:
                return None
            usage_of = self.usage_of
            head = min(self._items.values(),
                       key=lambda w: (w.key != sticky, usage_of(w), -w.priority, w.created, w.uid))
            del self._items[head.key]
            return head
        if sticky is not None and sticky in self._items:
            return self._items.pop(sticky)  # its heap entry is dropped lazily
        while self._heap:
            wl = heapq.heappop(self._heap)[4]
            if self._items.get(wl.key) is wl:
                del self._items[wl.key]
                return wl
        return None

    def peek_keys(self) -> tuple[str, ...]:
        return tuple(sorted(self._items))

    def requeue(self, wl: WorkloadInfo, reason: str) -> None:
        """Put a head that was not admitted back, by Kueue's rules."""
        if wl.key == self._inflight:
            self._inflight = None
        if not self.strict and reason == RequeueReason.PENDING_PREEMPTION:
            self.sticky = wl.key
        if not self.parks(reason):
            self.push(wl)
        else:
            self._items.pop(wl.key, None)
            self.inadmissible[wl.key] = wl

    def parks(self, reason: str) -> bool:
        """Does a head requeued for ``reason`` go to the inadmissible set (not straight back)?"""
        return parks(self.strict, reason)

    # --- folding dead rounds ahead (kueued.scheduling.verdicts) ----------------------------------
    def can_look_ahead(self) -> bool:
        """Is :meth:`pop_known` exactly the pops and requeues the engine would make?  Not for a
        StrictFIFO queue (a known head comes straight back) or usage ordering."""
        return not self.strict and self.usage_of is None

    def pop_known(self, known: Any, limit: int, ahead: tuple[list[tuple[WorkloadInfo, Any]], WorkloadInfo | None]
                  | None = None) -> tuple[list[tuple[WorkloadInfo, Any]], WorkloadInfo | None]:
        """Pop heads while ``known.lookup(head)`` gives a verdict (with a ``reason``: the
        coordinator's :class:`~kueued.scheduling.verdicts.Known`), parking each as
        :meth:`requeue` would, at most ``limit``; returns the parked ones with their verdicts
        and the first head not known (popped, in flight), or None when the queue ran dry.
        ``ahead``: the last call's answer, to go on from (its head, in flight, may be known now)."""
        parked, head = ahead if ahead is not None else ([], None)
        if ahead is None:
            self._sticky_after = []
        while True:
            if head is None:
                head = self.pop_head()
                if head is None:
                    return parked, None
            verdict = known.lookup(head) if len(parked) < limit else None
            if verdict is None:
                return parked, head
            self._sticky_after.append(self.sticky)  # as it was once this head was popped
            self.requeue(head, verdict.reason)
            parked.append((head, verdict))
            head = None

    def unpark(self, parked: list[tuple[WorkloadInfo, Any]], head: WorkloadInfo | None,
               keep: int) -> WorkloadInfo:
        """Undo :meth:`pop_known` past its first ``keep`` parks: ``parked[keep]`` is in flight
        again, the later parked ones and ``head`` are back in the heap, as if never popped."""
        for wl, _ in parked[keep + 1:]:
            self.inadmissible.pop(wl.key, None)
            self.push(wl)
        if head is not None:
            self.push(head)
        current = parked[keep][0]
        self.inadmissible.pop(current.key, None)
        self._inflight = current.key
        self.sticky = self._sticky_after[keep]
        return current

    def requeue_inadmissible(self) -> int:
        moved = list(self.inadmissible.values())
        self.inadmissible.clear()
        for wl in moved:
            self.push(wl)
        return len(moved)
