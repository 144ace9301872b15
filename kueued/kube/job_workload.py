"""What a batch/v1 Job and its Workload should be: the pure half of the Job integration.

:mod:`kueued.kube.jobs` watches and writes; everything it decides is decided here, on plain
manifests, without I/O, so a test can check each rule by calling a function.  The rules
are Kueue's (``pkg/controller/jobframework/reconciler.go``, ``pkg/controller/jobs/job``):

- **The Workload** of a Job is named ``job-<name>-<hash>`` (Kueue's
  ``GetWorkloadNameForOwnerWithGVK``: the first five hex digits of the SHA-1 of
  ``Job\\nbatch\\n<name>\\n<uid>``), lives in the Job's namespace, is controlled by the Job
  (ownerReference with ``controller`` and ``blockOwnerDeletion``), carries the label
  ``kueue.x-k8s.io/job-uid``, takes ``spec.queueName`` from the Job's
  ``kueue.x-k8s.io/queue-name`` label (v1beta2 reads the label only) and has one pod set,
  ``main``: the Job's pod template without the labels the Job API manages, ``count`` the
  pods that run at once (``parallelism``, default 1, or ``completions`` if fewer) and, when the
  Job carries :data:`MIN_PARALLELISM_ANNOTATION` below that count, ``minCount`` (Kueue's partial
  admission: the scheduler may admit fewer pods).  Its priority is resolved by the caller
  (:class:`Priority`); the label ``kueue.x-k8s.io/max-exec-time-seconds`` becomes its
  ``maximumExecutionTimeSeconds``.
- **Partial admission**: a Job admitted with fewer pods starts with ``parallelism`` (and, with
  :data:`SYNC_COMPLETIONS_ANNOTATION` true as Go's ``ParseBool`` reads it, ``completions``) set to
  the admitted count, its own values kept in :data:`ORIGINAL_ANNOTATION` (completions only for an Indexed Job, the only
  kind whose completions the API server lets change) and given back when it stops (Kueue's
  ``RunWithPodSetsInfo`` / ``RestorePodSetsInfo``).  While admitted, the Job matches its Workload
  when it asks for the admitted count (or, suspended, for the Workload's own count).
- **Starting** merges the assigned flavors' ``nodeLabels`` into the template's
  ``nodeSelector`` and appends their ``tolerations``, keeps what the template had in the
  annotation :data:`ORIGINAL_ANNOTATION` and sets ``suspend: false``, in one merge patch
  conditional on the Job's resourceVersion: the API server lets a Job's scheduling
  directives change only while the *old* Job is suspended and has no ``status.startTime``
  (a Job suspended after a run has it cleared first).
- **Stopping** is three writes, because the same rule forbids touching the template of a
  running Job: ``suspend: true``; then, if the job controller stamped ``status.startTime``,
  clearing it (as Kueue's ``Job.Stop`` does); then the template restored from the
  annotation (or, without one, from the Workload's own copy of the template), the
  annotation removed.  A suspended Job that still carries the annotation and has nothing to
  start is a stop not yet finished, so a restart finishes it.
- Every manifest field is read defensively (:func:`_dict`, :func:`_list`): a malformed
  object yields a step the API server will refuse, or none, never an exception.

:func:`decide` is the reconciler's step function: given the Job and the Workloads it owns,
the one next write (a :class:`Step`), or :class:`Done`.  Applied and decided again until
:class:`Done`, it converges; applied twice it changes nothing the second time.  The merge
patches those steps write to the Job (starting and stopping, above) are built by
:mod:`kueued.kube.job_patches`, pure too.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, NamedTuple

import msgspec

from kueued.kube.workload_state import (
    _dict,
    _list,
    _meta,
    condition_true,
    has_reservation,
    is_admitted,
    is_evicted,
    owner_uid,
)
from kueued.model.api import IN_USE_FINALIZER

__all__ = [
    "QUEUE_LABEL", "PRIORITY_CLASS_LABEL", "JOB_UID_LABEL", "ORIGINAL_ANNOTATION", "POD_SET", "MANAGED_LABELS",
    "FAILED_TO_START", "Priority", "Step", "Done", "Wait", "CreateWorkload", "DeleteWorkloads",
    "UpdatePodSets", "MoveQueue", "Suspend", "ResetStartTime", "Restore", "Start", "Finish", "Release",
    "workload_name", "queue_name", "job_finished", "pod_count", "pod_sets", "build_workload", "equivalent",
    "MIN_PARALLELISM_ANNOTATION", "SYNC_COMPLETIONS_ANNOTATION", "min_parallelism", "admitted_count",
    "sync_completions",
    "condition_true", "has_reservation", "is_admitted", "is_evicted", "owner_uid", "decide",
]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
"""A Job's maximum execution time: its Workload's ``maximumExecutionTimeSeconds`` (``actors.deadlines``)."""
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
ORIGINAL_ANNOTATION = "kueued.io/original-pod-sets-info"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
SYNC_COMPLETIONS_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
"""On a started Job: its pod sets' scheduling directives before the flavors' were merged in,
as Kueue's PodSetInfo (``[{"name": "main", "nodeSelector": {...}, "tolerations": [...]}]``).
Kueue v1beta1 kept only node selectors (``kueue.x-k8s.io/original-node-selectors``, removed
in v1beta2, which restores from the Workload's template); kueued keeps both, on the Job."""
POD_SET = "main"
MANAGED_LABELS = ("job-name", "controller-uid", "batch.kubernetes.io/job-name", "batch.kubernetes.io/controller-uid")
"""Template labels the Job API adds and owns (Kueue's ``ManagedLabels``): not copied to the Workload."""

FAILED_TO_START = "FailedToStart"
_HASH_LENGTH = 5
_MAX_PREFIX = 253 - 1 - _HASH_LENGTH


class Priority(NamedTuple):
    value: int
    ref: dict[str, str] | None = None  # spec.priorityClassRef, when a class gave the value


# ---- steps ------------------------------------------------------------------------------------

class Step(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """One write the reconciler should make next; ``why`` is for the log."""

    why: str = ""


class Done(Step, frozen=True, tag=True):
    """Nothing to write: the Job and its Workload agree."""


class Wait(Step, frozen=True, tag=True):
    """Nothing to write until something else changes (the Job's pods have not stopped yet)."""


class CreateWorkload(Step, frozen=True, tag=True):
    pass


class DeleteWorkloads(Step, frozen=True, tag=True):
    names: tuple[str, ...] = ()


class UpdatePodSets(Step, frozen=True, tag=True):
    workload: str = ""


class MoveQueue(Step, frozen=True, tag=True):
    workload: str = ""
    queue: str = ""


class Suspend(Step, frozen=True, tag=True):
    message: str = ""  # the Stopped Event's, as Kueue's job reconciler words it (``stopJob``)


class ResetStartTime(Step, frozen=True, tag=True):
    pass


class Restore(Step, frozen=True, tag=True):
    workload: str = ""  # whose template to restore from when the Job has no annotation


class Start(Step, frozen=True, tag=True):
    workload: str = ""


class Finish(Step, frozen=True, tag=True):
    workload: str = ""
    reason: str = ""
    message: str = ""


class Release(Step, frozen=True, tag=True):
    """Take Kueue's finalizer off a deleted Workload once its Job is stopped (Kueue's reconciler)."""

    workload: str = ""


# ---- reading manifests --------------------------------------------------------------------------

def _template_spec(job: dict[str, Any]) -> dict[str, Any]:
    return _dict(_dict(_dict(job.get("spec")).get("template")).get("spec"))


def workload_name(job_name: str, job_uid: str) -> str:
    """Kueue's ``GetWorkloadNameForOwnerWithGVK`` for batch/v1 Job."""
    digest = hashlib.sha1(f"Job\nbatch\n{job_name}\n{job_uid}".encode()).hexdigest()
    return f"{f'job-{job_name}'[:_MAX_PREFIX]}-{digest[:_HASH_LENGTH]}"


def queue_name(job: dict[str, Any]) -> str:
    value = _dict(_meta(job).get("labels")).get(QUEUE_LABEL)
    return value if isinstance(value, str) else ""


def max_execution_seconds(job: dict[str, Any]) -> int | None:
    """The Job's :data:`MAX_EXEC_LABEL` as a positive int32, else None (Kueue's
    ``MaximumExecutionTimeSeconds``: a value that does not parse, or is not positive, is no limit)."""
    value = _dict(_meta(job).get("labels")).get(MAX_EXEC_LABEL)
    if not isinstance(value, str) or not value.lstrip("+-").isdigit():
        return None  # Go's ParseInt: an optional sign, then digits only
    seconds = int(value)
    return seconds if 0 < seconds < 2**31 else None


def suspended(job: dict[str, Any]) -> bool:
    return _dict(job.get("spec")).get("suspend") is True


def job_finished(job: dict[str, Any]) -> tuple[bool, bool, str]:
    """(finished, succeeded, message): a ``Complete`` or ``Failed`` condition that is True (Kueue's ``Finished``)."""
    for cond in _list(_dict(job.get("status")).get("conditions")):
        cond = _dict(cond)
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True, cond.get("type") == "Complete", str(cond.get("message") or "")
    return False, False, ""


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def pod_count(job: dict[str, Any]) -> int:
    """Pods that run at once: parallelism (default 1), or completions when fewer (Kueue's ``podsCount``)."""
    spec = _dict(job.get("spec"))
    count = max(0, _int(spec.get("parallelism"), 1))
    completions = spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool) and 0 <= completions < count:
        count = completions
    return count


def min_parallelism(job: dict[str, Any]) -> int | None:
    """Kueue's ``minPodsCount``: the annotation's whole number, when it is one and at least 1."""
    raw = _dict(_meta(job).get("annotations")).get(MIN_PARALLELISM_ANNOTATION)
    try:
        value = int(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if value is not None and value >= 1 else None


def sync_completions(job: dict[str, Any]) -> bool:
    """Kueue's ``syncCompletionWithParallelism``: an Indexed Job whose annotation asks for it (the API
    server lets ``completions`` change only with ``parallelism``, and only for an Indexed Job)."""
    value = _dict(_meta(job).get("annotations")).get(SYNC_COMPLETIONS_ANNOTATION)
    return _dict(job.get("spec")).get("completionMode") == "Indexed" and value in _GO_TRUE


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
"""What Go's ``strconv.ParseBool`` reads as true (Kueue parses the annotation with it)."""


def pod_sets(job: dict[str, Any]) -> list[dict[str, Any]]:
    template = copy.deepcopy(_dict(_dict(job.get("spec")).get("template")))
    labels = _dict(_dict(template.get("metadata")).get("labels"))
    for label in MANAGED_LABELS:
        labels.pop(label, None)
    ps: dict[str, Any] = {"name": POD_SET, "count": pod_count(job), "template": template}
    minimum = min_parallelism(job)
    if minimum is not None and minimum < ps["count"]:
        ps["minCount"] = minimum
    return [ps]


def build_workload(job: dict[str, Any], *, priority: Priority) -> dict[str, Any]:
    """The Workload that stands for ``job`` (see the module docstring)."""
    meta = _meta(job)
    name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    spec: dict[str, Any] = {"queueName": queue_name(job), "podSets": pod_sets(job), "priority": priority.value}
    if priority.ref is not None:
        spec["priorityClassRef"] = dict(priority.ref)
    limit = max_execution_seconds(job)
    if limit is not None:
        spec["maximumExecutionTimeSeconds"] = limit
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {
            "name": workload_name(name, uid), "namespace": meta.get("namespace", ""),
            "labels": {JOB_UID_LABEL: uid},
            "finalizers": [IN_USE_FINALIZER],  # as Kueue's: taken off once finished, or deleted and stopped
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }


def _shape(count: Any, template: dict[str, Any]) -> tuple[Any, ...]:
    """What a pod set asks of the quota: its count and every container's resources."""
    spec = _dict(template.get("spec"))

    def containers(field: str) -> list[tuple[Any, Any]]:
        return [(_dict(c).get("name"), _dict(c).get("resources") or {}) for c in _list(spec.get(field))]

    return (count, containers("containers"), containers("initContainers"), spec.get("resources") or {},
            spec.get("overhead") or {})


def equivalent(job: dict[str, Any], workload: dict[str, Any]) -> bool:
    """Whether ``workload`` still asks for what ``job`` needs (Kueue's ``EquivalentToWorkload``, on
    resources): while it holds quota, the Job must ask for the pods admitted (fewer than the
    Workload's with partial admission), or, suspended, for the Workload's own count."""
    ours = _list(_dict(workload.get("spec")).get("podSets"))
    if len(ours) != 1 or _dict(workload.get("spec")).get("maximumExecutionTimeSeconds") != max_execution_seconds(job):
        return False  # Kueue's EquivalentToWorkload compares the time limit too
    (wanted,) = pod_sets(job)
    have = _dict(ours[0])
    template = _dict(have.get("template"))
    job_shape = _shape(wanted["count"], wanted["template"])
    spec_shape = _shape(_int(have.get("count"), 1), template)
    admitted = admitted_count(workload) if has_reservation(workload) else None
    if admitted is None:
        return job_shape == spec_shape
    return job_shape == _shape(admitted, template) or (suspended(job) and job_shape == spec_shape)


def admitted_count(workload: dict[str, Any]) -> int | None:
    """The pods its admission reserved quota for (its pod set's count when the admission says none)."""
    for psa in _list(_dict(_dict(workload.get("status")).get("admission")).get("podSetAssignments")):
        psa = _dict(psa)
        if psa.get("name", POD_SET) == POD_SET:
            count = psa.get("count")
            if isinstance(count, int) and not isinstance(count, bool):
                return count
    for ps in _list(_dict(workload.get("spec")).get("podSets")):
        if _dict(ps).get("name", POD_SET) == POD_SET:
            return _int(_dict(ps).get("count"), 1)
    return None


# ---- the step function ------------------------------------------------------------------------

def decide(job: dict[str, Any], workloads: list[dict[str, Any]]) -> Step:
    """The next write for a managed ``job`` whose Workloads (controlled by this Job's uid) are ``workloads``.

    Kueue's ``ReconcileGenericJob`` order: a finished Job finishes its Workload; one Workload
    per Job; a Workload that no longer matches is updated (pending) or replaced; an eviction, a
    lost admission or the Workload's deletion stops the Job (a deleted one then loses Kueue's
    finalizer); an admission starts it; a queue label change moves a pending Workload.
    """
    meta = _meta(job)
    expected = workload_name(str(meta.get("name", "")), str(meta.get("uid", "")))
    ordered = sorted(workloads, key=lambda w: (_meta(w).get("name") != expected, str(_meta(w).get("name", ""))))
    match = ordered[0] if ordered else None
    finished, succeeded, message = job_finished(job)
    if finished:
        if match is not None and not condition_true(match, "Finished"):
            return Finish(workload=_name(match), reason="Succeeded" if succeeded else "Failed", message=message,
                          why="job finished")
        if match is not None and _held(match):  # Kueue takes its finalizer off a finished Workload
            return Release(workload=_name(match), why="workload finished")
        return Done(why="job finished")
    if len(ordered) > 1:
        return DeleteWorkloads(names=tuple(_name(w) for w in ordered[1:]), why="more than one workload")
    if match is not None and condition_true(match, "Finished"):
        return Release(workload=_name(match), why="workload finished") if _held(match) \
            else Done(why="workload finished")
    deleting = match is not None and bool(_meta(match).get("deletionTimestamp"))
    startable = (match is not None and not deleting and equivalent(job, match) and is_admitted(match)
                 and not is_evicted(match))
    annotated = ORIGINAL_ANNOTATION in _dict(meta.get("annotations"))
    running = not suspended(job)
    if running and not startable:
        return _suspend(match, deleting, equivalent(job, match) if match is not None else False)
    if not running and annotated and not startable:  # a stop to finish: the template still has the flavors'
        if _dict(job.get("status")).get("startTime"):
            return ResetStartTime(why="restore the template")
        return Restore(workload=_name(match) if match is not None else "", why="stopped")
    if deleting:  # stopped: Kueue's finalizer (a Workload made under Kueue) holds it no longer
        assert match is not None
        if IN_USE_FINALIZER in _list(_meta(match).get("finalizers")):
            return Release(workload=_name(match), why="workload deleted")
        return Wait(why="workload being deleted")
    if match is None:
        if _int(_dict(job.get("status")).get("active"), 0) > 0:
            return Wait(why="pods still active")
        return CreateWorkload(why="no workload")
    if not equivalent(job, match):
        if has_reservation(match):
            return DeleteWorkloads(names=(_name(match),), why="workload changed while holding quota")
        return UpdatePodSets(workload=_name(match), why="job changed while pending")
    if running:
        return Done(why="running and admitted")
    if startable:
        if _dict(job.get("status")).get("startTime"):  # suspended by someone else after a run: same rule
            return ResetStartTime(why="start with the flavors' scheduling directives")
        return Start(workload=_name(match), why="admitted")
    queue = queue_name(job)
    if _dict(match.get("spec")).get("queueName") != queue and not has_reservation(match):
        return MoveQueue(workload=_name(match), queue=queue, why="queue label changed")
    return Done(why="waiting for admission")


def _held(workload: dict[str, Any]) -> bool:
    """Kueue's resource-in-use finalizer is on the Workload."""
    return IN_USE_FINALIZER in _list(_meta(workload).get("finalizers"))


def _suspend(match: dict[str, Any] | None, deleting: bool, matches: bool) -> Suspend:
    """Stop a running Job that may not run, with why (logs) and Kueue's ``Stopped`` Event message."""
    if match is None:
        return Suspend(why="no workload", message="Missing Workload; unable to restore pod templates")
    if deleting:
        return Suspend(why="workload deleted", message="Workload is deleted")
    if is_evicted(match):
        evicted = [_dict(c) for c in _list(_dict(match.get("status")).get("conditions"))
                   if _dict(c).get("type") == "Evicted"]
        return Suspend(why="workload evicted", message=str(evicted[0].get("message") or "") if evicted else "")
    if not matches:
        return Suspend(why="workload changed",
                       message="No matching Workload; restoring pod templates according to existent Workload")
    return Suspend(why="workload not admitted", message="Not admitted by cluster queue")


def _name(obj: dict[str, Any]) -> str:
    return str(_meta(obj).get("name", ""))

