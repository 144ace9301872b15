"""The merge patches that start and stop a batch/v1 Job: the flavors' scheduling directives
injected into its pod template, and taken out again.

Pure, like :mod:`kueued.kube.job_workload`, whose :func:`~kueued.kube.job_workload.decide`
says which one to write next; :mod:`kueued.kube.jobs` writes them.  Every patch is
conditional on the Job's resourceVersion.

- **Start** (:func:`start_patch`): the assigned ResourceFlavors' ``nodeLabels`` merged into
  the template's ``nodeSelector`` and their ``tolerations`` appended, what the template had
  kept in the annotation :data:`~kueued.kube.job_workload.ORIGINAL_ANNOTATION` (Kueue's
  PodSetInfo), and ``suspend: false``.  A flavor's node label that contradicts the template's
  selector is :class:`FlavorConflict`, a permanent start error.  The template also gets
  Kueue's pod labels: ``kueue.x-k8s.io/podset`` (the pod set's name), and, as Kueue's
  AssignQueueLabelsForPods gate (on by default) adds them, ``kueue.x-k8s.io/local-queue-name``
  and ``kueue.x-k8s.io/cluster-queue-name`` (the latter only when the name is a valid label
  value), so per-queue usage can be read off the pods.  The values they replace are kept in the
  annotation too, and put back on stop.
- **Stop**: :func:`suspend_patch`, then :func:`reset_start_time_patch` if the job controller
  stamped ``status.startTime``, then :func:`restore_patch`, which gives the template its own
  directives back (:func:`original_info`: from the annotation, else from the Workload's copy
  of the template) and drops the annotation.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kueued.kube.job_workload import (
    ORIGINAL_ANNOTATION,
    POD_SET,
    _dict,
    _list,
    _meta,
    _name,
    _template_spec,
    min_parallelism,
    sync_completions,
)
from kueued.model.json_text import read_json

__all__ = ["FlavorConflict", "start_patch", "suspend_patch", "reset_start_time_patch", "restore_patch",
           "original_info", "pod_labels", "PODSET_LABEL", "LOCAL_QUEUE_LABEL", "CLUSTER_QUEUE_LABEL"]

PODSET_LABEL = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
_POD_LABELS = (PODSET_LABEL, LOCAL_QUEUE_LABEL, CLUSTER_QUEUE_LABEL)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def pod_labels(local_queue: str, cluster_queue: str) -> dict[str, str]:
    """The labels a started Job's pods carry (Kueue's PodSetLabel and queue labels)."""
    labels = {PODSET_LABEL: POD_SET}
    for key, value in ((LOCAL_QUEUE_LABEL, local_queue), (CLUSTER_QUEUE_LABEL, cluster_queue)):
        if value and len(value) <= 63 and _LABEL_VALUE.match(value):
            labels[key] = value
    return labels


class FlavorConflict(ValueError):
    """A flavor's node label contradicts the template's nodeSelector (Kueue: a permanent start error)."""


def _precondition(job: dict[str, Any]) -> dict[str, Any]:
    rv = _meta(job).get("resourceVersion")
    return {"resourceVersion": rv} if rv else {}


def _map_patch(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any] | None:
    """A merge patch turning map ``current`` into ``desired`` (None removes the field)."""
    if not desired:
        return None
    return {**dict.fromkeys(k for k in current if k not in desired), **desired}


def original_info(job: dict[str, Any], workload: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The template's own ``nodeSelector`` and ``tolerations`` (and, for a Job started with fewer
    pods, its own ``parallelism`` and ``completions``): from the annotation, else the Workload's copy."""
    raw = _dict(_meta(job).get("annotations")).get(ORIGINAL_ANNOTATION)
    if isinstance(raw, str):
        try:
            infos = read_json(raw)
        except ValueError:
            infos = None
        for info in _list(infos):
            info = _dict(info)
            if info.get("name", POD_SET) == POD_SET:  # what it holds is checked: a hand-edited one must not
                kept: dict[str, Any] = {  # make a patch the API server refuses for ever
                    k: info[k] for k in ("parallelism", "completions")
                    if isinstance(info.get(k), int) and not isinstance(info[k], bool) and info[k] >= 0}
                labels = info.get("labels")
                if isinstance(labels, dict) and all(isinstance(v, str | None) for v in labels.values()):
                    kept["labels"] = labels
                selector = {k: v for k, v in _dict(info.get("nodeSelector")).items() if isinstance(v, str)}
                tolerations = [t for t in _list(info.get("tolerations")) if isinstance(t, dict)]
                return {"nodeSelector": selector, "tolerations": tolerations, **kept}
    if workload is not None:
        for ps in _list(_dict(workload.get("spec")).get("podSets")):
            if _dict(ps).get("name", POD_SET) == POD_SET:
                spec = _dict(_dict(_dict(ps).get("template")).get("spec"))
                info = {"nodeSelector": _dict(spec.get("nodeSelector")), "tolerations": _list(spec.get("tolerations"))}
                own = _dict(_dict(_dict(_dict(ps).get("template")).get("metadata")).get("labels"))
                info["labels"] = {k: own.get(k) for k in _POD_LABELS}  # whatever start added goes
                if min_parallelism(job) is not None:  # RestorePodSetsInfo: the Workload's count
                    info["parallelism"] = _dict(ps).get("count")
                return info
    return None


