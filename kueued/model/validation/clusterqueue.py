"""ClusterQueue and Cohort: the quota-bearing kinds and the resource groups they share.

Three layers refuse a bad quota object, and this module applies them in one pass:

1. the CRD schema (``apis/kueue/v1beta2/clusterqueue_types.go``, ``cohort_types.go``):
   ``MaxItems`` 16 resource groups, 64 covered resources / flavors / resources per group,
   enums for every policy, name patterns for cohort and flavor references, the quantity
   pattern, list-map keys that must be unique;
2. the CEL rules on those types: a flavor lists as many resources as the group covers,
   ``preference`` needs both fungibility policies at ``TryNextFlavor``,
   ``reclaimWithinCohort: Never`` forbids a ``borrowWithinCohort`` policy;
3. the webhooks (``pkg/webhooks/clusterqueue_webhook.go``, ``cohort_webhook.go``):
   covered resources are qualified names and unique across groups, a flavor appears in one
   group only, resources are listed in ``coveredResources`` order, quotas are
   non-negative, borrowing/lending limits need a cohort (CQ) or parent (Cohort), a CQ's
   lending limit stays within its nominal quota, a fair-sharing weight is 0 or > 1e-9;
   for a CQ, at most 256 flavors and 256 covered resources in all and 512 (flavor,
   resource) pairs per group, an admission check's ``onFlavors`` names only flavors of the
   queue's own groups (validateAdmissionCheckOnFlavors), and ``spec.admissionChecks`` (the
   v1beta1 list, which v1beta2 turned into the strategy) is not set beside
   ``admissionChecksStrategy`` (v1beta1's validateCQAdmissionChecks).

Defaults matter to the CEL rules (they run after defaulting): an absent
``reclaimWithinCohort`` is ``Never``, an absent ``whenCanBorrow`` is ``MayStopSearch``.
Neither kind has an immutable field in v1beta2, so updates are validated like creates;
a Cohort's parent may even form a cycle (the cache, not validation, deals with that).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kueued.errors import FieldError

from .fields import Errors, child, enum, index, integer, list_map_name, mapping, sequence, string
from .meta import check_metadata
from .names import DNS1123_SUBDOMAIN, label_selector, qualified_name_errors, quantity, reference

__all__ = ["validate_cluster_queue", "validate_cohort", "check_fair_sharing"]

MAX_RESOURCE_GROUPS = 16
MAX_PER_GROUP = 64
_ONE_NANO = Fraction(1, 10**9)

_QUEUEING = ("StrictFIFO", "BestEffortFIFO")
_STOP = ("None", "Hold", "HoldAndDrain")
_FUNGIBILITY = ("MayStopSearch", "TryNextFlavor")
_PREFERENCE = ("BorrowingOverPreemption", "PreemptionOverBorrowing")
_RECLAIM = ("Never", "LowerPriority", "Any")
_WITHIN_CQ = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_BORROW = ("Never", "LowerPriority")
_ADMISSION_MODE = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")

ENUMS: dict[str, tuple[str, ...]] = {
    "spec.queueingStrategy": _QUEUEING, "spec.stopPolicy": _STOP,
    "spec.flavorFungibility.whenCanBorrow": _FUNGIBILITY, "spec.flavorFungibility.whenCanPreempt": _FUNGIBILITY,
    "spec.flavorFungibility.preference": _PREFERENCE, "spec.preemption.reclaimWithinCohort": _RECLAIM,
    "spec.preemption.withinClusterQueue": _WITHIN_CQ, "spec.preemption.borrowWithinCohort.policy": _BORROW,
    "spec.admissionScope.admissionMode": _ADMISSION_MODE,
}
"""The ClusterQueue fields Kueue's CRD types as enums (``+kubebuilder:validation:Enum``), by path:
the same values this module refuses others of, carried into kueued's CRDs (``kueued.kube.crd_rules``)."""


