"""Koordinator's ElasticQuota API as plain-manifest accessors.

Mirrors ``apis/extension/elastic_quota.go`` (GetParentQuotaName, IsParentQuota,
IsAllowLentResource, GetSharedWeight, GetAnnotationQuotaNamespaces, GetQuotaName, ...) so
that the webhook rules (``model/elastic_validation.py``, ``model/elastic_pod_validation.py``)
and the run (``scheduling/elastic.py``) read an ElasticQuota or a Workload the same way.
Objects stay ``dict`` manifests: the webhook must see exactly what the user applied,
including quantities that do not parse.

Spellings: Koordinator's code reads ``quota.scheduling.koordinator.sh/parent`` and
``.../name``; the design seed says ``parent-quota-name`` and ``quota-name``.  Both are
accepted, Koordinator's first.

Units: amounts are kueued's exact milli-units (``model.quantity``).  Koordinator's
calculator works per resource in int64 "values" (cpu in millicores, everything else in
whole units rounded up, ``getQuantityValue``); :func:`koord_value` and
:func:`from_koord_value` convert between the two at the calculator's edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kueued.model.json_text import read_json
from kueued.model.quantity import QuantityError, parse

__all__ = [
    "annotated_amounts",
    "PREFIX", "ROOT_QUOTA", "SYSTEM_QUOTA", "DEFAULT_QUOTA", "DEFAULT_GROUP_MAX",
    "LABEL_PARENT", "LABEL_PARENT_SEED", "LABEL_IS_PARENT", "LABEL_ALLOW_LENT", "LABEL_QUOTA_NAME",
    "LABEL_QUOTA_NAME_SEED", "LABEL_PREEMPTIBLE", "LABEL_ALLOW_FORCE_UPDATE", "LABEL_IS_ROOT",
    "LABEL_TREE_ID", "ANNOTATION_SHARED_WEIGHT", "ANNOTATION_NAMESPACES", "ANNOTATION_MAX_STRICT_KEYS",
    "ANNOTATION_REQUEST", "ANNOTATION_RUNTIME",
    "labels", "annotations_of", "name_of", "namespace_of", "parent_name", "is_parent",
    "allow_lent_resource", "allow_force_update", "is_tree_root", "tree_id", "quota_namespaces",
    "resource_list", "shared_weight", "effective_shared_weight", "workload_quota_label",
    "pod_quota_name", "is_elastic_pod", "is_non_preemptible", "koord_value", "from_koord_value",
    "GATE_PARENT_QUOTA_PODS", "parents_first", "accepted_condition", "refused_before",
]

PREFIX = "quota.scheduling.koordinator.sh/"
ROOT_QUOTA = "koordinator-root-quota"
SYSTEM_QUOTA = "koordinator-system-quota"
DEFAULT_QUOTA = "koordinator-default-quota"

LABEL_PARENT = PREFIX + "parent"
LABEL_PARENT_SEED = PREFIX + "parent-quota-name"
LABEL_IS_PARENT = PREFIX + "is-parent"
LABEL_ALLOW_LENT = PREFIX + "allow-lent-resource"
LABEL_QUOTA_NAME = PREFIX + "name"
LABEL_QUOTA_NAME_SEED = PREFIX + "quota-name"
LABEL_PREEMPTIBLE = PREFIX + "preemptible"
LABEL_ALLOW_FORCE_UPDATE = PREFIX + "allow-force-update"
LABEL_IS_ROOT = PREFIX + "is-root"
LABEL_TREE_ID = PREFIX + "tree-id"
ANNOTATION_SHARED_WEIGHT = PREFIX + "shared-weight"
ANNOTATION_NAMESPACES = PREFIX + "namespaces"
ANNOTATION_MAX_STRICT_KEYS = PREFIX + "max-strict-check-resource-keys"
# Written by the scheduler (elasticquota/controller.go), JSON resource lists:
ANNOTATION_REQUEST = PREFIX + "request"
ANNOTATION_RUNTIME = PREFIX + "runtime"

# Koordinator's feature gate (pkg/features, alpha, off by default): with it, the pod webhook lets a
# pod join an is-parent quota.  kueued reads it from the Configuration's ``featureGates``.
GATE_PARENT_QUOTA_PODS = "SupportParentQuotaSubmitPod"

# pluginArgs.DefaultQuotaGroupMax / SystemQuotaGroupMax: MaxInt64/5 cores and bytes.
DEFAULT_GROUP_MAX: Mapping[str, int] = {
    "cpu": (2**63 - 1) // 5 * 1000,
    "memory": (2**63 - 1) // 5 * 1000,
}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's metadata, {} when it is not a mapping.  These readers are total: they run on
    objects validation has not seen yet (the daemon orders a first list's quotas before validating
    them, and keeps refused versions to try again), so a malformed one reads as empty, never raises."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _map(_meta(obj).get("labels"))


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _map(_meta(obj).get("annotations"))


def name_of(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("namespace") or "")


def parent_name(obj: Mapping[str, Any]) -> str:
    """GetParentQuotaName: the parent label, or the root when it is empty."""
    lab = labels(obj)
    parent = lab.get(LABEL_PARENT) or lab.get(LABEL_PARENT_SEED) or ""
    if not parent and name_of(obj) != ROOT_QUOTA:
        return ROOT_QUOTA
    return str(parent)


def is_parent(obj: Mapping[str, Any]) -> bool:
    return labels(obj).get(LABEL_IS_PARENT) == "true"


def allow_lent_resource(obj: Mapping[str, Any]) -> bool:
    """Lends unless the label is exactly "false"."""
    return labels(obj).get(LABEL_ALLOW_LENT) != "false"


def allow_force_update(obj: Mapping[str, Any]) -> bool:
    return labels(obj).get(LABEL_ALLOW_FORCE_UPDATE) == "true"


def is_tree_root(obj: Mapping[str, Any]) -> bool:
    return labels(obj).get(LABEL_IS_ROOT) == "true"


def tree_id(obj: Mapping[str, Any]) -> str:
    return str(labels(obj).get(LABEL_TREE_ID) or "")


def quota_namespaces(obj: Mapping[str, Any]) -> list[str]:
    """GetAnnotationQuotaNamespaces: a JSON list; anything unreadable binds nothing."""
    raw = annotations_of(obj).get(ANNOTATION_NAMESPACES) or ""
    if not raw or not isinstance(raw, str):
        return []
    try:
        value = read_json(raw)
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [str(v) for v in value]


def resource_list(value: object) -> dict[str, int]:
    """A ResourceList (``{"cpu": "2"}``) in milli-units; raises QuantityError/TypeError."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError("must be a map of resource name to quantity")
    return {str(k): parse(v) for k, v in value.items()}