def start_patch(job: dict[str, Any], flavors: list[dict[str, Any]], count: int | None = None,
                labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Unsuspend ``job`` with the ``flavors``' (ResourceFlavor manifests) node labels and tolerations;
    ``count``: the pods admitted, which a Job asking for fewer (partial admission) runs at once;
    ``labels``: the pod labels to add (:func:`pod_labels`).

    The original comes from the annotation if the Job already carries one (a stop not yet
    finished), so a second start never mistakes injected values for the user's.
    """
    spec = _template_spec(job)
    original = original_info(job) or {"nodeSelector": _dict(spec.get("nodeSelector")),
                                      "tolerations": _list(spec.get("tolerations"))}
    selector = dict(original["nodeSelector"])
    tolerations = list(original["tolerations"])
    for flavor in flavors:
        fspec = _dict(flavor.get("spec"))
        for key, value in _dict(fspec.get("nodeLabels")).items():
            if selector.get(key, value) != value:
                raise FlavorConflict(f"flavor {_name(flavor)} needs node label {key}={value}, "
                                     f"the pod template selects {key}={selector[key]}")
            selector[key] = value
        for toleration in _list(fspec.get("tolerations")):
            if toleration not in tolerations:
                tolerations.append(toleration)
    kept: dict[str, Any] = {"name": POD_SET, "nodeSelector": original["nodeSelector"],
                            "tolerations": original["tolerations"]}
    body: dict[str, Any] = {"suspend": False, "template": {"spec": {
        "nodeSelector": _map_patch(_dict(spec.get("nodeSelector")), selector),
        "tolerations": tolerations or None}}}
    if labels:
        own = _dict(_dict(_dict(_dict(job.get("spec")).get("template")).get("metadata")).get("labels"))
        kept["labels"] = original.get("labels") or {k: own.get(k) for k in labels}
        body["template"]["metadata"] = {"labels": dict(labels)}
    if count is not None and min_parallelism(job) is not None:  # Kueue's RunWithPodSetsInfo
        job_spec = _dict(job.get("spec"))
        for field in ("parallelism", "completions") if sync_completions(job) else ("parallelism",):
            kept[field] = original[field] if field in original else job_spec.get(field)
        body["parallelism"] = count
        if sync_completions(job):
            body["completions"] = count
    return {
        "metadata": {**_precondition(job),
                     "annotations": {ORIGINAL_ANNOTATION: json.dumps([kept], sort_keys=True, separators=(",", ":"))}},
        "spec": body,
    }


def suspend_patch(job: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": _precondition(job), "spec": {"suspend": True}}


def reset_start_time_patch(job: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": _precondition(job), "status": {"startTime": None}}


def restore_patch(job: dict[str, Any], workload: dict[str, Any] | None) -> dict[str, Any]:
    """Give a stopped ``job`` its template's own scheduling directives back and drop the annotation."""
    body: dict[str, Any] = {"metadata": {**_precondition(job), "annotations": {ORIGINAL_ANNOTATION: None}}}
    original = original_info(job, workload)
    if original is not None:
        spec = _template_spec(job)
        body["spec"] = {"template": {"spec": {
            "nodeSelector": _map_patch(_dict(spec.get("nodeSelector")), original["nodeSelector"]),
            "tolerations": original["tolerations"] or None}}}
        if isinstance(original.get("labels"), dict):  # the pod labels start added: their own values again
            body["spec"]["template"]["metadata"] = {"labels": original["labels"]}
        for field in ("parallelism", "completions"):  # a Job started with fewer pods asks for all again
            if field in original:
                body["spec"][field] = original[field]
    return body
