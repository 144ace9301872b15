"""A core/v1 LimitRange, as the API server validates it (``ValidateLimitRange``), the rules that
matter to kueued: each item has a type (``Pod``, ``Container``, ``PersistentVolumeClaim`` or a
qualified name) that appears once, its amounts are quantities, ``min <= defaultRequest <=
default <= max`` per resource, and a Pod item has no defaults."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kueued.errors import FieldError

from .fields import Errors, child, index, key, mapping, sequence, string
from .meta import check_metadata
from .names import quantity

__all__ = ["validate_limit_range"]

_STANDARD = ("Pod", "Container", "PersistentVolumeClaim")
_AMOUNTS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
_ORDER = (("min", "defaultRequest"), ("defaultRequest", "default"), ("default", "max"), ("min", "max"))


def validate_limit_range(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs = Errors()
    check_metadata(errs, obj, namespaced=True)
    spec = mapping(errs, obj.get("spec"), "spec")
    path = "spec.limits"
    seen: set[str] = set()
    for i, raw in enumerate(sequence(errs, spec.get("limits"), path)):
        p = index(path, i)
        item = mapping(errs, raw, p)
        kind = string(errs, item.get("type"), child(p, "type"))
        if not kind:
            errs.required(child(p, "type"))
        elif kind not in _STANDARD and "/" not in kind:
            errs.invalid(child(p, "type"), kind, "must be a standard limit type or fully qualified")
        elif kind in seen:
            errs.duplicate(child(p, "type"), kind)
        if kind:
            seen.add(kind)
        amounts: dict[str, dict[str, Fraction]] = {}
        for field in _AMOUNTS:
            values = mapping(errs, item.get(field), child(p, field))
            amounts[field] = {r: v for r, q in values.items()
                              if (v := quantity(errs, q, key(child(p, field), r), non_negative=True)) is not None}
        if kind == "Pod":
            for field in ("default", "defaultRequest"):
                if amounts[field]:
                    errs.forbidden(child(p, field), "may not be specified when `type` is 'Pod'")
        for low, high in _ORDER:
            for r, v in amounts[low].items():
                bound = amounts[high].get(r)
                if bound is not None and v > bound:
                    errs.invalid(key(child(p, low), r), item[low][r],
                                 f"{low} value {item[low][r]} is greater than {high} value {item[high][r]}")
    return errs.items
