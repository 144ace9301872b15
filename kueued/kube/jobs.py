"""The batch/v1 Job integration: a Workload per queued Job, and the Job run only while it is admitted.

kueued schedules Workloads; users submit Jobs.  :class:`JobController` stands between the
two as Kueue's job framework does (``pkg/controller/jobframework/reconciler.go`` with
``pkg/controller/jobs/job``), for every Job labelled ``kueue.x-k8s.io/queue-name``:

- a **suspended** Job gets a Workload (:func:`~kueued.kube.job_workload.build_workload`:
  Kueue's name, owner reference, ``job-uid`` label, queue, one pod set ``main``, priority
  from the ``kueue.x-k8s.io/priority-class`` WorkloadPriorityClass, else the pods'
  PriorityClass, else the global default, else 0);
- **admitted** (``status.admission`` and ``Admitted=True``), the Job is unsuspended with the
  assigned flavors' node labels and tolerations merged into its pod template (the original
  kept in an annotation), in one conditional merge patch;
- **evicted** (``Evicted=True``, or the admission gone while it runs), the Job is suspended
  and its template restored; so is a Job whose Workload is **deleted** while Kueue's finalizer
  holds it (one made under Kueue), and the finalizer then taken off, as Kueue's reconciler does;
- **finished** (``Complete`` or ``Failed``), its Workload gets ``Finished=True``, and
  kueued's World frees the quota;
- **deleted**, its Workload is deleted: without kube-controller-manager no garbage
  collector follows the owner reference, and with one this only comes first;
- the queue label **changed** while the Job waits moves its Workload; once admitted it stays.

Data flow::

    ClusterSource(Job, Workload) ──► caches (Jobs; Workloads a Job controls, by owner) ──► WorkQueue of Job keys
        ──► workers: decide(job, its workloads) ─► one write ─► cache updated from the reply ─► decide again ...

Each reconcile takes one key (``namespace/name`` of a Job), reads the caches
(:mod:`kueued.kube.job_cache`) and applies :func:`~kueued.kube.job_workload.decide` step by
step until it says Done: the decisions are pure (:mod:`kueued.kube.job_workload`, the patches
:mod:`kueued.kube.job_patches`), this module only reads and writes.  Every write to a
Job or a Workload carries the resourceVersion it was decided on, so a stale cache costs a 409,
never a wrong write; a refused write is retried when the object's next event arrives (the
queue holds each key once, one worker per key) and, as a safety net, after a backoff.  Every
step is idempotent: after a restart the same state decides the same writes, and a state
already reached decides none.  A Workload whose Job is gone (or was replaced by one of the
same name) is deleted after a GET confirms it, so a watch that lags cannot cost a Workload.
Nothing an object holds crashes the controller: a reconcile that fails is logged
(``job_reconcile_failed``) and retried with backoff, and the others go on.  A caller that
stops the controller may first ``await drain()``, so no request is cut off mid-flight.

**The window before the suspend.**  A labelled Job created unsuspended is suspended at once,
but "at once" is after the API server stored it: the job controller may create pods before
the suspend lands, and they run (and are then deleted) without quota.  Kueue closes that
window with a mutating admission webhook that sets ``spec.suspend: true`` while the Job is
created, so it is never stored running.  Doing the same needs three things kueued does not
have yet: an HTTPS endpoint in the daemon serving the AdmissionReview API (a TLS serving
certificate and key, rotated, whose CA the API server trusts), a way for the API server to
reach it (a Service in front of kueued's pod, or a URL for a daemon outside the cluster),
and a ``MutatingWebhookConfiguration`` for ``batch/v1 jobs`` CREATE (with ``caBundle``,
an ``objectSelector`` on the queue-name label, ``failurePolicy``, ``sideEffects: None``).
Until then users should create queued Jobs suspended, as Kueue's docs advise anyway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from kueued.kube import job_patches as jp
from kueued.kube import job_prebuilt, job_priority, job_reclaimable, job_validation
from kueued.kube import job_workload as jw
from kueued.kube.backoff import Backoff
from kueued.kube.client import JOB, KINDS, Kind
from kueued.kube.errors import ApiConflict, ApiError, ApiNotFound
from kueued.kube.job_cache import JobCache, key_of, meta
from kueued.kube.job_writes import Gone, JobWrites
from kueued.kube.watch import ClusterSource
from kueued.kube.watch_state import WatchClient
from kueued.kube.workqueue import WorkQueue

__all__ = ["JobController", "JobClient", "EventSink", "JobControllerStats"]

log = structlog.get_logger("kueued.kube.jobs")

WORKLOAD = KINDS["Workload"]
MAX_STEPS = 8
"""Writes one reconcile may make (a stop is three, then a Workload may be replaced): more is a loop."""


class JobClient(WatchClient, Protocol):
    """What the controller needs of :class:`~kueued.kube.client.KubeClient` (a test gives a fake)."""

    async def get(self, kind: Kind | str, namespace: str | None, name: str) -> dict[str, Any]: ...

    async def create(self, kind: Kind | str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def delete(self, kind: Kind | str, namespace: str | None, name: str) -> None: ...

    async def patch(self, kind: Kind | str, namespace: str | None, name: str,
                    body: dict[str, Any]) -> dict[str, Any]: ...

    async def patch_status(self, kind: Kind | str, namespace: str | None, name: str, body: dict[str, Any], *,
                           resource_version: str | None = None) -> dict[str, Any]: ...


class EventSink(Protocol):
    """Where Kubernetes Events about Jobs go (:class:`kueued.kube.events.EventRecorder` is one)."""

    def record(self, obj_ref: Mapping[str, Any], type: str, reason: str, message: str) -> bool: ...


class JobControllerStats(NamedTuple):
    jobs: int
    workloads: int
    queued: int
    retrying: int
    actions: dict[str, int]


class JobController(JobWrites):
    """Keeps every queued Job and its Workload in step; see the module docstring."""

    def __init__(self, client: JobClient, *, workload_namespace_filter: Callable[[str], bool] | None = None,
                 events: EventSink | None = None, workers: int = 4, backoff: Backoff | None = None,
                 watch_timeout: int = 240) -> None:
        self.client = client
        self.namespace_filter = workload_namespace_filter
        self.events = events
        self.workers = workers
        self.backoff = backoff or Backoff()
        self.source = ClusterSource(client, kinds=(JOB, WORKLOAD), watch_timeout=watch_timeout, name="jobs")
        self.cache = JobCache(workload_namespace_filter)
        self.queue = WorkQueue()
        self._attempts: Counter[str] = Counter()
        self._retrying: set[str] = set()
        self.counts: Counter[str] = Counter()           # writes by action, for metrics and tests

    async def drain(self) -> None:
        """Wait until every Job queued so far is reconciled (retries still waiting excepted): call before
        cancelling :meth:`run` to stop between requests rather than in the middle of one."""
        await self.queue.join()

    def stats(self) -> JobControllerStats:
        return JobControllerStats(len(self.cache.jobs), len(self.cache.workloads), len(self.queue),
                                  len(self._retrying), dict(self.counts))

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow Jobs and Workloads until cancelled; ``started()`` once both have listed and workers run."""
        async with anyio.create_task_group() as tg:
            await tg.start(self.source.run)
            for verb, obj in await self.source.initial_sync():
                self.cache.observe(verb, obj)
            for key in sorted(self.cache.job_keys()):  # orphans too: their Job went while we were away
                self.queue.add(key)
            for i in range(self.workers):
                tg.start_soon(self._worker, tg, name=f"job worker {i}")
            log.info("job_controller_started", jobs=len(self.cache.jobs), workloads=len(self.cache.workloads))
            task_status.started()
            while batch := await self.source.next_batch():
                for verb, obj in batch:
                    if (changed := self.cache.observe(verb, obj)) is not None:
                        self.queue.add(changed)
            tg.cancel_scope.cancel()

    async def _worker(self, tg: TaskGroup) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
            except ApiConflict as exc:
                log.info("job_write_conflict", job=key, detail=exc.message[:200])
                self._retry(tg, key)
            except ApiError as exc:
                log.warning("job_api_refused", job=key, error=type(exc).__name__, detail=str(exc)[:300])
                self._retry(tg, key)
            except Exception:  # a bad object must cost its own Job, never the controller
                log.exception("job_reconcile_failed", job=key)
                self._retry(tg, key)
            else:
                self._attempts.pop(key, None)
            finally:
                self.queue.done(key)

    def _retry(self, tg: TaskGroup, key: str) -> None:
        self._attempts[key] += 1
        if key in self._retrying:
            return
        self._retrying.add(key)
        tg.start_soon(self._later, key, self.backoff.delay(self._attempts[key] - 1))

    async def _later(self, key: str, delay: float) -> None:
        await anyio.sleep(delay)
        self._retrying.discard(key)
        self.queue.add(key)


    # -- one Job --------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        """Bring the Job ``key`` (``namespace/name``) and its Workload in step; idempotent."""
        namespace, name = key.split("/", 1)
        if self.namespace_filter is not None and not self.namespace_filter(namespace):
            return
        await self._delete_stale(key)
        for _ in range(MAX_STEPS):
            job = self.cache.jobs.get(key)
            if job is None or not jw.queue_name(job):
                return
            uid = meta(job).get("uid")
            prebuilt = job_prebuilt.prebuilt_name(job)
            if prebuilt is not None:
                named = await self._prebuilt(job, prebuilt)
                owned, step = [w for w in (named,) if w is not None], job_prebuilt.decide(job, named)
            else:
                owned = [w for w in self.cache.owned_by(key) if (jw.owner_uid(w) or ("", ""))[1] == uid]
                step = jw.decide(job, owned)
            step = job_priority.refine(job, owned, job_reclaimable.refine(job, owned, step))
            step = job_validation.refine(job, owned, step)
            if isinstance(step, job_validation.Refuse):
                await self._refuse(job, step)
                return
            if isinstance(step, jw.Done | jw.Wait):
                return
            try:
                await self._apply(step, job, {str(meta(w).get("name")): w for w in owned})
            except Gone:
                return
        log.warning("job_reconcile_unsettled", job=key, steps=MAX_STEPS)

    async def _prebuilt(self, job: dict[str, Any], name: str) -> dict[str, Any] | None:
        """The Workload ``job`` names, unless another object controls it: from the caches, else
        asked of the API server (its watch event may not have come, or came before the Job's)."""
        namespace = meta(job).get("namespace", "")
        key = f"{namespace}/{name}"
        wl = self.cache.workloads.get(key) or self.cache.prebuilt.get(key)
        if wl is None:
            try:
                wl = await self.client.get(WORKLOAD, namespace, name)
            except ApiNotFound:
                return None
            self.cache.observe("apply", wl)
        return None if job_prebuilt.controlled_by_other(wl, job) else wl

    async def _delete_stale(self, key: str) -> None:
        """Delete the Workloads of a Job that is gone, or was replaced by a new Job of the same name."""
        job = self.cache.jobs.get(key)
        uid = meta(job).get("uid") if job is not None else None
        stale = [w for w in self.cache.owned_by(key) if (jw.owner_uid(w) or ("", ""))[1] != uid]
        if not stale:
            return
        namespace, name = key.split("/", 1)
        try:  # the Job watch may lag the Workload watch: ask before deleting
            current = await self.client.get(JOB, namespace, name)
        except ApiNotFound:
            current = None
        if current is not None:
            self.cache.observe("apply", current)
            uid = meta(current).get("uid")
        for wl in stale:
            if (jw.owner_uid(wl) or ("", ""))[1] != uid:
                await self._delete_workload(wl, why="job deleted" if current is None else "job replaced")

    async def _apply(self, step: jw.Step, job: dict[str, Any], owned: dict[str, dict[str, Any]]) -> None:
        namespace, name = key_of(job).split("/", 1)
        log.debug("job_step", job=f"{namespace}/{name}", step=type(step).__name__, why=step.why)
        match step:
            case jw.CreateWorkload():
                await self._create_workload(job)
            case job_reclaimable.UpdateReclaimable(workload=wl_name):
                await self._write_workload(owned[wl_name], {"status": {"reclaimablePods": step.body()}}, status=True,
                                           action="workload_reclaimable_pods", why=step.why, pods=step.body())
            case job_priority.UpdatePriority(workload=wl_name):
                await self._update_priority(job, owned[wl_name])
            case job_prebuilt.Adopt(workload=wl_name):
                await self._write_workload(owned[wl_name], job_prebuilt.adoption(job, owned[wl_name]),
                                           action="workload_adopted", why=step.why)
            case jw.DeleteWorkloads(names=names):
                for wl_name in names:
                    await self._delete_workload(owned[wl_name], why=step.why)
            case jw.UpdatePodSets(workload=wl_name):
                wl = owned[wl_name]
                body = {"metadata": {"resourceVersion": meta(wl).get("resourceVersion")},
                        "spec": {"podSets": jw.pod_sets(job),
                                 "maximumExecutionTimeSeconds": jw.max_execution_seconds(job)}}
                await self._write_workload(wl, body, action="workload_updated", why=step.why)
                self._event(job, "UpdatedWorkload", f"Updated not matching Workload for suspended job: "
                                                    f"{namespace}/{wl_name}")
            case jw.MoveQueue(workload=wl_name, queue=queue):
                wl = owned[wl_name]
                body = {"metadata": {"resourceVersion": meta(wl).get("resourceVersion")},
                        "spec": {"queueName": queue}}
                await self._write_workload(wl, body, action="workload_queue_changed", why=step.why, queue=queue)
            case jw.Suspend():
                await self._write_job(job, jp.suspend_patch(job), action="job_suspended", why=step.why)
                self._event(job, "Stopped", step.message)  # Kueue's stopJob Event
            case jw.ResetStartTime():
                await self._write_job(job, jp.reset_start_time_patch(job), action="job_start_time_reset",
                                      why=step.why, status=True)
            case jw.Restore(workload=wl_name):
                await self._write_job(job, jp.restore_patch(job, owned.get(wl_name)), action="job_template_restored",
                                      why=step.why)
            case jw.Start(workload=wl_name):
                await self._start(job, owned[wl_name])
            case jw.Release(workload=wl_name):
                await self._release_workload(owned[wl_name], why=step.why)
            case jw.Finish(workload=wl_name, reason=reason, message=message):
                await self._finish(owned[wl_name], reason, message)  # the Job condition's, as Kueue copies it
                self._event(job, "FinishedWorkload", f"Workload '{namespace}/{wl_name}' is declared finished")
            case _:
                raise AssertionError(f"unknown step {step!r}")
