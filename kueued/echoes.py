"""What the scheduler reads of an object, so the echo of kueued's own writes changes nothing.

Most events a daemon sees are the API server's echo of a status kueued wrote itself (a
Workload's condition messages, a queue's counts, a finalizer, an ElasticQuota's status
annotations).  :func:`same_to_the_scheduler` tells ``World.apply`` when a new version differs
from the one held only there, so it is stored without being validated and decoded again; a
status field Kueue's webhook checks on update (and kueued never writes) still goes through
validation.  :func:`older` spots a late echo of a version kueued has since written over.
"""

from __future__ import annotations

from typing import Any

__all__ = ["same_to_the_scheduler", "older"]

_META_READ = ("uid", "labels", "annotations", "creationTimestamp", "deletionTimestamp", "name", "namespace")
_CONDITIONS_READ = frozenset({"Finished", "Evicted", "Preempted"})


_OWN_ANNOTATIONS = frozenset({"quota.scheduling.koordinator.sh/request", "quota.scheduling.koordinator.sh/runtime"})
"""What kueued writes on an ElasticQuota's metadata (Koordinator's status annotations)."""


def same_to_the_scheduler(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether ``new`` differs from ``old`` only where the scheduler does not look: the status it
    writes itself (a Workload's condition messages, a queue's counts), resourceVersion,
    managedFields, finalizers, an ElasticQuota's request/runtime annotations (the echo of kueued's
    writes).  A Node's allocatable is read although it is status: the kubelet changes it there."""
    if old.get("kind") != "Workload":
        return _without_own_writes(old) == _without_own_writes(new)
    if old.get("spec") != new.get("spec") or old.get("apiVersion") != new.get("apiVersion"):
        return False
    old_meta, new_meta = old.get("metadata"), new.get("metadata")
    if not isinstance(old_meta, dict) or not isinstance(new_meta, dict):
        return False
    if any(old_meta.get(f) != new_meta.get(f) for f in _META_READ):
        return False
    old_status, new_status = old.get("status"), new.get("status")
    old_status = old_status if isinstance(old_status, dict) else {}
    new_status = new_status if isinstance(new_status, dict) else {}
    return (old_status.get("admission") == new_status.get("admission")
            and _read_conditions(old_status) == _read_conditions(new_status)
            # not read by the scheduler, but validated on update (Kueue's webhook): kueued never writes them
            and all(old_status.get(f) == new_status.get(f) for f in _STATUS_VALIDATED)
            and not (new_status.get("admission") is None and _quota_reserved(new_status)))


_STATUS_VALIDATED = ("reclaimablePods", "admissionChecks")


def _quota_reserved(status: dict[str, Any]) -> bool:
    conditions = status.get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conditions)


def older(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether ``new`` is an older version of the object than ``old`` (etcd revisions; opaque ones never are)."""
    a = new["metadata"].get("resourceVersion") if isinstance(new.get("metadata"), dict) else None
    b = old["metadata"].get("resourceVersion") if isinstance(old.get("metadata"), dict) else None
    return isinstance(a, str) and isinstance(b, str) and a.isdigit() and b.isdigit() and int(a) < int(b)


def _without_own_writes(manifest: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in manifest.items() if k != "status"}
    if manifest.get("kind") == "Node":  # kueued writes no Node status, and reads its allocatable
        status = manifest.get("status")
        out["allocatable"] = status.get("allocatable") if isinstance(status, dict) else None
    meta = manifest.get("metadata")
    if isinstance(meta, dict):
        # finalizers: kueued's own (kueued.kube.finalizers) and others'; read from ``raw`` when deleted
        meta = {k: v for k, v in meta.items() if k not in ("resourceVersion", "managedFields", "finalizers")}
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and _OWN_ANNOTATIONS & annotations.keys():
            meta["annotations"] = {k: v for k, v in annotations.items() if k not in _OWN_ANNOTATIONS}
        out["metadata"] = meta
    return out


def _read_conditions(status: dict[str, Any]) -> set[tuple[Any, ...]] | None:
    """The conditions the scheduler reads: Finished, and Evicted and Preempted with their reason
    and time (the queue order time of a workload evicted for PodsReadyTimeout or by an admission
    check, or reclaimed while borrowing: :func:`kueued.scheduling.workload.queue_order_time`)."""
    conditions = status.get("conditions")
    if conditions is None:
        return set()
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        return None
    return {(c.get("type"), c.get("status"), c.get("reason"), c.get("lastTransitionTime"))
            for c in conditions if c.get("type") in _CONDITIONS_READ}
