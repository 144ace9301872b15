"""The API port on a real cluster: decisions written as Kueue writes them.

:class:`KubePort` implements :class:`~kueued.kube.port.ApiPort` with status writes, so
``kubectl get workloads``, kueuectl and dashboards read kueued's decisions exactly as they
read Kueue's:

- **Admission**: a JSON merge patch on the Workload's ``status`` subresource that sets
  ``status.admission`` (``clusterQueue``; per pod set ``name``, ``flavors``,
  ``resourceUsage`` for all its pods, ``count``) and the ``QuotaReserved`` and ``Admitted``
  conditions.  The patch carries the ``resourceVersion`` of the Workload kueued decided on,
  so the API server refuses it (409) if the Workload changed meanwhile: the commit then
  fails, the coordinator gives the reservation back and decides again on the new version.
- **Eviction**, in Kueue's two phases.  First ``Evicted`` (reason ``Preempted``) and
  ``Preempted`` (the preemption reason: ``InClusterQueue``, ``InCohortReclamation``, ...);
  the workload keeps its quota.  Then, once nothing runs for it, the reservation is cleared
  (``status.admission`` removed, ``QuotaReserved`` and ``Admitted`` False) and the quota is
  free.  A Workload with no Job behind it has no pods, so the second phase follows the first
  at once; a failed second phase is retried by :meth:`finish_evictions` (also after a
  restart, for a Workload found evicted but still holding its admission), only while the
  Workload still says it is evicted: one admitted again since (a phase two that landed with
  its answer lost cleared the reservation) is not cleared again.
- **Pending**: ``QuotaReserved=False`` with reason ``Pending`` and the sentence kueued already
  builds (with ``status.resourceRequests``, what each pod set asks, as Kueue's scheduler writes
  it), written only when it changes and at most once per ``pending_interval`` seconds per workload
  (:meth:`pending`, :meth:`flush_pending`).  The interval paces the scheduler's churn (a sentence
  that moves with usage: "2 more needed", then "1 more needed"); a change to or from another reason
  (a LocalQueue or ClusterQueue missing or inactive, admission gated, deactivated) is a change of the
  queues or of the Workload, which Kueue's workload controller writes at once, so the next flush
  writes it whatever the interval.  A refused one stays due for the next flush, and one the
  Workload already shows (a restart) is not written again, unless a write to it was
  refused since (it may have landed: until one succeeds, what the Workload shows is unknown).
- Every eviction counts in ``status.schedulingStats.evictions`` (by reason and underlying cause,
  as Kueue's ``workloadEvictionStateInc``); the first of a kind is also counted as ``evict_once``
  (``kueue_evicted_workloads_once_total``).
- **Deactivation** of a workload out of time (``actors.deadlines``): the ``DeactivationTarget``
  condition, then ``spec.active: false``; an eviction's second phase adds the seconds the admission
  ran to ``accumulatedPastExecutionTimeSeconds``, as Kueue's ``SyncAdmittedCondition`` does.
- **ElasticQuota**: the request/runtime annotations (a merge patch on the object) and the
  ``Accepted`` condition on its status.

Commits in doubt.  A write whose answer never came (a reset connection, a timeout) or came as
a 500 or 504 may have been made all the same.  Taken for refused, an admission that was in fact
written would have its quota given to another workload: two admissions where one fits.  So
an admission or an eviction that fails that way is settled by reading the Workload back
(a few tries, ``READ_BACK_DELAYS``): if it shows the write, the commit stands
(``commit_confirmed``); if it does not, or cannot be read, the commit is refused as usual
(the second logged ``commit_in_doubt``; the watch still brings the truth later).

Each :meth:`~KubePort.admit` and :meth:`~KubePort.evict` call is timed on ``clock`` (both phases of
an eviction, refused writes too) into ``timings``, (kind, seconds), which metrics drain
(``kueued_commit_duration_seconds``); it keeps the latest ``TIMINGS_KEPT`` when nobody does.

Conditions are merged by type into the Workload's current list (a merge patch replaces a
list whole), with ``lastTransitionTime`` kept when the status does not change.  Every write
goes through a :class:`StatusClient` (``kueued.kube.client``), whose errors are kueued's own
(:mod:`kueued.kube.errors`): a conflict or a vanished object is a refused commit (``False``),
never an exception out of the coordinator.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

import anyio
import structlog

from kueued.kube.conditions import merge_conditions
from kueued.kube.errors import ApiError, ApiNotFound
from kueued.kube.pending_reasons import PENDING, already_shown, pending_condition, requeued, reset_evictions, restarted
from kueued.kube.port import Committed, Condition, count_commit
from kueued.kube.workload_state import accumulated, admitted_to, evicted_for, evictions_counted
from kueued.kube.workload_state import released as reservation_cleared
from kueued.model.clock import rfc3339
from kueued.model.quantity import format_milli

__all__ = ["KubePort", "StatusClient"]

log = structlog.get_logger("kueued.kube")

TIMINGS_KEPT = 10_000
"""Commit timings kept for metrics to drain (a daemon without metrics keeps only these)."""

WRITES_IN_FLIGHT = 32
"""Pending-condition writes sent at once (the coordinator bounds its commits the same way)."""


PENDING_PER_FLUSH = 256
"""Pending conditions one flush writes at most; the rest stay due for the next pass.  A burst of
thousands of new Workloads otherwise held the daemon's loop on their reasons for seconds
(measured on Kueue's large-scale config: admissions stalled up to 12.9 s), and a reason is
information, an admission is not."""

READ_BACK_DELAYS = (0.1, 0.2, 0.4, 0.8, 1.6)
"""Waits between the reads that settle a commit in doubt (module notes): about three seconds in all."""


class StatusClient(Protocol):
    async def patch_status(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict: ...

    async def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict: ...

    async def get(self, kind: str, namespace: str | None, name: str) -> dict: ...


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class KubePort:
    """Commits through the API server; ``manifest_of(key)`` is the Workload manifest decided on."""

    echoes = True  # the watch brings every write back
    pipelined = True  # a round need not wait for its admissions' writes (actors.pipeline)

    def __init__(self, client: StatusClient, *, manifest_of: Callable[[str], dict[str, Any] | None],
                 requests_of: Callable[[str], list[tuple[str, int, dict[str, int]]] | None],
                 pending_interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.manifest_of = manifest_of      # "ns/name" -> the Workload as last seen (World.raw)
        self.requests_of = requests_of      # "ns/name" -> [(pod set, count, total requests in milli)]
        self.pending_interval = pending_interval
        self.clock = clock
        self.log: deque[Committed] = deque(maxlen=10_000)  # the latest commits, for debugging
        self.counts: Counter = Counter()    # every commit by (kind, ClusterQueue, reason), for metrics
        self.refused = 0
        self.timings: deque[tuple[str, float]] = deque(maxlen=TIMINGS_KEPT)  # (kind, seconds) per commit call
        self._pending_written: dict[str, tuple[str, float]] = {}
        self._pending_due: dict[str, str] = {}
        self._pending_now: set[str] = set()    # due, and not held to the interval: a change of reason
        self._pending_doubt: set[str] = set()  # a pending write refused: it may have landed all the same
        self._evicting: dict[str, str] = {}  # workload -> eviction message: phase two still to write

    # --- admission ---------------------------------------------------------------------------
    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int], counts: dict[str, int] | None = None) -> bool:
        started = self.clock()
        try:
            return await self._admit(workload, cluster_queue=cluster_queue, flavors=flavors, counts=counts)
        finally:
            self.timings.append(("admit", self.clock() - started))

    async def _admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                     counts: dict[str, int] | None) -> bool:
        manifest = self.manifest_of(workload)
        requests = self.requests_of(workload)
        if manifest is None or requests is None:
            return False
        assignments = []
        for name, count, totals in requests:
            if counts is not None and counts.get(name, count) != count:  # partial admission: fewer pods
                totals = {res: v // count * counts[name] for res, v in totals.items()} if count else totals
                count = counts[name]
            chosen = flavors.get(name, {})
            assignments.append({
                "name": name, "count": count,
                "flavors": {res: chosen[res] for res in sorted(totals) if res in chosen},
                "resourceUsage": {res: format_milli(v, resource=res) for res, v in sorted(totals.items())},
            })
        conditions = [Condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue "
                                                                          f"{cluster_queue}"),
                      Condition("Admitted", "True", "Admitted", "The workload is admitted")]
        conditions += reset_evictions(manifest) + restarted(manifest)
        body = self._status_body(manifest, conditions, conditional=True)
        body["status"]["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": assignments}
        body["status"]["resourceRequests"] = None  # the assignments' resourceUsage says it now (Kueue clears it)
        if not await self._write(workload, body, what="admit", applied=partial(admitted_to, cluster_queue)):
            return False
        self._pending_written.pop(workload, None)
        self._pending_due.pop(workload, None)
        self._committed(Committed("admit", workload, cluster_queue))
        return True

    # --- eviction, two phases ------------------------------------------------------------------
    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str,
                    preempted: bool = True) -> bool:
        started = self.clock()
        try:
            return await self._evict(workload, cluster_queue=cluster_queue, reason=reason, message=message,
                                     preempted=preempted)
        finally:
            self.timings.append(("evict", self.clock() - started))

    async def _evict(self, workload: str, *, cluster_queue: str, reason: str, message: str,
                     preempted: bool) -> bool:
        manifest = self.manifest_of(workload)
        if manifest is None:
            return False
        conditions = ([Condition("Evicted", "True", "Preempted", message),
                       Condition("Preempted", "True", reason, message)] if preempted
                      else [Condition("Evicted", "True", reason, message)])
        # a deactivated workload's DeactivationTarget goes as it is evicted (Kueue's workload controller)
        drop = ("DeactivationTarget",) if reason.startswith("Deactivated") else ()
        body = self._status_body(manifest, conditions, conditional=True, drop=drop)
        counted, first = evictions_counted(manifest, "Preempted" if preempted else reason)
        body["status"]["schedulingStats"] = {"evictions": counted}
        if not await self._write(workload, body, what="evict", applied=partial(evicted_for, message)):
            return False
        self._committed(Committed("evict", workload, cluster_queue, f"{reason}: {message}"), first=first)
        self._evicting[workload] = message
        await self.finish_evictions([workload])  # no pods behind a bare Workload: phase two at once
        return True

    def _committed(self, commit: Committed, *, first: bool = False) -> None:
        self.log.append(commit)
        count_commit(self.counts, commit, first=first)

    async def finish_evictions(self, workloads: list[str] | None = None) -> list[str]:
        """Clear the reservation of evicted workloads (phase two); the ones done."""
        done = []
        for workload in list(self._evicting if workloads is None else workloads):
            message = self._evicting.get(workload)
            manifest = self.manifest_of(workload)
            if message is None or manifest is None or not evicted_for(message, manifest):
                # gone, or no longer evicted (admitted again since, which turned Evicted off): a
                # late phase two would clear that newer admission, which kueued holds quota for
                self._evicting.pop(workload, None)
                continue
            conditions = [Condition("QuotaReserved", "False", "Pending", message),
                          Condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
                          requeued(manifest, message)]
            # on the version phase one returned (or the watch brought since): a condition another
            # controller wrote in between (a Job's Finished) is not overwritten; a conflict leaves it due
            body = self._status_body(manifest, conditions, conditional=True)
            body["status"]["admission"] = None
            past = accumulated(manifest, time.time())
            if past is not None:  # the seconds this admission ran count against maximumExecutionTimeSeconds
                body["status"]["accumulatedPastExecutionTimeSeconds"] = past
            if await self._write(workload, body, what="release", applied=reservation_cleared):
                self._evicting.pop(workload, None)
                done.append(workload)
        return done

    # --- deactivation: a workload out of time (actors.deadlines) ------------------------------
    async def deactivate(self, workload: str, *, reason: str, message: str) -> bool:
        """The ``DeactivationTarget`` condition and no accumulated time (a status write on the version
        decided on), then ``spec.active: false``; the watch brings the deactivated version back."""
        manifest = self.manifest_of(workload)
        if manifest is None:
            return False
        body = self._status_body(manifest, [Condition("DeactivationTarget", "True", reason, message)],
                                 conditional=True)
        body["status"]["accumulatedPastExecutionTimeSeconds"] = None
        if not await self._write(workload, body, what="deactivate"):
            return False
        namespace, name = workload.split("/", 1)
        try:
            await self.client.patch("Workload", namespace, name, {"spec": {"active": False}})
        except ApiError as exc:  # tried again: the condition is written once more, then the spec
            log.warning("deactivation_refused", workload=workload, error=type(exc).__name__, detail=str(exc)[:200])
            return False
        self._committed(Committed("deactivate", workload, "", f"{reason}: {message}"))
        return True

    def released(self, workload: str) -> bool:
        """Phase two written: the Workload no longer holds its admission."""
        return workload not in self._evicting

    def resume_eviction(self, workload: str, message: str) -> None:
        """A Workload found evicted but still holding its admission (a restart between the phases)."""
        self._evicting[workload] = message

    # --- pending -----------------------------------------------------------------------------
    def pending(self, workload: str, message: str) -> None:
        """Say why ``workload`` waits; written by :meth:`flush_pending` when it changed."""
        last = self._pending_written.get(workload)
        if last is None or last[0] != message or workload in self._pending_doubt:
            self._pending_due[workload] = message
            if last is not None and (pending_condition(message).reason != PENDING
                                     or pending_condition(last[0]).reason != PENDING):
                self._pending_now.add(workload)
            else:
                self._pending_now.discard(workload)
        else:
            self._pending_due.pop(workload, None)
            self._pending_now.discard(workload)

    def forget(self, workload: str) -> None:
        self._pending_written.pop(workload, None)
        self._pending_due.pop(workload, None)
        self._pending_now.discard(workload)
        self._pending_doubt.discard(workload)
        self._evicting.pop(workload, None)

    async def flush_pending(self, *, busy: Callable[[], bool] | None = None) -> int:
        """Write the due pending conditions whose workload was not written within the interval
        (``WRITES_IN_FLIGHT`` at a time, ``PENDING_PER_FLUSH`` a call).  ``busy()``, asked before each
        batch after the first, stops the flush while changes wait (the rest stay due): a reason is
        information, the finishes and arrivals behind it are quota and work."""
        now = self.clock()
        due: list[tuple[str, str, dict[str, Any]]] = []
        for workload, message in list(self._pending_due.items()):
            if len(due) >= PENDING_PER_FLUSH:
                break  # the rest stay due: the next pass writes them
            last = self._pending_written.get(workload)
            if last is not None and now - last[1] < self.pending_interval and workload not in self._pending_now:
                continue
            del self._pending_due[workload]
            manifest = self.manifest_of(workload)
            if manifest is None or _dict(manifest.get("status")).get("admission"):
                self._pending_now.discard(workload)
                continue  # gone, or admitted meanwhile (an echo not seen yet): no pending condition over it
            if workload not in self._pending_doubt and already_shown(manifest, message):  # a restart
                self._pending_written[workload] = (message, now)
                self._pending_now.discard(workload)
                continue
            due.append((workload, message, manifest))
        written = [0]

        async def one(workload: str, message: str, manifest: dict[str, Any]) -> None:
            written[0] += await self._write_pending(workload, message, manifest, now)

        for start in range(0, len(due), WRITES_IN_FLIGHT):
            if start and busy is not None and busy():
                for workload, message, _ in due[start:]:
                    self._pending_due.setdefault(workload, message)
                break
            async with anyio.create_task_group() as tg:
                for item in due[start:start + WRITES_IN_FLIGHT]:
                    tg.start_soon(one, *item)
        return written[0]

    async def _write_pending(self, workload: str, message: str, manifest: dict[str, Any], now: float) -> bool:
        condition = pending_condition(message)
        # on the version decided on: built on a stale one, the patch's condition list would
        # drop an admission made meanwhile (a new leader's first pass flipped Admitted off)
        body = self._status_body(manifest, [condition, *restarted(manifest, condition)], conditional=True)
        if condition.reason == PENDING and (requests := self._resource_requests(workload)) is not None:
            body["status"]["resourceRequests"] = requests  # as Kueue's scheduler propagates them
        if await self._write(workload, body, what="pending"):
            self._pending_written[workload] = (message, now)
            self._pending_doubt.discard(workload)
            if workload not in self._pending_due:  # (a newer reason that came meanwhile keeps its own mark)
                self._pending_now.discard(workload)
            return True
        self._pending_due.setdefault(workload, message)  # still due (unless a newer reason came meanwhile)
        self._pending_doubt.add(workload)  # what it shows is unknown until a write succeeds
        return False

    def _resource_requests(self, workload: str) -> list[dict[str, Any]] | None:
        """Kueue's ``status.resourceRequests`` of a pending workload: each pod set's requests for all
        its pods, as quota counts them (``PropagateResourceRequests``)."""
        requests = self.requests_of(workload)
        return None if requests is None else [
            {"name": name, "resources": {res: format_milli(v, resource=res) for res, v in sorted(totals.items())}}
            for name, _, totals in requests]

    # --- ElasticQuota --------------------------------------------------------------------------
    async def annotate_quota(self, quota: str, *, namespace: str, annotations: dict[str, str]) -> bool:
        return await self._quota_write(quota, namespace, {"metadata": {"annotations": annotations}}, status=False)

    async def quota_used(self, quota: str, *, namespace: str, used: dict[str, str | None]) -> bool:
        return await self._quota_write(quota, namespace, {"status": {"used": used}}, status=True)

    async def set_quota_condition(self, quota: str, *, namespace: str, condition: Condition) -> bool:
        body = {"status": {"conditions": merge_conditions([], [condition], generation=None, now=rfc3339())}}
        return await self._quota_write(quota, namespace, body, status=True)

    async def _quota_write(self, quota: str, namespace: str, body: dict[str, Any], *, status: bool) -> bool:
        """One merge patch of an ElasticQuota (its status subresource, or the object); False when refused."""
        write = self.client.patch_status if status else self.client.patch
        try:
            await write("ElasticQuota", namespace, quota, body)
        except ApiError as exc:
            log.warning("status_write_failed", object=f"ElasticQuota/{namespace}/{quota}", error=str(exc))
            return False
        return True

    # --- the one edge ---------------------------------------------------------------------------
    def _status_body(self, manifest: dict[str, Any], conditions: list[Condition], *,
                     conditional: bool, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        meta = _dict(manifest.get("metadata"))
        listed = _dict(manifest.get("status")).get("conditions")
        current = [c for c in listed if isinstance(c, dict) and c.get("type") not in drop] \
            if isinstance(listed, list) else []
        merged = merge_conditions(current, conditions, generation=meta.get("generation"), now=rfc3339())
        body: dict[str, Any] = {"status": {"conditions": merged}}
        if conditional and meta.get("resourceVersion"):
            body["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        return body

    async def _write(self, workload: str, body: dict[str, Any], *, what: str,
                     applied: Callable[[dict[str, Any]], bool] | None = None) -> bool:
        """One status patch; whether it was made.  With ``applied``, a failure that may have come
        after the write (module notes) is settled by reading the Workload back."""
        namespace, name = workload.split("/", 1)
        try:
            updated = await self.client.patch_status("Workload", namespace, name, body)
        except ApiError as exc:
            confirmed = await self._read_back(workload, applied) if applied and in_doubt(exc) else None
            if confirmed is None:
                self.refused += 1
                log.info("commit_refused", workload=workload, commit=what, error=type(exc).__name__,
                         detail=str(exc)[:200])
                return False
            log.info("commit_confirmed", workload=workload, commit=what, error=type(exc).__name__,
                     detail=str(exc)[:200])
            updated = confirmed
        manifest = self.manifest_of(workload)
        if manifest is not None and isinstance(updated, dict):
            # the next write of this workload builds on what this one made (conditions, version)
            manifest["status"] = updated.get("status", manifest.get("status"))
            manifest.setdefault("metadata", {})["resourceVersion"] = \
                (updated.get("metadata") or {}).get("resourceVersion")
        return True

    async def _read_back(self, workload: str, applied: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """The Workload as it is now if it shows the write in doubt was made, else None."""
        namespace, name = workload.split("/", 1)
        for delay in READ_BACK_DELAYS:
            try:
                current = await self.client.get("Workload", namespace, name)
            except ApiNotFound:
                return None
            except ApiError:
                await anyio.sleep(delay)
                continue
            return current if applied(current) else None
        log.warning("commit_in_doubt", workload=workload, attempts=len(READ_BACK_DELAYS))
        return None


def in_doubt(exc: ApiError) -> bool:
    """A failure that may have come after the API server made the write: no answer at all (a
    reset connection, a timeout), or a 500 or 504, which the API server sends when its store
    did not answer in time though it may still apply the write."""
    return exc.status in (None, 500, 504)
