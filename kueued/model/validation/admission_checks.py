"""A Workload's admission checks (``status.admissionChecks``): the CRD's rules, Kueue's webhook
rules on their ``podSetUpdates`` (``validatePodSetUpdates``), and on update a check that is
``Ready`` in both versions keeps its ``podSetUpdates`` (``validateImmutablePodSetUpdates``)."""

from __future__ import annotations

from typing import Any

from .fields import Errors, child, enum, index, list_map_name, mapping, sequence, string
from .names import DNS1123_LABEL, annotation_map, date_time, labels, reference
from .resourceflavor import check_tolerations

__all__ = ["admission_checks", "frozen_pod_set_updates", "MAX_ADMISSION_CHECKS"]

MAX_ADMISSION_CHECKS = 8
"""``MaxItems`` on status.admissionChecks and on each check's podSetUpdates."""

_CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")


def admission_checks(errs: Errors, value: object, path: str, counts: dict[str, int]) -> None:
    """Admission check states: the CRD's list-map and fields, then the webhook's podSetUpdates."""
    seen: set[str] = set()
    for i, raw in enumerate(sequence(errs, value, path, max_items=MAX_ADMISSION_CHECKS)):
        p = index(path, i)
        check = mapping(errs, raw, p)
        list_map_name(errs, check, p, seen)
        if check.get("state") is None:
            errs.required(child(p, "state"))
        enum(errs, check.get("state"), child(p, "state"), _CHECK_STATES)
        date_time(errs, check.get("lastTransitionTime"), child(p, "lastTransitionTime"))
        string(errs, check.get("message"), child(p, "message"), max_length=32768)
        _pod_set_updates(errs, check.get("podSetUpdates"), child(p, "podSetUpdates"), counts)


def _pod_set_updates(errs: Errors, value: object, path: str, counts: dict[str, int]) -> None:
    """Kueue's ``validatePodSetUpdates``: each names a pod set and would make a valid pod."""
    for i, raw in enumerate(sequence(errs, value, path, max_items=MAX_ADMISSION_CHECKS)):
        p = index(path, i)
        update = mapping(errs, raw, p)
        if update.get("name") is None:
            errs.required(child(p, "name"))
        name = reference(errs, update.get("name"), child(p, "name"), max_length=63, pattern=DNS1123_LABEL)
        if name is not None and name not in counts:
            errs.not_supported(child(p, "name"), name, sorted(counts))
        check_tolerations(errs, update.get("tolerations"), child(p, "tolerations"))
        annotation_map(errs, update.get("annotations"), child(p, "annotations"))
        labels(errs, update.get("nodeSelector"), child(p, "nodeSelector"))
        labels(errs, update.get("labels"), child(p, "labels"))


def frozen_pod_set_updates(errs: Errors, new: object, old: object) -> None:
    """Kueue's ``validateImmutablePodSetUpdates``: a check Ready before and after keeps its updates.

    The path indexes the check in the new version (Kueue's indexes the old list; they differ
    only when checks were reordered)."""
    path = "status.admissionChecks"
    before = {c["name"]: c for c in (old if isinstance(old, list) else [])
              if isinstance(c, dict) and isinstance(c.get("name"), str)}
    for i, after in enumerate(new if isinstance(new, list) else []):
        prior = before.get(after.get("name")) if isinstance(after, dict) else None
        if prior is None or prior.get("state") != "Ready" or after.get("state") != "Ready":
            continue
        if _pruned(after.get("podSetUpdates")) != _pruned(prior.get("podSetUpdates")):
            errs.invalid(child(index(path, i), "podSetUpdates"), after.get("podSetUpdates"),
                         "field is immutable")


def _pruned(value: Any) -> Any:
    """The value with absent, null and empty fields dropped: Kubernetes' semantic equality
    takes a nil map or list for an empty one, and ``omitempty`` drops both on the wire."""
    if isinstance(value, dict):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None} or None
    if isinstance(value, list):
        return [_pruned(v) for v in value] or None
    return value
