"""WorkloadPriorityClass: a name, an int32 ``value`` and an optional description.

Changing ``value`` later is allowed (it only affects workloads created afterwards), so
there is no update rule.
"""

from __future__ import annotations

from typing import Any

from kueued.errors import FieldError

from .fields import Errors, integer, string
from .meta import check_metadata

__all__ = ["validate_workload_priority_class"]


def validate_workload_priority_class(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs = Errors()
    check_metadata(errs, obj)
    if obj.get("value") is None:
        errs.required("value")
    integer(errs, obj.get("value"), "value")
    string(errs, obj.get("description"), "description", max_length=2048)
    return errs.items
