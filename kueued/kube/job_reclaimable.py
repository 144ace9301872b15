"""Pods of a Job that will not run again: the Workload's ``status.reclaimablePods``.

Kueue's ``ReconcileGenericJob`` (step 4, before it handles an eviction or starts the Job)
compares what the Job reports with the Workload's status and writes the difference; the
scheduler then counts only the pods still to run (``kueued.kube.shapes`` reads the field).
For a batch/v1 Job (``pkg/controller/jobs/job`` ``ReclaimablePods``): with ``parallelism`` p
(default 1) and ``status.succeeded`` s, nothing while p is 1 or s is 0; else the pods left,
``completions`` (default p) minus s, and when fewer than p remain, ``p - remaining`` pods of
pod set ``main`` are reclaimable.  So a Job of 2 pods, 1 of which succeeded, holds 1 pod's
quota, and a waiting Job can take the other.

Pure, as :mod:`kueued.kube.job_workload` is: :func:`refine` turns that module's step into the
write of the reclaimable pods when they differ and the step would otherwise wait, start the
Job or do nothing.
"""

from __future__ import annotations

from typing import Any

from kueued.kube import job_workload as jw
from kueued.kube.job_workload import _int
from kueued.kube.workload_state import _dict, _list, _meta, condition_true

__all__ = ["UpdateReclaimable", "reclaimable_pods", "refine"]


class UpdateReclaimable(jw.Step, frozen=True, tag=True):
    """Write ``pods`` as the Workload's ``status.reclaimablePods`` ([] clears it)."""

    workload: str = ""
    pods: tuple[tuple[str, int], ...] = ()

    def body(self) -> list[dict[str, Any]]:
        return [{"name": name, "count": count} for name, count in self.pods]


def reclaimable_pods(job: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """Kueue's ``Job.ReclaimablePods``: (pod set, count) pairs, none when nothing is reclaimable."""
    spec = _dict(job.get("spec"))
    parallelism = _int(spec.get("parallelism"), 1)
    succeeded = _int(_dict(job.get("status")).get("succeeded"), 0)
    if parallelism == 1 or succeeded == 0:
        return ()
    remaining = _int(spec.get("completions"), parallelism) - succeeded
    if remaining >= parallelism:
        return ()
    return ((jw.POD_SET, parallelism - remaining),)


def refine(job: dict[str, Any], workloads: list[dict[str, Any]], step: jw.Step) -> jw.Step:
    """``step``, or first the reclaimable pods' write where Kueue makes it (see the module notes)."""
    if not isinstance(step, jw.Done | jw.Wait | jw.Start) or len(workloads) != 1:
        return step
    (wl,) = workloads
    if condition_true(wl, "Finished") or jw.job_finished(job)[0] or _meta(wl).get("deletionTimestamp"):
        return step
    wanted = reclaimable_pods(job)
    if wanted == _written(wl):
        return step
    return UpdateReclaimable(workload=str(_meta(wl).get("name", "")), pods=wanted, why="reclaimable pods changed")


def _written(workload: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    pods = []
    for item in _list(_dict(workload.get("status")).get("reclaimablePods")):
        item = _dict(item)
        count = _int(item.get("count"), 0)
        if count:
            pods.append((str(item.get("name", "")), count))
    return tuple(sorted(pods))