def annotated_amounts(obj: Mapping[str, Any], key: str) -> dict[str, int]:
    """A ResourceList annotation (``ANNOTATION_REQUEST``, ``ANNOTATION_RUNTIME``) in milli-units;
    {} when absent or unreadable."""
    raw = annotations_of(obj).get(key)
    if not raw:
        return {}
    try:
        return resource_list(read_json(raw))
    except (ValueError, TypeError, QuantityError):
        return {}


def shared_weight(obj: Mapping[str, Any]) -> dict[str, int] | None:
    """The shared-weight annotation as written, or None when absent or empty.

    Raises ValueError when it is not a JSON resource list (the mutating webhook's
    "unmarshal sharedWeight failed").
    """
    raw = annotations_of(obj).get(ANNOTATION_SHARED_WEIGHT)
    if not raw:
        return None
    try:
        value = read_json(raw)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError("not a JSON object of resource name to quantity")
    return resource_list(value)


def effective_shared_weight(obj: Mapping[str, Any], max_: Mapping[str, int]) -> dict[str, int]:
    """The weight the scheduler uses.

    The mutating webhook (fixedSharedWeight) fills keys missing from max with max's value
    and drops keys max lacks; GetSharedWeight then falls back to max when every value is
    zero (or the annotation cannot be read).
    """
    try:
        written = shared_weight(obj)
    except (ValueError, TypeError):
        written = None
    if written is None:
        return dict(max_)
    fixed = {k: written.get(k, v) for k, v in max_.items()}
    if not any(fixed.values()):
        return dict(max_)
    return fixed


