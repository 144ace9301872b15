"""The writes of the Job integration (:class:`kueued.kube.jobs.JobController`'s other half):
each makes one change through the client, takes the API server's answer into the cache, counts
it by action, logs it, and records the Event Kueue's job reconciler records for it."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import structlog

from kueued.kube import job_patches as jp
from kueued.kube import job_workload as jw
from kueued.kube.client import JOB, KINDS
from kueued.kube.conditions import merge_conditions
from kueued.kube.errors import ApiConflict, ApiNotFound
from kueued.kube.job_cache import JobCache, key_of, meta
from kueued.kube.job_lookups import assigned_flavors, priority_of
from kueued.kube.port import Condition
from kueued.model.api import IN_USE_FINALIZER
from kueued.model.clock import rfc3339

if TYPE_CHECKING:
    from kueued.kube.jobs import EventSink, JobClient

__all__ = ["JobWrites", "Gone"]

log = structlog.get_logger("kueued.kube.jobs")

WORKLOAD = KINDS["Workload"]


class Gone(Exception):
    """The Job vanished under a write: its deletion event ends the story."""


class JobWrites:
    """A mixin: every attribute is the JobController's."""

    client: JobClient
    cache: JobCache
    counts: Counter[str]
    events: EventSink | None

    # -- the writes ------------------------------------------------------------------------------

    async def _create_workload(self, job: dict[str, Any]) -> None:
        try:
            priority = await priority_of(self.client, job)
        except ApiNotFound as exc:  # a priority class it names does not exist: Kueue's warning, retried
            self._event(job, "ErrWorkloadCompose", exc.message, type="Warning")
            raise
        body = jw.build_workload(job, priority=priority)
        meta = body["metadata"]
        try:
            created = await self.client.create(WORKLOAD, body)
        except ApiConflict:  # it exists already (its event has not come yet): nothing to do
            log.info("job_workload_exists", job=key_of(job), workload=meta["name"])
            raise
        self.cache.observe("apply", created)
        self.counts["workload_created"] += 1
        log.info("job_workload_created", job=key_of(job), workload=f"{meta['namespace']}/{meta['name']}",
                 queue=body["spec"]["queueName"], priority=body["spec"]["priority"])
        self._event(job, "CreatedWorkload", f"Created Workload: {meta['namespace']}/{meta['name']}")

    async def _refuse(self, job: dict[str, Any], step: Any) -> None:
        """A Job Kueue's webhook would have refused (:mod:`kueued.kube.job_validation`): stopped if it
        runs, a Warning Event with the errors (once per version: the recorder counts repeats)."""
        if step.running:
            await self._write_job(job, jp.suspend_patch(job), action="job_suspended", why="refused")
        log.warning("job_refused", job=key_of(job), errors=list(step.errors))
        self._event(job, "ValidationFailed", step.message, type="Warning")

    async def _update_priority(self, job: dict[str, Any], wl: dict[str, Any]) -> None:
        priority = await priority_of(self.client, job)  # a missing class: retried, as on creation
        spec: dict[str, Any] = {"priority": priority.value, "priorityClassRef": priority.ref}
        await self._write_workload(wl, {"metadata": {"resourceVersion": meta(wl).get("resourceVersion")},
                                        "spec": spec}, action="workload_priority_class_updated", why="label changed",
                                   priority=priority.value)
        self._event(job, "UpdatedWorkload", f"Updated workload priority class: {key_of(wl)}")

    async def _delete_workload(self, wl: dict[str, Any], *, why: str) -> None:
        """Delete a Workload this controller no longer wants, Kueue's finalizer taken off first (a
        Workload Kueue made carries it; Kueue's reconciler takes it off before deleting too)."""
        namespace, name = key_of(wl).split("/", 1)
        try:
            if IN_USE_FINALIZER in (meta(wl).get("finalizers") or []):
                await self._release_workload(wl, why=why)
            await self.client.delete(WORKLOAD, namespace, name)
        except ApiNotFound:
            pass
        self.cache.observe("delete", wl)
        self.counts["workload_deleted"] += 1
        log.info("job_workload_deleted", workload=f"{namespace}/{name}", why=why)

    async def _release_workload(self, wl: dict[str, Any], *, why: str) -> None:
        """Kueue's finalizer off ``wl`` (the rest kept), on the version decided on."""
        finalizers = [f for f in meta(wl).get("finalizers") or [] if f != IN_USE_FINALIZER]
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta(wl).get("resourceVersion")}}
        await self._write_workload(wl, body, action="workload_released", why=why, finalizer=IN_USE_FINALIZER)

    async def _write_workload(self, wl: dict[str, Any], body: dict[str, Any], *, action: str, why: str,
                              status: bool = False, **fields: Any) -> None:
        namespace, name = key_of(wl).split("/", 1)
        write = self.client.patch_status if status else self.client.patch
        try:
            updated = await write(WORKLOAD, namespace, name, body)
        except ApiNotFound:
            self.cache.observe("delete", wl)
            return
        self.cache.observe("apply", updated)
        self.counts[action] += 1
        log.info(action, workload=f"{namespace}/{name}", why=why, **fields)

    async def _write_job(self, job: dict[str, Any], body: dict[str, Any], *, action: str, why: str,
                         status: bool = False, **fields: Any) -> None:
        namespace, name = key_of(job).split("/", 1)
        write = self.client.patch_status if status else self.client.patch
        try:
            updated = await write(JOB, namespace, name, body)
        except ApiNotFound:
            raise Gone from None
        self.cache.observe("apply", updated)
        self.counts[action] += 1
        log.info(action, job=f"{namespace}/{name}", why=why, **fields)

    async def _start(self, job: dict[str, Any], wl: dict[str, Any]) -> None:
        admission = (wl.get("status") or {}).get("admission") or {}
        flavors = await assigned_flavors(self.client, admission)
        try:
            labels = jp.pod_labels(str((wl.get("spec") or {}).get("queueName", "")),
                                   str(admission.get("clusterQueue", "")))
            body = jp.start_patch(job, flavors, jw.admitted_count(wl), labels)
        except jp.FlavorConflict as exc:  # Kueue: a permanent start error finishes the Workload
            log.warning("job_start_impossible", job=key_of(job), reason=str(exc))
            await self._finish(wl, jw.FAILED_TO_START, str(exc))
            self._event(job, "FailedToStart", str(exc), type="Warning")
            return
        cluster_queue = str(admission.get("clusterQueue", ""))
        await self._write_job(job, body, action="job_started", why="admitted", cluster_queue=cluster_queue,
                              flavors=sorted(meta(f).get("name", "") for f in flavors))
        self._event(job, "Started", f"Admitted by clusterQueue {cluster_queue}")

    async def _finish(self, wl: dict[str, Any], reason: str, message: str) -> None:
        listed = (wl.get("status") or {}).get("conditions")
        current = [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []
        conditions = merge_conditions(current, [Condition("Finished", "True", reason, message[:32768])],
                                      generation=meta(wl).get("generation"), now=rfc3339())
        body = {"metadata": {"resourceVersion": meta(wl).get("resourceVersion")},
                "status": {"conditions": conditions}}
        await self._write_workload(wl, body, action="workload_finished", why=reason, status=True)

    def _event(self, job: dict[str, Any], reason: str, message: str, *, type: str = "Normal") -> None:
        if self.events is not None:
            self.events.record(job, type, reason, message)
