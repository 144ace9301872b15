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
   parent change that would close a loop is refused here as well.  These checks are
   :mod:`kueued.model.elastic_topology`'s.

Deletion (:func:`validate_elastic_quota_delete`, ValidDeleteQuota): never the scheduler's
own quotas, nor one that still has child quotas or bound workloads.

Errors are :class:`FieldError` values with a Kubernetes field path and a sentence that
quotes the numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kueued.errors import FieldError
from kueued.model import koordinator as k
from kueued.model.elastic_topology import amounts, check_topology, children_of, fmt, has_bound_workloads
from kueued.model.json_text import read_json
from kueued.model.quantity import QuantityError, parse
from kueued.model.validation.fields import Errors
from kueued.model.validation.meta import check_metadata

__all__ = ["validate_elastic_quota", "validate_elastic_quota_delete"]

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _annotation_path(key: str) -> str:
    return f"metadata.annotations[{key}]"


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
    return check_topology(obj, old=old, quotas=quotas, workloads=workloads)


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
    children = children_of(name, quotas)
    if children:
        listed = ", ".join(n for n, _ in children)
        return [FieldError("metadata.name", f"quota {name} has child quotas ({listed}); delete them first")]
    if has_bound_workloads(name, k.quota_namespaces(obj), workloads):
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
    max_, min_ = amounts(obj, "max"), amounts(obj, "min")
    errors = []
    for field, values in (("max", max_), ("min", min_)):
        for r, v in sorted(values.items()):
            if v < 0:
                errors.append(FieldError(f"spec.{field}.{r}", f"must be greater than or equal to 0, "
                                                              f"quota {name} has {field} {r} {fmt(r, v)}"))
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
            errors.append(FieldError(weight_path, f"{r} weight {fmt(r, v)} must be non-negative"))
    for r, v in sorted(min_.items()):
        if r not in max_:
            errors.append(FieldError(f"spec.min.{r}",
                                     f"resource {r} of quota {name} is included in min but not in max"))
        elif v > max_[r]:
            errors.append(FieldError(f"spec.min.{r}", f"min {fmt(r, v)} > max {fmt(r, max_[r])}"))
    errors.extend(_max_strict(obj, max_))
    return errors


def _max_strict(obj: Mapping[str, Any], max_: Mapping[str, int]) -> list[FieldError]:
    raw = k.annotations_of(obj).get(k.ANNOTATION_MAX_STRICT_KEYS)
    if not raw:
        return []
    path = _annotation_path(k.ANNOTATION_MAX_STRICT_KEYS)
    try:
        keys = read_json(raw)
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
            errors.append(FieldError(f"spec.max.{r}", f"{r} is used ({fmt(r, used[r])}) but not in max"))
        elif max_[r] < used[r]:
            errors.append(FieldError(f"spec.max.{r}", f"max {fmt(r, max_[r])} < used {fmt(r, used[r])}"))
    return errors