def workload_quota_label(obj: Mapping[str, Any]) -> str:
    lab = labels(obj)
    return str(lab.get(LABEL_QUOTA_NAME) or lab.get(LABEL_QUOTA_NAME_SEED) or "")


def pod_quota_name(obj: Mapping[str, Any], quotas: Iterable[Mapping[str, Any]]) -> str:
    """GetQuotaName (scheduler plugin and pod webhook alike): the quota a pod names or implies.

    The quota-name label; else the ElasticQuota named like the pod's namespace, in that
    namespace; else one whose ``namespaces`` annotation lists the namespace; else the default
    quota.  Whether the name is a known quota is the caller's question (a label naming no
    known quota also means the default quota, in the scheduler and the webhook alike).
    """
    name = workload_quota_label(obj)
    if name:
        return name
    ns = namespace_of(obj)
    quotas = list(quotas)
    for q in quotas:
        if name_of(q) == ns and namespace_of(q) == ns:
            return ns
    for q in quotas:
        if ns in quota_namespaces(q):
            return name_of(q)
    return DEFAULT_QUOTA


def is_elastic_pod(obj: Mapping[str, Any]) -> bool:
    """Does this Workload stand for a Koordinator pod rather than a Kueue workload?

    It does when it names a quota, or when it names no LocalQueue (a pod under Koordinator
    always has a quota: its namespace's, or the default one).
    """
    return bool(workload_quota_label(obj)) or not _map(obj.get("spec")).get("queueName")


def is_non_preemptible(obj: Mapping[str, Any]) -> bool:
    """IsPodNonPreemptible: label (or annotation) ``preemptible: "false"``."""
    return labels(obj).get(LABEL_PREEMPTIBLE) == "false" or annotations_of(obj).get(LABEL_PREEMPTIBLE) == "false"


def koord_value(resource: str, milli: int) -> int:
    """getQuantityValue: cpu in millicores, other resources in whole units rounded up."""
    if resource == "cpu":
        return milli
    return -((-milli) // 1000)


def from_koord_value(resource: str, value: int) -> int:
    return value if resource == "cpu" else value * 1000


def parents_first(quotas: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """ElasticQuotas in the order Koordinator's webhook would have met them: by creation time (then
    namespace and name), each parent before its children.  A daemon that lists a quota tree (a start,
    a relist) gets it in name order; validated in that order, a child came before its parent and was
    refused, and siblings competing for the parent's min won by name, not by who came first.  Creation
    times are whole seconds: of two made in the same second, the one this daemon refused before (its
    ``Accepted=False`` condition) comes after the one in force, so a restart keeps the same one refused
    (by name, two quotas binding one namespace swapped: the admitted workload was evicted)."""
    order = sorted(quotas, key=lambda q: (str(_meta(q).get("creationTimestamp") or ""),
                                          refused_before(q), namespace_of(q), name_of(q)))
    names = {name_of(q) for q in order}
    out: list[Mapping[str, Any]] = []
    emitted: set[str] = set()
    while order:  # a pass per level: a parent's children wait for the pass after the one that placed it
        waiting = [q for q in order if parent_name(q) in names and parent_name(q) not in emitted
                   and parent_name(q) != name_of(q)]
        if len(waiting) == len(order):  # a cycle: as they come
            out.extend(order)
            break
        held = {id(q) for q in waiting}
        for q in order:
            if id(q) not in held:
                out.append(q)
                emitted.add(name_of(q))
        order = waiting
    return out


def accepted_condition(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``Accepted`` condition kueued wrote on an ElasticQuota, if any."""
    status = obj.get("status") if isinstance(obj, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == "Accepted":
            return c
    return None


def refused_before(obj: Mapping[str, Any]) -> bool:
    """Whether kueued refused this ElasticQuota when it last judged it (``Accepted=False``)."""
    c = accepted_condition(obj)
    return c is not None and c.get("status") == "False"
