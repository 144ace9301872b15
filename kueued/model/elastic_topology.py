"""Koordinator's topology checks for ElasticQuota (validateQuotaTopology): where a group sits in its tree.

Step 6 of :mod:`kueued.model.elastic_validation`'s chain, run on an object that passed the
earlier ones: is-parent may change only without children (to "false") or bound workloads
(to "true"); tree ids agree with the old version, the parent and the children; the parent
exists, is a parent, is not a descendant and leaves the tree within
:data:`~kueued.model.limits.MAX_TREE_DEPTH`; max keys equal the parent's and the
children's and min keys are included; the mins of siblings fit in the parent's min and the
children's in one's own.  It also holds the helpers both modules read groups with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kueued.errors import FieldError
from kueued.model import koordinator as k
from kueued.model.limits import MAX_TREE_DEPTH
from kueued.model.quantity import format_milli

__all__ = ["check_topology", "children_of", "has_bound_workloads", "amounts", "fmt"]


def _label_path(key: str) -> str:
    return f"metadata.labels[{key}]"



def fmt(resource: str, milli: int) -> str:
    return format_milli(milli, resource=resource)



def amounts(obj: Mapping[str, Any], field: str) -> dict[str, int]:
    return k.resource_list((obj.get("spec") or {}).get(field))



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


def children_of(name: str, quotas: Mapping[str, dict]) -> list[tuple[str, dict]]:
    return [(n, q) for n, q in sorted(quotas.items()) if n != name and k.parent_name(q) == name]


def has_bound_workloads(name: str, namespaces: Sequence[str], workloads: Sequence[dict]) -> bool:
    """hasQuotaBoundedPods: labelled with the quota, or in its own or annotated namespaces."""
    for w in workloads:
        if k.workload_quota_label(w) == name or k.namespace_of(w) == name or k.namespace_of(w) in namespaces:
            return True
    return False


def check_topology(
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None,
    quotas: Mapping[str, dict],
    workloads: Sequence[dict],
) -> list[FieldError]:
    name, parent = k.name_of(obj), k.parent_name(obj)
    children = children_of(name, quotas)
    is_parent_path = _label_path(k.LABEL_IS_PARENT)
    if old is not None and k.is_parent(old) != k.is_parent(obj):
        if children and not k.is_parent(obj):
            reason = f"quota {name} has child quotas ({children[0][0]}); it cannot stop being a parent"
            return [FieldError(is_parent_path, reason)]
        if k.is_parent(obj) and has_bound_workloads(name, k.quota_namespaces(old), workloads):
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
    max_keys, min_keys = set(amounts(obj, "max")), set(amounts(obj, "min"))
    if parent_obj is not None:
        parent = k.name_of(parent_obj)
        if set(amounts(parent_obj, "max")) != max_keys:
            return [FieldError("spec.max", f"max resources {sorted(max_keys)} differ from parent {parent}'s "
                                           f"{sorted(amounts(parent_obj, 'max'))}")]
        extra = min_keys - set(amounts(parent_obj, "min"))
        if extra:
            return [FieldError("spec.min", f"min resources {sorted(extra)} are not in parent {parent}'s min")]
    for child_name, child in children:
        if set(amounts(child, "max")) != max_keys:
            reason = f"max resources {sorted(max_keys)} differ from child {child_name}'s"
            return [FieldError("spec.max", f"{reason} {sorted(amounts(child, 'max'))}")]
        extra = set(amounts(child, "min")) - min_keys
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
    name, own_min = k.name_of(obj), amounts(obj, "min")
    if parent_obj is not None:
        parent = k.name_of(parent_obj)
        total = dict(own_min)
        for _, sibling in children_of(parent, quotas):
            if k.name_of(sibling) == name:
                continue
            for r, v in amounts(sibling, "min").items():
                total[r] = total.get(r, 0) + v
        parent_min = amounts(parent_obj, "min")
        over = _over(total, parent_min)
        if over:
            detail = "; ".join(f"{r} {fmt(r, total[r])} > {fmt(r, parent_min.get(r, 0))}" for r in over)
            reason = f"the mins of {parent}'s children would sum above its min ({detail})"
            return [FieldError("spec.min", reason)]
    if children:
        total = {}
        for _, child in children:
            for r, v in amounts(child, "min").items():
                total[r] = total.get(r, 0) + v
        over = _over(total, own_min)
        if over:
            detail = "; ".join(f"{r} {fmt(r, total[r])} > {fmt(r, own_min.get(r, 0))}" for r in over)
            return [FieldError("spec.min", f"the mins of {name}'s children exceed its min ({detail})")]
    return []
