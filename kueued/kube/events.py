"""Kubernetes Events about kueued's decisions, as Kueue's event recorder writes them.

``kubectl describe workload`` shows a Workload's story as Events: Kueue's scheduler
records ``QuotaReserved`` and ``Admitted``, its preemptor ``Preempted`` on each victim,
the workload controller ``EvictedDueToPreempted`` and, for a workload that cannot get in,
a ``Pending`` warning.  kueued records the same reasons with the same sentences, and one
of its own: a ``ValidationFailed`` warning on an object its webhook rules refused (no
webhook runs in front of kueued, so the object exists and the Event says why it does
not count), with ``field: reason`` as the message.

Events are a side channel: nothing waits for them.  :meth:`EventRecorder.record` is a
plain method that queues the Event and returns at once; :meth:`EventRecorder.run` (a
task in the daemon's task group) writes them with a few workers.  The queue is bounded:
when it is full an Event is dropped and counted (``counts["dropped"]``, logged once per
overflow), never waited for.  An Event identical to one recorded within ``window``
seconds (same object, type, reason and message) is not written again: as client-go's
correlator does, the Event already written counts it (its ``count`` and ``lastTimestamp``
patched, so ``kubectl describe`` shows "x3 over 2m"); repeats that come faster than they
are written are folded into one patch.  A failed write is counted and logged once per kind of
failure until a write succeeds; the Event is not retried (Kubernetes' own recorder
gives up after a few tries too, and a decision is in the object's status anyway).

Data flow::

    coordinator / daemon ──record()──► dedup ──► bounded deque ──► workers ──► KubeClient.create_event
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from kueued.kube.client import EVENT, Kind
from kueued.kube.errors import ApiError
from kueued.model.clock import rfc3339

__all__ = ["EventClient", "EventRecorder", "NORMAL", "WARNING"]

log = structlog.get_logger("kueued.kube.events")

NORMAL = "Normal"
WARNING = "Warning"

class EventClient(Protocol):
    """What the recorder needs of :class:`~kueued.kube.client.KubeClient` (a test gives a fake)."""

    async def create_event(self, regarding: dict[str, Any], *, reason: str, message: str,
                           type: str = NORMAL, action: str = "", reporter: str = "kueued") -> dict[str, Any]: ...

    async def patch(self, kind: Kind | str, namespace: str | None, name: str,
                    body: dict[str, Any]) -> dict[str, Any]: ...


Key = tuple[str, ...]


class _Event(NamedTuple):
    regarding: dict[str, Any]
    type: str
    reason: str
    message: str
    key: Key = ()
    repeat: bool = False  # count a repeat on the Event already written for ``key``


class _Series:
    """An Event recorded (``at``), and how many times it happened: what its next patch says."""

    __slots__ = ("at", "namespace", "name", "count", "queued")

    def __init__(self, at: float) -> None:
        self.at = at
        self.namespace = ""
        self.name = ""  # "" until its create has been answered
        self.count = 1
        self.queued = False  # a patch for it waits in the queue (later repeats ride on it)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Only what an Event's involvedObject needs: a queued Event does not hold the whole manifest."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    ref_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if meta.get(k)}
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "metadata": ref_meta}


class EventRecorder:
    """Fire-and-forget Events; ``counts``: recorded, deduplicated (repeats), dropped, written, counted (repeats
    patched onto the Event written), failed."""

    def __init__(self, client: EventClient, *, capacity: int = 1024, window: float = 600.0, workers: int = 4,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.capacity = capacity
        self.window = window
        self.workers = workers
        self.clock = clock
        self.counts: Counter[str] = Counter()
        self._queue: deque[_Event] = deque()
        self._recent: OrderedDict[Key, _Series] = OrderedDict()  # events recorded in the window, oldest first
        self._wake: anyio.Event | None = None  # made by run(): an Event belongs to the running loop
        self._dropping = False
        self._failing: str | None = None

    # --- recording: never blocks, never raises for a full queue ------------------------------------
    def record(self, obj_ref: Mapping[str, Any], type: str, reason: str, message: str) -> bool:
        """Queue an Event about ``obj_ref`` (a manifest: apiVersion, kind, metadata); whether it was queued."""
        now = self.clock()
        self._prune(now)
        ref = _reference(obj_ref)
        meta = ref["metadata"]
        key = (ref["kind"], meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""), type, reason,
               message)
        series = self._recent.get(key)
        if series is not None:
            self.counts["deduplicated"] += 1
            series.count += 1
            if not series.queued and len(self._queue) < self.capacity:
                series.queued = True
                self._queue.append(_Event(ref, type, reason, message, key, repeat=True))
                if self._wake is not None:
                    self._wake.set()
            return False
        if len(self._queue) >= self.capacity:
            self.counts["dropped"] += 1
            if not self._dropping:
                log.warning("events_dropped", queued=len(self._queue), reason=reason)
                self._dropping = True
            return False
        self._dropping = False
        self._recent[key] = _Series(now)
        self._queue.append(_Event(ref, type, reason, message[:1024], key))
        self.counts["recorded"] += 1
        if self._wake is not None:
            self._wake.set()
        return True

    def _prune(self, now: float) -> None:
        recent = self._recent
        while recent and (next(iter(recent.values())).at <= now - self.window or len(recent) > 16 * self.capacity):
            recent.popitem(last=False)

    def pending_events(self) -> int:
        """Events queued and not yet handed to a worker."""
        return len(self._queue)

    # --- Kueue's Events, with Kueue's sentences -------------------------------------------------------
    def quota_reserved(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float) -> bool:
        """The scheduler's Event when it reserves quota; ``waited``: seconds since the workload was queued."""
        return self.record(workload, NORMAL, "QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}, "
                                                              f"wait time since queued was {max(0.0, waited):.0f}s")

    def admitted(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float = 0.0) -> bool:
        """The workload controller's Event once admitted (no admission checks here: 0s after the reservation)."""
        return self.record(workload, NORMAL, "Admitted", f"Admitted by ClusterQueue {cluster_queue}, "
                                                         f"wait time since reservation was {max(0.0, waited):.0f}s")

    def preempted(self, victim: Mapping[str, Any], *, preemptor: Mapping[str, Any], reason: str, message: str,
                  cluster_queue: str, priorities: str) -> bool:
        """Kueue's two Events of a preemption (``IssuePreemptions``): ``Preempted`` on the victim, the
        eviction's message (:func:`preemption_message`) and both priorities; ``PreemptedWorkload`` on
        the preemptor, naming the victim and its ClusterQueue.  ``reason`` is Kueue's preemption reason."""
        meta = _meta(victim)
        self.record(preemptor, NORMAL, "PreemptedWorkload",
                    f"Preempted workload {meta.get('namespace', '')}/{meta.get('name', '')} (UID: "
                    f"{meta.get('uid') or ''}) in ClusterQueue {cluster_queue}; {priorities}")
        return self.record(victim, NORMAL, "Preempted", f"{message}; {priorities}")

    def evicted(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool:
        """``EvictedDueTo<reason>`` (Kueue's ReportEvictedWorkload), the Evicted condition's message."""
        return self.record(workload, NORMAL, f"EvictedDueTo{reason}", message)

    def deactivating(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool:
        """The workload controller's warning as it deactivates a workload (``MaximumExecutionTimeExceeded``)."""
        return self.record(workload, WARNING, reason, message)

    def pending(self, workload: Mapping[str, Any], message: str) -> bool:
        """The scheduler's warning for a workload it could not admit, with why."""
        return self.record(workload, WARNING, "Pending", message)

    def validation_failed(self, obj: Mapping[str, Any], errors: str) -> bool:
        """An object kueued's webhook rules refused: ``field: reason`` (several joined with ``; ``)."""
        return self.record(obj, WARNING, "ValidationFailed", errors)

    # --- writing ----------------------------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write queued Events until cancelled (``await tg.start(recorder.run)``)."""
        self._wake = anyio.Event()
        if self._queue:
            self._wake.set()
        task_status.started()
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(max(1, self.workers)):
                    tg.start_soon(self._worker)
        finally:
            self._wake = None

    async def _worker(self) -> None:
        while True:
            while not self._queue:
                wake = self._wake
                assert wake is not None
                if wake.is_set():
                    self._wake = wake = anyio.Event()
                await wake.wait()
            await self._write(self._queue.popleft())

    async def _write(self, event: _Event) -> None:
        series = self._recent.get(event.key)
        try:
            if event.repeat:
                if series is not None:
                    series.queued = False
                if series is None or not series.name:
                    return  # gone from the window, or its create not answered yet: the next repeat patches
                await self.client.patch(EVENT, series.namespace, series.name,
                                        {"count": series.count, "lastTimestamp": rfc3339()})
            else:
                created = await self.client.create_event(event.regarding, reason=event.reason,
                                                         message=event.message, type=event.type)
                meta = created.get("metadata") if isinstance(created, dict) else None
                if series is not None and isinstance(meta, dict):
                    series.namespace, series.name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        except ApiError as exc:
            if exc.reason == "NotLeader":  # a follower's: the leader records the Events, nothing failed
                self.counts["fenced"] += 1
                return
            self.counts["failed"] += 1
            what = type(exc).__name__
            if self._failing != what:
                meta = event.regarding["metadata"]
                log.warning("event_write_failed", reason=event.reason, kind=event.regarding["kind"],
                            name=meta.get("name", ""), error=what, detail=str(exc)[:200])
                self._failing = what
            return
        self.counts["counted" if event.repeat else "written"] += 1
        self._failing = None
