"""Workload: pod sets, queue and priority references, and what freezes once quota is held.

On create, three layers speak (``apis/kueue/v1beta2/workload_types.go`` and
``pkg/webhooks/workload_webhook.go``):

- schema: 1..18 pod sets, a list-map keyed by ``name`` (default ``main``, a DNS label),
  ``count >= 0`` (default 1), ``minCount >= 1``, queue/priority-class names as object
  names, ``maximumExecutionTimeSeconds >= 1``, quantities in the int-or-string pattern;
- CEL: ``minCount <= count``; a ``priorityClassRef`` needs ``priority`` and a matching
  group/kind pair; a workload holding quota has one assignment per pod set;
- webhook: at most one pod set uses ``minCount``; no container (or pod-level resources)
  may request or limit the ``pods`` resource, which Kueue counts itself, nor a negative
  amount (``WorkloadValidateResourcesAreNonNegative``, on by default); assignments name
  real pod sets and their usage divides evenly by their pod count; reclaimable pods name
  real pod sets and never exceed their count; a workload holding quota (``QuotaReserved=True``)
  has an admission; an admission check's ``podSetUpdates`` name real pod sets and carry
  labels, node selectors, annotations and tolerations Kubernetes would accept;
- gated webhook rules (``pkg/features``; a Configuration's ``featureGates`` reach them through
  ``validate_object(..., feature_gates=)``): ``TASValidateWorkloadSliceSize`` (on by default) wants
  ``podSetSliceSize >= 1`` exactly when ``podSetSliceRequiredTopology`` is set and every
  ``podsetSliceRequiredTopologyConstraints`` size ``>= 1``;
  ``WorkloadValidationForPodSetMetadata`` (on by default) checks the pod templates' labels
  and annotations.

On update the previous accepted version matters.  While the old version holds a quota
reservation (condition ``QuotaReserved=True``) its pod sets are frozen except that a
count may shrink (``ElasticJobsViaWorkloadSlices``, on by default), and while both versions hold it the
queue name, the priority-class reference and reclaimable counts may not go back.  An
admission, once set, can be cleared but not edited, and an admission check that is ``Ready``
in both versions keeps its ``podSetUpdates``.  A workload already holding quota without an
admission may still be updated (so that it can be removed).  Quantities compare by value, so
``"1000m"`` re-applied as ``"1"`` is no change.

The update rules live in :mod:`.workload_update`.

The pod sets' verdict depends on the pod sets alone (their paths are fixed, they name no
object), so it is remembered by content (:data:`_POD_SETS`, with the pod-set counts the
status checks need), and so are pod templates, for pod sets that differ only in a count or
a name.  Not the whole spec: its queue name differs per LocalQueue, and a thousand queues
times a few shapes overflowed a memo of specs.  The rest of the spec (queue, priority,
active, execution time), the metadata, the status and the update rules are checked for
every object, and so are the gated pod-set rules (:func:`_gated_pod_sets`): their verdict
depends on the gates too, and they read only a few fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kueued.errors import FieldError

from .admission_checks import admission_checks
from .fields import Errors, boolean, child, enum, index, integer, key, list_map_name, mapping, sequence, string
from .memo import VerdictMemo
from .meta import check_metadata
from .names import DNS1123_LABEL, NEGATIVE, date_time, quantity, reference
from .workload_gates import GATE_ELASTIC_JOBS, GATE_NON_NEGATIVE, enabled, gated_annotations, gated_pod_sets
from .workload_update import has_condition, validate_update

__all__ = ["validate_workload", "has_condition"]

MAX_POD_SETS = 18
"""``MaxItems`` on podSets and the podSet-indexed lists.  Kueue raised it 8 -> 10 (kueue#11388)
-> 18 (kueue#12819, v1beta1 and v1beta2 alike); sources and docs that say 8 predate both."""

_PRIORITY_GROUPS = ("kueue.x-k8s.io", "scheduling.k8s.io")
_PRIORITY_KINDS = ("WorkloadPriorityClass", "PriorityClass")


def validate_workload(obj: dict[str, Any], old: dict[str, Any] | None, *,
                      feature_gates: Mapping[str, bool] | None = None) -> list[FieldError]:
    """``feature_gates``: what a Configuration spelled out; the rest take Kueue's defaults."""
    errs = Errors()
    check_metadata(errs, obj, namespaced=True)
    counts, n_pod_sets = _check_spec(errs, obj.get("spec"), "spec")  # counts: shared, read-only
    gated_pod_sets(errs, _dict(obj.get("spec")).get("podSets"), "spec.podSets", feature_gates or {})
    gated_annotations(errs, obj, old, feature_gates or {})
    if not enabled(feature_gates or {}, GATE_NON_NEGATIVE):  # the remembered verdicts always check it
        errs.items = [e for e in errs.items if not (e.reason.endswith(NEGATIVE) and ".resources." in e.path)]
    status = mapping(errs, obj.get("status"), "status")
    if status:  # a new workload has none: no conditions, admission or reclaimable pods
        _conditions(errs, status.get("conditions"), "status.conditions")
        if has_condition(obj, "QuotaReserved"):
            if status.get("admission") is not None:
                _admission(errs, status.get("admission"), "status.admission", counts, n_pod_sets)
            elif not _reserved_without_admission(old):  # else let it be updated, so it can be removed
                errs.required("status.admission", "a workload with condition QuotaReserved=True "
                              "must have an admission")
        _reclaimable_pods(errs, status.get("reclaimablePods"), "status.reclaimablePods", counts)
        admission_checks(errs, status.get("admissionChecks"), "status.admissionChecks", counts)
    if old is not None:
        validate_update(errs, obj, old, scale_down=enabled(feature_gates or {}, GATE_ELASTIC_JOBS))
    return errs.items


def _reserved_without_admission(obj: dict[str, Any] | None) -> bool:
    return has_condition(obj, "QuotaReserved") and _dict(_dict(obj).get("status")).get("admission") is None


# ---- spec ---------------------------------------------------------------------------------

def _check_spec(errs: Errors, value: object, path: str) -> tuple[dict[str, int], int]:
    """Check the spec; return the pod-set counts by (defaulted) name and the number of pod
    sets, for the status checks."""
    spec = mapping(errs, value, path)
    counts = _POD_SETS(errs, spec.get("podSets"), "spec.podSets")
    n_pod_sets = len(spec["podSets"]) if isinstance(spec.get("podSets"), list) else 0
    reference(errs, spec.get("queueName"), "spec.queueName")
    _priority(errs, spec)
    boolean(errs, spec.get("active"), "spec.active")
    integer(errs, spec.get("maximumExecutionTimeSeconds"), "spec.maximumExecutionTimeSeconds", minimum=1)
    return counts, n_pod_sets


def _pod_sets(errs: Errors, value: object, path: str) -> dict[str, int]:
    """Check the pod sets; return their counts by (defaulted) name."""
    if value is None:
        errs.required(path, "at least one podSet is required")
    counts: dict[str, int] = {}
    with_min_count = 0
    for i, raw in enumerate(sequence(errs, value, path, max_items=MAX_POD_SETS, min_items=1)):
        p = index(path, i)
        ps = mapping(errs, raw, p)
        name = ps.get("name", "main")
        if reference(errs, name, child(p, "name"), max_length=63, pattern=DNS1123_LABEL) is not None:
            if name in counts:
                errs.duplicate(p, {"name": name})
        count = integer(errs, ps.get("count"), child(p, "count"), minimum=0)
        count = 1 if ps.get("count") is None else count
        if isinstance(name, str) and count is not None:
            counts.setdefault(name, count)
        min_count = integer(errs, ps.get("minCount"), child(p, "minCount"), minimum=1)
        if ps.get("minCount") is not None:
            with_min_count += 1
            if min_count is not None and count is not None and min_count > count:
                errs.invalid(p, ps, "minCount should be positive and less or equal to count")
        _topology_request(errs, ps.get("topologyRequest"), child(p, "topologyRequest"))
        if ps.get("template") is None:
            errs.required(child(p, "template"))
        _TEMPLATES(errs, ps.get("template"), child(p, "template"))
    if with_min_count > 1:
        errs.invalid(path, with_min_count, "at most one podSet can use minCount")
    return counts


_TOPOLOGY_STRINGS = {"required": 63, "preferred": 63, "podSetSliceRequiredTopology": 63,
                     "podIndexLabel": 317, "subGroupIndexLabel": 317, "podSetGroupName": 256}


def _topology_request(errs: Errors, value: object, path: str) -> None:
    request = mapping(errs, value, path)
    for field, limit in _TOPOLOGY_STRINGS.items():
        string(errs, request.get(field), child(path, field), max_length=limit)
    boolean(errs, request.get("unconstrained"), child(path, "unconstrained"))
    for field in ("subGroupCount", "podSetSliceSize"):
        integer(errs, request.get(field), child(path, field))
    list_path = child(path, "podsetSliceRequiredTopologyConstraints")
    for i, raw in enumerate(sequence(errs, request.get("podsetSliceRequiredTopologyConstraints"),
                                     list_path, max_items=3)):
        p = index(list_path, i)
        constraint = mapping(errs, raw, p)
        if constraint.get("topology") is None:
            errs.required(child(p, "topology"))
        string(errs, constraint.get("topology"), child(p, "topology"), max_length=63, min_length=1)
        integer(errs, constraint.get("size"), child(p, "size"))


def _check_template(errs: Errors, value: object, path: str) -> None:
    template = mapping(errs, value, path)
    spec_path = child(path, "spec")
    if template.get("spec") is None:
        return
    pod = mapping(errs, template.get("spec"), spec_path)
    if pod.get("containers") is None:
        errs.required(child(spec_path, "containers"))
    for field in ("initContainers", "containers"):
        list_path = child(spec_path, field)
        for i, raw in enumerate(sequence(errs, pod.get(field), list_path)):
            p = index(list_path, i)
            container = mapping(errs, raw, p)
            if container.get("name") is None:
                errs.required(child(p, "name"))
            string(errs, container.get("name"), child(p, "name"))
            _resources(errs, container.get("resources"), child(p, "resources"))
    _resources(errs, pod.get("resources"), child(spec_path, "resources"))


def _resources(errs: Errors, value: object, path: str) -> None:
    resources = mapping(errs, value, path)
    for field in ("requests", "limits"):
        list_path = child(path, field)
        for name, amount in mapping(errs, resources.get(field), list_path).items():
            p = key(list_path, str(name))
            if name == "pods":
                errs.invalid(p, "pods", "the key is reserved for internal kueue use")
            quantity(errs, amount, p, non_negative=True)  # unless WorkloadValidateResourcesAreNonNegative is off


# A batch system submits the same few specs over and over (Kueue's large-scale run: 3,000
# specs, 50,000 workloads) and checking them was most of what validating a Workload cost;
# specs that differ in a detail (a count, a time limit) still share a few pod templates.
_POD_SETS: VerdictMemo[dict[str, int]] = VerdictMemo(_pod_sets, maxsize=4096)
_TEMPLATES: VerdictMemo[None] = VerdictMemo(_check_template, maxsize=4096)


def _priority(errs: Errors, spec: dict[str, Any]) -> None:
    integer(errs, spec.get("priority"), "spec.priority")
    if spec.get("priorityClassRef") is None:
        return
    path = "spec.priorityClassRef"
    ref = mapping(errs, spec.get("priorityClassRef"), path)
    for field, allowed in (("group", _PRIORITY_GROUPS), ("kind", _PRIORITY_KINDS)):
        if ref.get(field) is None:
            errs.required(child(path, field))
        enum(errs, ref.get(field), child(path, field), allowed)
    if ref.get("name") is None:
        errs.required(child(path, "name"))
    reference(errs, ref.get("name"), child(path, "name"))
    group, kind = ref.get("group"), ref.get("kind")
    if group == "scheduling.k8s.io" and kind != "PriorityClass":
        errs.invalid(path, ref, "only the PriorityClass kind is allowed for the scheduling.k8s.io group")
    if group == "kueue.x-k8s.io" and kind != "WorkloadPriorityClass":
        errs.invalid(path, ref, "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group")
    if spec.get("priority") is None:
        errs.invalid("spec", spec, "priority should not be nil when priorityClassRef is set")


# ---- status -------------------------------------------------------------------------------

def _conditions(errs: Errors, value: object, path: str) -> None:
    seen: set[str] = set()
    for i, raw in enumerate(sequence(errs, value, path, max_items=16)):
        p = index(path, i)
        cond = mapping(errs, raw, p)
        list_map_name(errs, cond, p, seen, field="type", max_length=None, min_length=None)
        enum(errs, cond.get("status"), child(p, "status"), ("True", "False", "Unknown"))
        date_time(errs, cond.get("lastTransitionTime"), child(p, "lastTransitionTime"))


def _admission(errs: Errors, value: object, path: str, counts: dict[str, int], n_pod_sets: int) -> None:
    admission = mapping(errs, value, path)
    reference(errs, admission.get("clusterQueue"), child(path, "clusterQueue"))
    psa_path = child(path, "podSetAssignments")
    assignments = sequence(errs, admission.get("podSetAssignments"), psa_path, max_items=MAX_POD_SETS)
    if len(assignments) != n_pod_sets:
        errs.invalid(psa_path, len(assignments), "podSetAssignments must have the same number of "
                     f"podSets as the spec ({len(assignments)} != {n_pod_sets})")
    seen: set[str] = set()
    for i, raw in enumerate(assignments):
        p = index(psa_path, i)
        psa = mapping(errs, raw, p)
        name = psa.get("name", "main")
        if reference(errs, name, child(p, "name"), max_length=63, pattern=DNS1123_LABEL) is not None:
            if name not in counts:
                errs.not_found(child(p, "name"), name)
            if name in seen:
                errs.duplicate(p, {"name": name})
            seen.add(name)
        for resource, flavor in mapping(errs, psa.get("flavors"), child(p, "flavors")).items():
            reference(errs, flavor, key(child(p, "flavors"), str(resource)))
        count = integer(errs, psa.get("count"), child(p, "count"), minimum=0)
        enum(errs, psa.get("delayedTopologyRequest"), child(p, "delayedTopologyRequest"), ("Pending", "Ready"))
        usage_path = child(p, "resourceUsage")
        for resource, amount in mapping(errs, psa.get("resourceUsage"), usage_path).items():
            q = quantity(errs, amount, key(usage_path, str(resource)))
            if q is None or not count:
                continue
            # Kueue's resources.ResourceValue: cpu in milli-units, the rest in units, rounded up.
            whole = math.ceil(q * 1000) if resource == "cpu" else math.ceil(q)
            if whole % count:
                errs.invalid(key(usage_path, str(resource)), amount, f"is not a multiple of {count}")


def _reclaimable_pods(errs: Errors, value: object, path: str, counts: dict[str, int]) -> None:
    for i, raw in enumerate(sequence(errs, value, path, max_items=MAX_POD_SETS)):
        rp = mapping(errs, raw, index(path, i))
        name = string(errs, rp.get("name"), child(index(path, i), "name"))
        if name is None:
            errs.required(child(index(path, i), "name"))
            continue
        count = integer(errs, rp.get("count"), child(key(path, name), "count"), minimum=0)
        if name not in counts:
            errs.not_supported(child(key(path, name), "name"), name, sorted(counts))
        elif count is not None and count > counts[name]:
            errs.invalid(child(key(path, name), "count"), count, f"should be less or equal to {counts[name]}")


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
