"""Koordinator's admission rules for ElasticQuota, as its webhooks apply them.

Why: a quota tree is only meaningful if every group's configuration agrees with its
parent and children; Koordinator refuses objects that would break it
(``pkg/webhook/elasticquota``).  A refused object takes no part in scheduling, and a
refused update leaves the earlier version in force.

Order of checks, each stage stopping at the first that fails, as the real chain does:

1. The API server's CRD schema: ``spec.min``/``spec.max`` are maps of quantities.
2. IsForbiddenModify: the root and system quotas belong to the scheduler.
3. Mutating webhook on create (fillQuotaDefaultInformation): the shared-weight
   annotation must be a JSON resource list.
4. ValidAddQuota / ValidUpdateQuota: a created name must be new; a namespace in the
   ``namespaces`` annotation may be bound to one quota only.  An update that changes none
   of the parent, is-parent and tree-id labels, the namespaces annotation or the spec
   is accepted without further checks.
5. validateQuotaSelfItem: no negative max, min or shared weight; every min key is a
   max key and ``min <= max``; ``max >= status.used`` for max-strict-check keys.
6. validateQuotaTopology: is-parent may become "false" only without children and "true"
   only without bound workloads (checkIsParentChange); tree ids agree (checkTreeID);
   then, except for a top-level leaf, the parent exists and is a parent
   (checkParentQuotaInfo), max keys equal the parent's and the children's and min keys
   are included (checkSubAndParentGroupQuotaKey), and unless allow-force-update or
   is-root is set, siblings' mins plus one's own fit in the parent's min (not checked
   directly under the root, where the cluster may shrink) and the children's mins fit
   in one's own (checkMinQuotaValidate).  Koordinator has no explicit cycle check; a
   parent change that would close a loop is refused here as well.

Deletion (:func:`validate_elastic_quota_delete`, ValidDeleteQuota): never the scheduler's
own quotas, nor one that still has child quotas or bound workloads.

Errors are :class:`FieldError` values with a Kubernetes field path and a sentence that
quotes the numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kueued.errors import FieldError
from kueued.model import koordinator as k
from kueued.model.limits import MAX_TREE_DEPTH
from kueued.model.quantity import QuantityError, format_milli, parse
from kueued.model.validation.fields import Errors
from kueued.model.validation.meta import check_metadata

__all__ = ["validate_elastic_quota", "validate_elastic_quota_delete"]

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _label_path(key: str) -> str:
    return f"metadata.labels[{key}]"


def _annotation_path(key: str) -> str:
    return f"metadata.annotations[{key}]"


def _fmt(resource: str, milli: int) -> str:
    return format_milli(milli, resource=resource)


def validate_elastic_quota(
    obj: dict,
    *,
    old: dict | None,
    quotas: Mapping[str, dict],
    workloads: Sequence[dict],
) -> list[FieldError]:
    """Why ``obj`` must be refused, or [] when Koordinator would accept it.

    ``old`` is the version in force when ``obj`` is an update; ``quotas`` are the accepted
    ElasticQuota manifests by name; ``workloads`` the Workloads seen so far.
    """
    errors = _schema(obj)
    if errors:
        return errors
    name = k.name_of(obj)
    if name in (k.ROOT_QUOTA, k.SYSTEM_QUOTA):
        return [FieldError("metadata.name", f"quota {name} belongs to the scheduler and cannot be modified")]
    if old is None:
        errors = _create_checks(obj, quotas)
    elif _meta_unchanged(old, obj):
        return []
    else:
        errors = _namespace_conflicts(obj, quotas)
    if errors:
        return errors
    errors = _self_item(obj)
    if errors:
        return errors
    return _topology(obj, old=old, quotas=quotas, workloads=workloads)


def validate_elastic_quota_delete(
    obj: Mapping[str, Any], *, quotas: Mapping[str, dict], workloads: Sequence[dict],
) -> list[FieldError]:
    """ValidDeleteQuota: why deleting ``obj`` must be refused, or [] when Koordinator allows it.

    The scheduler's own quotas stay; a quota with child quotas or with bound workloads
    stays too (its children would lose their runtime, its workloads their quota).
    """
    name = k.name_of(obj)
    if name in (k.ROOT_QUOTA, k.SYSTEM_QUOTA, k.DEFAULT_QUOTA):
        return [FieldError("metadata.name", f"quota {name} belongs to the scheduler and cannot be deleted")]
    children = _children(name, quotas)
    if children:
        listed = ", ".join(n for n, _ in children)
        return [FieldError("metadata.name", f"quota {name} has child quotas ({listed}); delete them first")]
    if _has_bound_workloads(name, k.quota_namespaces(obj), workloads):
        return [FieldError("metadata.name", f"quota {name} has bound workloads; it cannot be deleted")]
    return []


def _schema(obj: Mapping[str, Any]) -> list[FieldError]:
    shape = Errors()  # the API server's generic metadata checks and the CRD's object types
    check_metadata(shape, dict(obj), namespaced=True)
    if obj.get("spec") is not None and not isinstance(obj.get("spec"), Mapping):
        shape.wrong_type("spec", obj.get("spec"), "object")
    if shape:
        return shape.items
    name = k.name_of(obj)
    if not name:
        return [FieldError("metadata.name", "Required value: name is required")]
    errors: list[FieldError] = []
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        errors.append(FieldError("metadata.name", f'Invalid value: "{name}": must be a lowercase RFC 1123 '
                                                  "subdomain"))
    spec = obj.get("spec") or {}
    for field in ("max", "min"):
        value = spec.get(field)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            errors.append(FieldError(f"spec.{field}", "must be a map of resource name to quantity"))
            continue
        for resource, quantity in value.items():
            try:
                if isinstance(quantity, bool):
                    raise QuantityError(quantity)
                parse(quantity)
            except QuantityError:
                errors.append(FieldError(
                    f"spec.{field}.{resource}",
                    f'Invalid value: "{quantity}": spec.{field}.{resource} in body should match '
                    f"'{_QUANTITY_PATTERN}'",
                ))
    return errors


def _amounts(obj: Mapping[str, Any], field: str) -> dict[str, int]:
    return k.resource_list((obj.get("spec") or {}).get(field))


def _create_checks(obj: Mapping[str, Any], quotas: Mapping[str, dict]) -> list[FieldError]:
    try:
        k.shared_weight(obj)
    except (ValueError, TypeError, QuantityError) as exc:
        return [FieldError(_annotation_path(k.ANNOTATION_SHARED_WEIGHT),
                           f"fillDefaultQuotaInfo unmarshal sharedWeight failed: {exc}")]
    name = k.name_of(obj)
    if name in quotas:
        return [FieldError("metadata.name", f"quota {name} already exists")]
    return _namespace_conflicts(obj, quotas)


def _namespace_conflicts(obj: Mapping[str, Any], quotas: Mapping[str, dict]) -> list[FieldError]:
    name = k.name_of(obj)
    errors = []
    for ns in k.quota_namespaces(obj):
        for other_name, other in sorted(quotas.items()):
            if other_name != name and ns in k.quota_namespaces(other):
                errors.append(FieldError(
                    _annotation_path(k.ANNOTATION_NAMESPACES),
                    f"namespace {ns} is already bound to quota {other_name}",
                ))
    return errors


def _meta_unchanged(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """quotaFieldsCopy equality: only these fields trigger validation of an update."""
    def fields(q: Mapping[str, Any]) -> tuple[object, ...]:
        lab, ann = k.labels(q), k.annotations_of(q)
        return (k.parent_name(q), lab.get(k.LABEL_IS_PARENT), lab.get(k.LABEL_TREE_ID),
                ann.get(k.ANNOTATION_NAMESPACES), q.get("spec") or {})
    return fields(old) == fields(new)


def _self_item(obj: Mapping[str, Any]) -> list[FieldError]:
    name = k.name_of(obj)
    max_, min_ = _amounts(obj, "max"), _amounts(obj, "min")
    errors = []
    for field, amounts in (("max", max_), ("min", min_)):
        for r, v in sorted(amounts.items()):
            if v < 0:
                errors.append(FieldError(f"spec.{field}.{r}", f"must be greater than or equal to 0, "
                                                              f"quota {name} has {field} {r} {_fmt(r, v)}"))
    if errors:
        return errors  # comparing negative amounts would only repeat the problem
    weight_path = _annotation_path(k.ANNOTATION_SHARED_WEIGHT)
    try:
        weight = k.shared_weight(obj) or {}
    except (ValueError, TypeError, QuantityError) as exc:
        errors.append(FieldError(weight_path, f"must be a JSON resource list: {exc}"))
        weight = {}
    for r, v in sorted(weight.items()):
        if v < 0:
            errors.append(FieldError(weight_path, f"{r} weight {_fmt(r, v)} must be non-negative"))
    for r, v in sorted(min_.items()):
        if r not in max_:
            errors.append(FieldError(f"spec.min.{r}",
                                     f"resource {r} of quota {name} is included in min but not in max"))
        elif v > max_[r]:
            errors.append(FieldError(f"spec.min.{r}", f"min {_fmt(r, v)} > max {_fmt(r, max_[r])}"))
    errors.extend(_max_strict(obj, max_))
    return errors


def _max_strict(obj: Mapping[str, Any], max_: Mapping[str, int]) -> list[FieldError]:
    raw = k.annotations_of(obj).get(k.ANNOTATION_MAX_STRICT_KEYS)
    if not raw:
        return []
    path = _annotation_path(k.ANNOTATION_MAX_STRICT_KEYS)
    try:
        keys = json.loads(raw)
        if not isinstance(keys, list):
            raise ValueError("not a JSON list")
        used = k.resource_list((obj.get("status") or {}).get("used"))
    except (ValueError, TypeError, QuantityError) as exc:
        return [FieldError(path, f"invalid value: {exc}")]
    errors = []
    for r in map(str, keys):
        if r not in used:
            continue
        if r not in max_:
            errors.append(FieldError(f"spec.max.{r}", f"{r} is used ({_fmt(r, used[r])}) but not in max"))
        elif max_[r] < used[r]:
            errors.append(FieldError(f"spec.max.{r}", f"max {_fmt(r, max_[r])} < used {_fmt(r, used[r])}"))
    return errors


def _effective_tree_id(obj: Mapping[str, Any], quotas: Mapping[str, dict]) -> str:
    """The tree-id label, else the one the mutating webhook copies from the parent."""
    seen: set[str] = set()
    while True:
        tid = k.tree_id(obj)
        parent = k.parent_name(obj)
        if tid or parent == k.ROOT_QUOTA or parent in seen or parent not in quotas:
            return tid
        seen.add(parent)
        obj = quotas[parent]


def _children(name: str, quotas: Mapping[str, dict]) -> list[tuple[str, dict]]:
    return [(n, q) for n, q in sorted(quotas.items()) if n != name and k.parent_name(q) == name]


def _has_bound_workloads(name: str, namespaces: Sequence[str], workloads: Sequence[dict]) -> bool:
    """hasQuotaBoundedPods: labelled with the quota, or in its own or annotated namespaces."""
    for w in workloads:
        if k.workload_quota_label(w) == name or k.namespace_of(w) == name or k.namespace_of(w) in namespaces:
            return True
    return False


def _topology(
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None,
    quotas: Mapping[str, dict],
    workloads: Sequence[dict],
) -> list[FieldError]:
    name, parent = k.name_of(obj), k.parent_name(obj)
    children = _children(name, quotas)
    is_parent_path = _label_path(k.LABEL_IS_PARENT)
    if old is not None and k.is_parent(old) != k.is_parent(obj):
        if children and not k.is_parent(obj):
            reason = f"quota {name} has child quotas ({children[0][0]}); it cannot stop being a parent"
            return [FieldError(is_parent_path, reason)]
        if k.is_parent(obj) and _has_bound_workloads(name, k.quota_namespaces(old), workloads):
            reason = f"quota {name} has bound workloads; it cannot become a parent"
            return [FieldError(is_parent_path, reason)]

    errors = _tree_ids(obj, old=old, quotas=quotas, children=children)
    if errors or (parent == k.ROOT_QUOTA and not k.is_parent(obj)):
        return errors

    parent_path = _label_path(k.LABEL_PARENT)
    parent_obj: Mapping[str, Any] | None = None
    if parent != k.ROOT_QUOTA:
        if parent == name or parent not in quotas:
            reason = f"parent quota {parent} does not exist"
            if parent == name:
                reason = "a quota cannot be its own parent"
            return [FieldError(parent_path, reason)]
        parent_obj = quotas[parent]
        if not k.is_parent(parent_obj):
            reason = f'parent quota {parent} is not a parent (its is-parent label is not "true")'
            return [FieldError(parent_path, reason)]
        if _closes_cycle(name, parent, quotas):
            reason = f"parent {parent} is a descendant of {name}: the tree would have a cycle"
            return [FieldError(parent_path, reason)]
        levels = _levels_above(parent, quotas) + _height(name, quotas)
        if levels > MAX_TREE_DEPTH:
            reason = (f"the quota tree would be {levels} levels deep under parent {parent}; "
                      f"kueued allows at most {MAX_TREE_DEPTH} levels")
            return [FieldError(parent_path, reason)]

    errors = _keys(obj, parent_obj, children)
    if errors or k.allow_force_update(obj) or k.is_tree_root(obj):
        return errors
    return _min_sums(obj, parent_obj, quotas, children)


def _tree_ids(
    obj: Mapping[str, Any], *, old: Mapping[str, Any] | None, quotas: Mapping[str, dict],
    children: Sequence[tuple[str, dict]],
) -> list[FieldError]:
    path = _label_path(k.LABEL_TREE_ID)
    mine = _effective_tree_id(obj, quotas)
    if old is not None and _effective_tree_id(old, quotas) != mine:
        return [FieldError(path, f"tree id cannot change ({_effective_tree_id(old, quotas)!r} to {mine!r})")]
    parent = k.parent_name(obj)
    if parent != k.ROOT_QUOTA and parent in quotas and _effective_tree_id(quotas[parent], quotas) != mine:
        return [FieldError(path, f"tree id {mine!r} differs from parent {parent}'s")]
    for child_name, child in children:
        if _effective_tree_id(child, quotas) != mine:
            return [FieldError(path, f"tree id {mine!r} differs from child {child_name}'s")]
    return []


def _levels_above(parent: str, quotas: Mapping[str, dict]) -> int:
    """Groups from ``parent`` up to its tree's top, ``parent`` included (no cycle: checked first)."""
    levels, seen = 0, set()
    while parent != k.ROOT_QUOTA and parent in quotas and parent not in seen:
        seen.add(parent)
        levels += 1
        parent = k.parent_name(quotas[parent])
    return levels