def validate_cluster_queue(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs = Errors()
    check_metadata(errs, obj)
    spec = mapping(errs, obj.get("spec"), "spec")
    cohort = reference(errs, spec.get("cohortName"), "spec.cohortName")
    _resource_groups(errs, spec.get("resourceGroups"), "spec.resourceGroups",
                     has_parent=bool(cohort or spec.get("cohortName")), is_cohort=False)
    enum(errs, spec.get("queueingStrategy"), "spec.queueingStrategy", _QUEUEING)
    label_selector(errs, spec.get("namespaceSelector"), "spec.namespaceSelector")
    _flavor_fungibility(errs, spec.get("flavorFungibility"), "spec.flavorFungibility")
    _preemption(errs, spec.get("preemption"), "spec.preemption")
    _admission_checks_strategy(errs, spec.get("admissionChecksStrategy"), "spec.admissionChecksStrategy",
                               flavors=_flavor_names(spec.get("resourceGroups")))
    if spec.get("admissionChecks") and spec.get("admissionChecksStrategy") is not None:
        errs.invalid("spec", spec, "Either AdmissionChecks or AdmissionCheckStrategy can be set, but not both")
    _totals(errs, spec.get("resourceGroups"), "spec.resourceGroups")
    enum(errs, spec.get("stopPolicy"), "spec.stopPolicy", _STOP)
    check_fair_sharing(errs, spec.get("fairSharing"), "spec.fairSharing")
    if spec.get("admissionScope") is not None:
        scope = mapping(errs, spec.get("admissionScope"), "spec.admissionScope")
        if scope.get("admissionMode") is None:
            errs.required("spec.admissionScope.admissionMode")
        enum(errs, scope.get("admissionMode"), "spec.admissionScope.admissionMode", _ADMISSION_MODE)
    return errs.items


def validate_cohort(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs = Errors()
    check_metadata(errs, obj)
    spec = mapping(errs, obj.get("spec"), "spec")
    parent = reference(errs, spec.get("parentName"), "spec.parentName")
    check_fair_sharing(errs, spec.get("fairSharing"), "spec.fairSharing")
    if spec.get("admissionScope") is not None:
        # KEP-4136 sketches a Cohort scope but leaves it undefined (Kueue has none, #9734);
        # accepting it would silently mean nothing
        errs.forbidden("spec.admissionScope", "admission fair sharing is scoped to a ClusterQueue only; "
                       "kueued has no Cohort-level admissionScope: set spec.admissionScope on the Cohort's "
                       "ClusterQueues instead")
    _resource_groups(errs, spec.get("resourceGroups"), "spec.resourceGroups",
                     has_parent=bool(parent or spec.get("parentName")), is_cohort=True)
    return errs.items


def check_fair_sharing(errs: Errors, value: object, path: str, *, webhook: bool = True) -> None:
    """``FairSharing.weight``: a quantity; the webhook wants 0 or more than 1e-9."""
    if value is None:
        return
    fs = mapping(errs, value, path)
    weight_path = child(path, "weight")
    weight = quantity(errs, fs.get("weight"), weight_path, non_negative=webhook)
    if webhook and weight is not None and 0 < weight <= _ONE_NANO:
        errs.invalid(weight_path, fs.get("weight"), "When not 0, weight must be > 10e-9")


# ---- resource groups ---------------------------------------------------------------------------

def _resource_groups(errs: Errors, value: object, path: str, *, has_parent: bool, is_cohort: bool) -> None:
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, raw in enumerate(sequence(errs, value, path, max_items=MAX_RESOURCE_GROUPS)):
        rg_path = index(path, i)
        rg = mapping(errs, raw, rg_path)
        covered_path = child(rg_path, "coveredResources")
        if rg.get("coveredResources") is None:
            errs.required(covered_path)
        covered: list[str] = []
        for j, name in enumerate(sequence(errs, rg.get("coveredResources"), covered_path,
                                          max_items=MAX_PER_GROUP, min_items=1)):
            p = index(covered_path, j)
            text = string(errs, name, p)
            if text is None:
                continue
            covered.append(text)
            for msg in qualified_name_errors(text):
                errs.invalid(p, text, msg)
            if text in seen_resources:
                errs.duplicate(p, text)
            seen_resources.add(text)
        flavors_path = child(rg_path, "flavors")
        if rg.get("flavors") is None:
            errs.required(flavors_path)
        flavors = sequence(errs, rg.get("flavors"), flavors_path, max_items=MAX_PER_GROUP, min_items=1)
        sizes_match = True
        for j, fq_raw in enumerate(flavors):
            fq_path = index(flavors_path, j)
            fq = mapping(errs, fq_raw, fq_path)
            name = fq.get("name")
            if name is None:
                errs.required(child(fq_path, "name"))
            elif reference(errs, name, child(fq_path, "name")) is not None:
                if name in seen_flavors:
                    errs.duplicate(child(fq_path, "name"), name)
                seen_flavors.add(name)
            resources = fq.get("resources")
            if isinstance(resources, list) and len(resources) != len(covered):
                sizes_match = False
            _flavor_quotas(errs, fq, covered, fq_path, has_parent=has_parent, is_cohort=is_cohort)
        if not sizes_match and rg.get("coveredResources") is not None:
            errs.invalid(rg_path, rg,
                         "flavors must have the same number of resources as the coveredResources")


def _flavor_quotas(errs: Errors, fq: dict[str, Any], covered: list[str], path: str, *,
                   has_parent: bool, is_cohort: bool) -> None:
    resources_path = child(path, "resources")
    if fq.get("resources") is None:
        errs.required(resources_path)
    seen: set[str] = set()
    for k, raw in enumerate(sequence(errs, fq.get("resources"), resources_path,
                                     max_items=MAX_PER_GROUP, min_items=1)):
        rq_path = index(resources_path, k)
        rq = mapping(errs, raw, rq_path)
        name = string(errs, rq.get("name"), child(rq_path, "name"))
        if name is None and rq.get("name") is None:
            errs.required(child(rq_path, "name"))
        elif name is not None:
            if name in seen:
                errs.duplicate(rq_path, {"name": name})
            seen.add(name)
            if k < len(covered) and name != covered[k]:
                errs.invalid(child(rq_path, "name"), name, "must match the name in coveredResources")
        if rq.get("nominalQuota") is None:
            errs.required(child(rq_path, "nominalQuota"))
        nominal = quantity(errs, rq.get("nominalQuota"), child(rq_path, "nominalQuota"), non_negative=True)
        parent_word = "parent" if is_cohort else "cohort"
        for limit_name in ("borrowingLimit", "lendingLimit"):
            raw_limit = rq.get(limit_name)
            if raw_limit is None:
                continue
            limit_path = child(rq_path, limit_name)
            limit = quantity(errs, raw_limit, limit_path, non_negative=True)
            if limit is None:
                continue
            if not has_parent:
                errs.invalid(limit_path, raw_limit, f"must be nil when {parent_word} is empty")
            if limit_name == "lendingLimit" and not is_cohort and nominal is not None and limit > nominal:
                errs.invalid(limit_path, raw_limit, f"must be less than or equal to the nominalQuota "
                             f"({raw_limit} > {rq.get('nominalQuota')})")


# ---- policies ----------------------------------------------------------------------------------

def _flavor_fungibility(errs: Errors, value: object, path: str) -> None:
    if value is None:
        return
    ff = mapping(errs, value, path)
    borrow = enum(errs, ff.get("whenCanBorrow"), child(path, "whenCanBorrow"), _FUNGIBILITY)
    preempt = enum(errs, ff.get("whenCanPreempt"), child(path, "whenCanPreempt"), _FUNGIBILITY)
    preference = enum(errs, ff.get("preference"), child(path, "preference"), _PREFERENCE)
    borrow = borrow or ("MayStopSearch" if ff.get("whenCanBorrow") is None else None)
    preempt = preempt or ("TryNextFlavor" if ff.get("whenCanPreempt") is None else None)
    if preference is not None and borrow is not None and preempt is not None \
            and (borrow, preempt) != ("TryNextFlavor", "TryNextFlavor"):
        errs.invalid(child(path, "preference"), preference,
                     f'preference "{preference}" requires both whenCanBorrow and whenCanPreempt '
                     "to be TryNextFlavor")


def _preemption(errs: Errors, value: object, path: str) -> None:
    if value is None:
        return
    pre = mapping(errs, value, path)
    reclaim = enum(errs, pre.get("reclaimWithinCohort"), child(path, "reclaimWithinCohort"), _RECLAIM)
    enum(errs, pre.get("withinClusterQueue"), child(path, "withinClusterQueue"), _WITHIN_CQ)
    bwc_path = child(path, "borrowWithinCohort")
    bwc = mapping(errs, pre.get("borrowWithinCohort"), bwc_path)
    policy = enum(errs, bwc.get("policy"), child(bwc_path, "policy"), _BORROW)
    integer(errs, bwc.get("maxPriorityThreshold"), child(bwc_path, "maxPriorityThreshold"))
    if pre.get("reclaimWithinCohort") is None:
        reclaim = "Never"
    if reclaim == "Never" and policy is not None and policy != "Never":
        errs.invalid(path, pre, "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")


def _admission_checks_strategy(errs: Errors, value: object, path: str, *, flavors: list[str]) -> None:
    """The list-map schema, then the webhook's rule (validateAdmissionCheckOnFlavors): every
    ``onFlavors`` entry is a flavor of the queue's own resource groups."""
    if value is None:
        return
    strategy = mapping(errs, value, path)
    checks_path = child(path, "admissionChecks")
    if strategy.get("admissionChecks") is None:
        errs.required(checks_path)
    seen: set[str] = set()
    for i, raw in enumerate(sequence(errs, strategy.get("admissionChecks"), checks_path,
                                     max_items=64, min_items=1)):
        p = index(checks_path, i)
        rule = mapping(errs, raw, p)
        list_map_name(errs, rule, p, seen)
        on_path = child(p, "onFlavors")
        flavors_seen: set[str] = set()
        for j, flavor in enumerate(sequence(errs, rule.get("onFlavors"), on_path, max_items=64)):
            text = reference(errs, flavor, index(on_path, j), pattern=DNS1123_SUBDOMAIN)
            if text is not None and text in flavors_seen:
                errs.duplicate(index(on_path, j), text)
            if text is not None:
                flavors_seen.add(text)
                if text not in flavors:
                    errs.not_supported(index(on_path, j), text, flavors)


def _flavor_names(groups: object) -> list[str]:
    """utilqueue.AllFlavors: every flavor named in the resource groups, sorted (Kueue lists them unordered)."""
    rgs = groups if isinstance(groups, list) else []
    return sorted({fq["name"] for rg in rgs for fq in _list(rg, "flavors")
                   if isinstance(fq, dict) and isinstance(fq.get("name"), str)})


MAX_TOTAL = 256
MAX_COMBINATIONS = 512


def _totals(errs: Errors, groups: object, path: str) -> None:
    """validateTotalFlavors, validateTotalCoveredResources, validateFlavorResourceCombinations:
    at most 256 flavors and 256 covered resources across the groups, 512 (flavor, resource)
    pairs in one group."""
    rgs = [rg if isinstance(rg, dict) else {} for rg in groups] if isinstance(groups, list) else []
    flavors = sum(len(_list(rg, "flavors")) for rg in rgs)
    if flavors > MAX_TOTAL:
        errs.invalid(path, flavors, f"total number of flavors across all resourceGroups must be ≤ {MAX_TOTAL}, "
                                    f"got {flavors}")
    covered = sum(len(_list(rg, "coveredResources")) for rg in rgs)
    if covered > MAX_TOTAL:
        errs.invalid(path, covered, "total number of covered resources across all resourceGroups must be "
                                    f"≤ {MAX_TOTAL}, got {covered}")
    for i, rg in enumerate(rgs):
        pairs = sum(len(_list(fq, "resources")) for fq in _list(rg, "flavors"))
        if pairs > MAX_COMBINATIONS:
            errs.invalid(index(path, i), pairs, "number of flavor-resource combinations in a resourceGroup must be "
                                                f"≤ {MAX_COMBINATIONS}, got {pairs}")


def _list(obj: object, name: str) -> list[Any]:
    value = obj.get(name) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []
