"""kueued's own annotation on Cohorts and ClusterQueues: the KEP-1093 admission policy.

Kueue's API has no field for a per-node queue policy, so kueued reads it from the
annotation ``kueued.io/admission-policy`` (see ``kueued.scheduling.policies`` for what
each value does).  The API server would accept any string there; kueued plays the
webhook for its own annotation and refuses a value it would not understand, so a typo
(``fiar``) is reported instead of silently meaning ``fifo``.  An absent annotation is
``fifo``, Kueue's behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueued.errors import FieldError

from .fields import Errors, enum, key

__all__ = ["ADMISSION_POLICY", "POLICIES", "FIFO", "FAIR", "CAPACITY", "check_admission_policy"]

ADMISSION_POLICY = "kueued.io/admission-policy"
FIFO, FAIR, CAPACITY = "fifo", "fair", "capacity"
POLICIES = (FIFO, FAIR, CAPACITY)


def check_admission_policy(obj: dict[str, Any]) -> list[FieldError]:
    """The annotation's value must be one of :data:`POLICIES` (metadata's grammar is checked elsewhere)."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping) or not isinstance(annotations.get(ADMISSION_POLICY), str):
        return []  # absent; a value of the wrong type is metadata's error already
    errs = Errors()
    enum(errs, annotations[ADMISSION_POLICY], key("metadata.annotations", ADMISSION_POLICY), POLICIES)
    return errs.items
