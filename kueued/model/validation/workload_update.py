"""Workload: what may change on update, given the version in force (:mod:`.workload` has the rules'
sources): pod sets frozen while quota is reserved (a count may shrink under
``ElasticJobsViaWorkloadSlices``), the queue name, priority-class reference, reclaimable counts and
maximum execution time while it holds on, an admission that can be cleared but not edited.
Quantities compare by value, so ``"1000m"`` re-applied as ``"1"`` is no change."""

from __future__ import annotations

import copy
from typing import Any

from .admission_checks import frozen_pod_set_updates
from .fields import Errors, child, index, key
from .names import exact

__all__ = ["validate_update", "has_condition", "RESERVED"]

RESERVED = "while workload quota reserved"


def has_condition(obj: dict[str, Any] | None, kind: str) -> bool:
    """Whether ``status.conditions`` holds ``kind`` with status True (tolerant of bad shapes)."""
    status = obj.get("status") if isinstance(obj, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True" for c in conditions)


def validate_update(errs: Errors, new: dict[str, Any], old: dict[str, Any], *, scale_down: bool) -> None:
    """The rules an update to ``old`` (the version in force) must keep (:mod:`.workload`'s notes)."""
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    old_reserved, new_reserved = has_condition(old, "QuotaReserved"), has_condition(new, "QuotaReserved")
    if old_reserved:
        _frozen_pod_sets(errs, new_spec.get("podSets"), old_spec.get("podSets"), "spec.podSets", scale_down)
        _frozen_priority_class(errs, new_spec.get("priorityClassRef"), old_spec.get("priorityClassRef"))
    if old_reserved and new_reserved:
        before, after = old_spec.get("queueName"), new_spec.get("queueName")
        if before is not None and after is not None and before != after:
            errs.invalid("spec.queueName", after, f"queueName is immutable {RESERVED} (was \"{before}\")")
        _reclaimable_not_decreasing(errs, _dict(new.get("status")).get("reclaimablePods"),
                                    _dict(old.get("status")).get("reclaimablePods"))
    if has_condition(old, "Admitted") and has_condition(new, "Admitted"):
        before = old_spec.get("maximumExecutionTimeSeconds") or 0
        after = new_spec.get("maximumExecutionTimeSeconds") or 0
        if before != after:
            errs.invalid("spec.maximumExecutionTimeSeconds", after,
                         f"maximumExecutionTimeSeconds is immutable {RESERVED}")
    old_admission = _dict(old.get("status")).get("admission")
    new_admission = _dict(new.get("status")).get("admission")
    if old_admission is not None and new_admission is not None \
            and _canonical(new_admission) != _canonical(old_admission):
        errs.invalid("status.admission", new_admission, "field is immutable")
    frozen_pod_set_updates(errs, _dict(new.get("status")).get("admissionChecks"),
                            _dict(old.get("status")).get("admissionChecks"))


def _frozen_pod_sets(errs: Errors, new: object, old: object, path: str, scale_down: bool) -> None:
    new_sets = new if isinstance(new, list) else []
    old_sets = old if isinstance(old, list) else []
    if len(new_sets) != len(old_sets):
        errs.invalid(path, new_sets, "field is immutable")
        return
    for i, (after, before) in enumerate(zip(new_sets, old_sets, strict=True)):
        a, b = _canonical_pod_set(after), _canonical_pod_set(before)
        if scale_down and isinstance(a.get("count"), int) and isinstance(b.get("count"), int) \
                and a["count"] < b["count"]:
            a["count"] = b["count"]  # an elastic job may scale down while it holds quota (its gate on)
        if a != b:
            errs.invalid(index(path, i), after, "field is immutable")


def _frozen_priority_class(errs: Errors, new: object, old: object) -> None:
    path = "spec.priorityClassRef"
    if (new is None) != (old is None):
        errs.invalid(path, new, f"priorityClassRef is immutable {RESERVED}")
        return
    after, before = _dict(new), _dict(old)
    for field in ("group", "kind"):
        if after.get(field) != before.get(field):
            errs.invalid(child(path, field), after.get(field),
                         f"priorityClassRef.{field} is immutable {RESERVED}")
    if (after.get("group"), after.get("kind")) == ("scheduling.k8s.io", "PriorityClass") \
            and after.get("name") != before.get("name"):
        errs.invalid(child(path, "name"), after.get("name"), "priorityClassRef.name is immutable for "
                     f"scheduling.k8s.io/priorityclass {RESERVED}")


def _reclaimable_not_decreasing(errs: Errors, new: object, old: object) -> None:
    path = "status.reclaimablePods"
    before, after = _counts_by_name(old), _counts_by_name(new)
    for name, count in after.items():
        was = before.get(name)
        if isinstance(count, int) and isinstance(was, int) and count < was:
            errs.invalid(child(key(path, str(name)), "count"), count, f"cannot be less then {was}")
    for name in before:
        if name not in after:
            errs.required(key(path, str(name)), "cannot be removed")


def _counts_by_name(value: object) -> dict[str, object]:
    items = value if isinstance(value, list) else []
    return {r["name"]: r.get("count")
            for r in items if isinstance(r, dict) and isinstance(r.get("name"), str)}


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _canonical_pod_set(value: object) -> dict[str, Any]:
    ps = _canonical(value)
    if not isinstance(ps, dict):
        return {"": ps}
    ps.setdefault("name", "main")
    ps.setdefault("count", 1)
    return ps


_QUANTITY_MAPS = frozenset({"requests", "limits", "resourceUsage", "overhead"})


def _canonical(value: Any, parent: str = "") -> Any:
    """A deep copy where resource amounts are exact numbers, so "1000m" equals "1"."""
    if isinstance(value, dict):
        if parent in _QUANTITY_MAPS:
            return {k: _amount(v) for k, v in value.items()}
        return {k: _canonical(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v, parent) for v in value]
    return copy.deepcopy(value)


def _amount(value: object) -> object:
    try:
        return exact(value)
    except (ValueError, ArithmeticError):
        return value
