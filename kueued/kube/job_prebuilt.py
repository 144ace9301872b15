"""A Job that names its own Workload: Kueue's ``kueue.x-k8s.io/prebuilt-workload-name`` label.

The user creates the Workload, and the Job points at it by name (in its own namespace).
Kueue's ``ensureOneWorkload`` then never makes a Workload of its own for that Job, whatever
happens (``handleJobWithNoWorkload``: "Skip workload creation for job with prebuilt workload"):

- a Workload controlled by another object is not this Job's: as if it were missing;
- one controlled by nobody is adopted first (``EnsurePrebuiltWorkloadOwnership``): the Job
  becomes its controller (ownerReference with ``controller`` and ``blockOwnerDeletion``) and it
  gets the ``kueue.x-k8s.io/job-uid`` label, unless it has one already;
- one that does not ask for what the Job needs (``ensurePrebuiltWorkloadInSync``, the same
  equivalence as for a Workload Kueue made) is finished, reason ``OutOfSync``, "The prebuilt
  workload is out of sync with its user job", and from then on counts as missing;
- while it is missing, a running Job is stopped ("missing workload") and a suspended one waits.

Everything else (admission starts the Job, eviction stops it, a finished Job finishes the
Workload) is the ordinary step function, :func:`kueued.kube.job_workload.decide`.  Pure, as that
module is: :mod:`kueued.kube.jobs` finds the Workload and applies the step.

Before this, the label was ignored: kueued made a Workload of its own beside the user's, and
both were admitted for one Job.
"""

from __future__ import annotations

from typing import Any

from kueued.kube import job_workload as jw
from kueued.kube.job_workload import _name
from kueued.kube.workload_state import _dict, _list, _meta, condition_true

__all__ = ["PREBUILT_LABEL", "OUT_OF_SYNC", "Adopt", "prebuilt_name", "controlled_by_other", "decide", "adoption"]

PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
OUT_OF_SYNC = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"


class Adopt(jw.Step, frozen=True, tag=True):
    """Make the Job the controller of its prebuilt Workload, and label it with the Job's uid."""

    workload: str = ""


def prebuilt_name(job: dict[str, Any]) -> str | None:
    """The Workload the Job names, or None when it names none."""
    value = _dict(_meta(job).get("labels")).get(PREBUILT_LABEL)
    return value if isinstance(value, str) and value else None


def controlled_by_other(workload: dict[str, Any], job: dict[str, Any]) -> bool:
    """Some object other than ``job`` controls ``workload`` (Kueue then ignores it)."""
    uid = _meta(job).get("uid")
    return any(_dict(ref).get("controller") is True and _dict(ref).get("uid") != uid
               for ref in _list(_meta(workload).get("ownerReferences")))


def decide(job: dict[str, Any], workload: dict[str, Any] | None) -> jw.Step:
    """The next write for a Job with a prebuilt Workload; ``workload`` is the one it names, if it
    exists and no other object controls it (see the module notes)."""
    finished, _, _ = jw.job_finished(job)
    if not finished:
        if workload is not None and jw.owner_uid(workload) is None:
            return Adopt(workload=_name(workload), why="prebuilt workload")
        if workload is not None and not jw.equivalent(job, workload):
            if not condition_true(workload, "Finished"):
                return jw.Finish(workload=_name(workload), reason=OUT_OF_SYNC, message=OUT_OF_SYNC_MESSAGE,
                                 why="prebuilt workload out of sync")
            workload = None
        if workload is None:
            if not jw.suspended(job):
                return jw.Suspend(why="prebuilt workload missing", message="missing workload")
            return jw.Wait(why="prebuilt workload missing")
    return jw.decide(job, [workload] if workload is not None else [])


def adoption(job: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that makes ``job`` the controller of ``workload`` (on the version decided on)."""
    meta = _meta(job)
    refs = [r for r in _list(_meta(workload).get("ownerReferences")) if _dict(r).get("uid") != meta.get("uid")]
    refs.append({"apiVersion": "batch/v1", "kind": "Job", "name": meta.get("name", ""), "uid": meta.get("uid", ""),
                 "controller": True, "blockOwnerDeletion": True})
    body: dict[str, Any] = {"metadata": {"ownerReferences": refs,
                                         "resourceVersion": _meta(workload).get("resourceVersion")}}
    labels = _dict(_meta(workload).get("labels"))
    if jw.JOB_UID_LABEL not in labels:  # Kueue's MergeKeepFirst: a label already there stays
        body["metadata"]["labels"] = {jw.JOB_UID_LABEL: str(meta.get("uid", ""))}
    return body
