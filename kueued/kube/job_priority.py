"""A Job's ``kueue.x-k8s.io/priority-class`` label changed: its Workload follows.

Kueue's ``UpdateWorkloadPriority`` (jobframework, after ``ensureOneWorkload`` finds the
Workload): when the Workload's priority is not set by another kind of class (it has no
``priorityClassRef``, or one to a WorkloadPriorityClass) and the Job's label names another
WorkloadPriorityClass than the Workload's (none included), the priority is worked out again
as for a new Workload (``PrepareWorkloadPriority``: the label's class, else the pods' class)
and written, with the Normal Event "Updated workload priority class: NS/NAME".  It holds for a
pending Workload and an admitted one alike (a WorkloadPriorityClass reference may change while
quota is reserved; a pod PriorityClass's may not).

Pure, as :mod:`kueued.kube.job_workload` is: :func:`refine` puts the step first where it
applies; :mod:`kueued.kube.jobs` resolves the priority and writes it.
"""

from __future__ import annotations

from typing import Any

from kueued.kube import job_workload as jw
from kueued.kube.workload_state import _dict, _meta, condition_true

__all__ = ["UpdatePriority", "refine"]

WPC = "WorkloadPriorityClass"


class UpdatePriority(jw.Step, frozen=True, tag=True):
    workload: str = ""


def refine(job: dict[str, Any], workloads: list[dict[str, Any]], step: jw.Step) -> jw.Step:
    """``step``, or first the Workload's priority when the Job's label moved (see the module notes)."""
    if len(workloads) != 1 or isinstance(step, jw.DeleteWorkloads | jw.CreateWorkload | jw.Finish):
        return step
    (wl,) = workloads
    if condition_true(wl, "Finished") or _meta(wl).get("deletionTimestamp"):
        return step
    ref = _dict(_dict(wl.get("spec")).get("priorityClassRef"))
    if ref and ref.get("kind") != WPC:
        return step  # a pod PriorityClass gave it: the label does not move it
    wanted = _dict(_meta(job).get("labels")).get(jw.PRIORITY_CLASS_LABEL) or ""
    if wanted == (ref.get("name") or ""):
        return step
    return UpdatePriority(workload=str(_meta(wl).get("name", "")), why="priority class label changed")