def _height(name: str, quotas: Mapping[str, dict]) -> int:
    """Levels of ``name``'s subtree among the accepted groups, ``name`` included (a re-parent moves it whole)."""
    below: dict[str, list[str]] = {}
    for child, q in quotas.items():
        below.setdefault(k.parent_name(q), []).append(child)
    height, level, seen = 0, [name], {name}
    while level:
        height += 1
        level = [c for n in level for c in below.get(n, []) if c not in seen]
        seen.update(level)
    return height


def _closes_cycle(name: str, parent: str, quotas: Mapping[str, dict]) -> bool:
    seen: set[str] = set()
    while parent != k.ROOT_QUOTA and parent in quotas and parent not in seen:
        if parent == name:
            return True
        seen.add(parent)
        parent = k.parent_name(quotas[parent])
    return parent == name


def _keys(
    obj: Mapping[str, Any], parent_obj: Mapping[str, Any] | None, children: Sequence[tuple[str, dict]]
) -> list[FieldError]:
    """checkSubAndParentGroupQuotaKey."""
    name = k.name_of(obj)
    max_keys, min_keys = set(_amounts(obj, "max")), set(_amounts(obj, "min"))
    if parent_obj is not None:
        parent = k.name_of(parent_obj)
        if set(_amounts(parent_obj, "max")) != max_keys:
            return [FieldError("spec.max", f"max resources {sorted(max_keys)} differ from parent {parent}'s "
                                           f"{sorted(_amounts(parent_obj, 'max'))}")]
        extra = min_keys - set(_amounts(parent_obj, "min"))
        if extra:
            return [FieldError("spec.min", f"min resources {sorted(extra)} are not in parent {parent}'s min")]
    for child_name, child in children:
        if set(_amounts(child, "max")) != max_keys:
            reason = f"max resources {sorted(max_keys)} differ from child {child_name}'s"
            return [FieldError("spec.max", f"{reason} {sorted(_amounts(child, 'max'))}")]
        extra = set(_amounts(child, "min")) - min_keys
        if extra:
            return [FieldError("spec.min", f"child {child_name}'s min resources {sorted(extra)} are not in "
                                           f"{name}'s min")]
    return []


