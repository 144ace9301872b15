"""ResourceFlavor: node labels, taints and tolerations, and the topology rule.

Schema (``apis/kueue/v1beta2/resourceflavor_types.go``): at most 8 node labels, 8 taints
and 8 tolerations; CEL rules restrict taint effects and toleration operators, require a
node label when ``topologyName`` is set, and freeze the whole spec once a flavor has a
topology.  Webhook (``pkg/webhooks/resourceflavor_webhook.go``): labels and taint keys use
the label grammars, and taints are unique by (key, effect).
"""

from __future__ import annotations

from typing import Any

from kueued.errors import FieldError

from .fields import Errors, child, index, integer, mapping, sequence, string
from .meta import check_metadata
from .names import label_value_errors, labels, qualified_name_errors, reference

__all__ = ["validate_resource_flavor", "check_tolerations"]

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_EFFECTS_MSG = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"


def validate_resource_flavor(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs = Errors()
    check_metadata(errs, obj)
    spec = mapping(errs, obj.get("spec"), "spec")
    node_labels = labels(errs, spec.get("nodeLabels"), "spec.nodeLabels")
    if len(node_labels) > 8:
        errs.add("spec.nodeLabels", f"Too many: {len(node_labels)}: must have at most 8 items")
    _node_taints(errs, spec.get("nodeTaints"), "spec.nodeTaints")
    check_tolerations(errs, spec.get("tolerations"), "spec.tolerations")
    if spec.get("topologyName") is not None:
        reference(errs, spec.get("topologyName"), "spec.topologyName")
        if not node_labels:
            errs.invalid("spec", spec, "at least one nodeLabel is required when topology is set")
    if old is not None:
        old_spec = old["spec"] if isinstance(old.get("spec"), dict) else {}
        if old_spec.get("topologyName") is not None and old_spec != spec:
            errs.invalid("spec", spec, "resourceFlavorSpec are immutable when topologyName is set")
    return errs.items


def _node_taints(errs: Errors, value: object, path: str) -> None:
    taints = sequence(errs, value, path, max_items=8)
    bad_effect = False
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(taints):
        p = index(path, i)
        taint = mapping(errs, raw, p)
        k = string(errs, taint.get("key"), child(p, "key"))
        if taint.get("key") is None:
            errs.required(child(p, "key"))
        elif k is not None:
            for msg in qualified_name_errors(k):
                errs.invalid(child(p, "key"), k, msg)
        v = string(errs, taint.get("value"), child(p, "value"))
        if v is not None:
            for msg in label_value_errors(v):
                errs.invalid(child(p, "value"), v, msg)
        effect = string(errs, taint.get("effect"), child(p, "effect"))
        if taint.get("effect") is None:
            errs.required(child(p, "effect"))
        elif effect not in _EFFECTS:
            bad_effect = True
        if k is not None and effect is not None:
            if (k, effect) in seen:
                errs.duplicate(p, taint, "taints must be unique by key and effect pair")
            seen.add((k, effect))
    if bad_effect:
        errs.invalid(path, taints, _EFFECTS_MSG)


def check_tolerations(errs: Errors, value: object, path: str) -> None:
    """Tolerations with the CEL rules Kueue puts on every toleration list it owns."""
    items = sequence(errs, value, path, max_items=8)
    rules: list[str] = []
    for i, raw in enumerate(items):
        p = index(path, i)
        tol = mapping(errs, raw, p)
        k = string(errs, tol.get("key"), child(p, "key"))
        op = string(errs, tol.get("operator"), child(p, "operator"))
        effect = string(errs, tol.get("effect"), child(p, "effect"))
        string(errs, tol.get("value"), child(p, "value"))
        integer(errs, tol.get("tolerationSeconds"), child(p, "tolerationSeconds"), int32=False)
        if k:
            for msg in qualified_name_errors(k):
                errs.invalid(child(p, "key"), k, msg)
        if tol.get("key") is None and op != "Exists":
            rules.append("operator must be Exists when 'key' is empty, which means "
                         "'match all values and all keys'")
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            rules.append("effect must be 'NoExecute' when 'tolerationSeconds' is set")
        if op is not None and op not in ("Equal", "Exists"):
            rules.append("supported toleration values: 'Equal'(default), 'Exists'")
        if op == "Exists" and tol.get("value") is not None:
            rules.append("a value must be empty when 'operator' is 'Exists'")
        if effect is not None and effect not in _EFFECTS:
            rules.append(_EFFECTS_MSG)
    for rule in dict.fromkeys(rules):
        errs.invalid(path, items, rule)
