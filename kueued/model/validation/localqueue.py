"""LocalQueue: the namespaced entry point that names its ClusterQueue, once and for all.

Kueue v1beta2 has no LocalQueue webhook left; the CRD carries the rules.
``spec.clusterQueue`` follows the object-name pattern and is immutable (CEL
``self == oldSelf``, a transition rule, so it binds only when the old object had one):
re-pointing a LocalQueue would strand the workloads already queued through it.
"""

from __future__ import annotations

from typing import Any

from kueued.errors import FieldError

from .clusterqueue import check_fair_sharing
from .fields import Errors, enum, mapping
from .meta import check_metadata
from .names import reference

__all__ = ["validate_local_queue"]

ENUMS: dict[str, tuple[str, ...]] = {"spec.stopPolicy": ("None", "Hold", "HoldAndDrain")}
"""Kueue's CRD enums on a LocalQueue (see ``clusterqueue.ENUMS``)."""


def validate_local_queue(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs = Errors()
    check_metadata(errs, obj, namespaced=True)
    spec = mapping(errs, obj.get("spec"), "spec")
    target = reference(errs, spec.get("clusterQueue"), "spec.clusterQueue")
    enum(errs, spec.get("stopPolicy"), "spec.stopPolicy", ENUMS["spec.stopPolicy"])
    # No webhook weighs a LocalQueue's weight: only the quantity pattern applies.
    check_fair_sharing(errs, spec.get("fairSharing"), "spec.fairSharing", webhook=False)
    if old is not None and target is not None:
        old_spec = old["spec"] if isinstance(old.get("spec"), dict) else {}
        before = old_spec.get("clusterQueue")
        if before is not None and before != target:
            errs.invalid("spec.clusterQueue", target, f'field is immutable (was "{before}")')
    return errs.items