def _over(total: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    """LessThanOrEqualCompletely's failures: a resource missing from ``limit`` is 0."""
    return sorted(r for r, v in total.items() if v > limit.get(r, 0))


def _min_sums(
    obj: Mapping[str, Any], parent_obj: Mapping[str, Any] | None, quotas: Mapping[str, dict],
    children: Sequence[tuple[str, dict]],
) -> list[FieldError]:
    """checkMinQuotaValidate."""
    name, own_min = k.name_of(obj), _amounts(obj, "min")
    if parent_obj is not None:
        parent = k.name_of(parent_obj)
        total = dict(own_min)
        for _, sibling in _children(parent, quotas):
            if k.name_of(sibling) == name:
                continue
            for r, v in _amounts(sibling, "min").items():
                total[r] = total.get(r, 0) + v
        parent_min = _amounts(parent_obj, "min")
        over = _over(total, parent_min)
        if over:
            detail = "; ".join(f"{r} {_fmt(r, total[r])} > {_fmt(r, parent_min.get(r, 0))}" for r in over)
            reason = f"the mins of {parent}'s children would sum above its min ({detail})"
            return [FieldError("spec.min", reason)]
    if children:
        total = {}
        for _, child in children:
            for r, v in _amounts(child, "min").items():
                total[r] = total.get(r, 0) + v
        over = _over(total, own_min)
        if over:
            detail = "; ".join(f"{r} {_fmt(r, total[r])} > {_fmt(r, own_min.get(r, 0))}" for r in over)
            return [FieldError("spec.min", f"the mins of {name}'s children exceed its min ({detail})")]
    return []
