"""A Workload's pod-set rules behind Kueue's feature gates (``pkg/features``): a Configuration's
``featureGates`` reach them through ``validate_object(..., feature_gates=)``; a gate it leaves
out takes Kueue's default.  They run outside the remembered pod-set verdicts, whose key is the
pod sets' content alone."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .fields import Errors, child, index
from .names import annotation_map, dns_subdomain_errors, labels

__all__ = [
    "gated_pod_sets", "gated_annotations", "enabled", "boost_of", "GATE_SLICE_SIZE", "GATE_POD_SET_METADATA",
    "GATE_ADMISSION_GATED_BY", "GATE_PRIORITY_BOOST", "GATE_NON_NEGATIVE", "GATE_ELASTIC_JOBS",
    "ADMISSION_GATED_BY", "PRIORITY_BOOST"
]

GATE_SLICE_SIZE = "TASValidateWorkloadSliceSize"
GATE_POD_SET_METADATA = "WorkloadValidationForPodSetMetadata"
GATE_ADMISSION_GATED_BY = "AdmissionGatedBy"
GATE_PRIORITY_BOOST = "PriorityBoost"
GATE_NON_NEGATIVE = "WorkloadValidateResourcesAreNonNegative"
GATE_ELASTIC_JOBS = "ElasticJobsViaWorkloadSlices"
_GATE_DEFAULTS = {GATE_SLICE_SIZE: True, GATE_POD_SET_METADATA: True, GATE_ADMISSION_GATED_BY: True,
                  GATE_PRIORITY_BOOST: False, GATE_NON_NEGATIVE: True, GATE_ELASTIC_JOBS: True}
"""Kueue's defaults (``pkg/features/kube_features.go``) for the gates these rules read."""

ADMISSION_GATED_BY = "kueue.x-k8s.io/admission-gated-by"
"""Comma-separated gates (domain-prefixed paths): while any is left, the workload is not admitted."""
PRIORITY_BOOST = "kueue.x-k8s.io/priority-boost"
"""A signed 32-bit integer added to the workload's priority (gate PriorityBoost)."""
_GATE_NAME_MAX = 63  # as spec.managedBy of a Job
_HTTP_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")  # Kubernetes' IsDomainPrefixedPath
_INT32 = re.compile(r"^[+-]?[0-9]+$")


def enabled(gates: Mapping[str, bool], gate: str) -> bool:
    """Whether ``gate`` is on: as a Configuration spelled it, else Kueue's default."""
    return bool(gates[gate]) if gate in gates else _GATE_DEFAULTS[gate]


def gated_annotations(errs: Errors, obj: Mapping[str, Any], old: Mapping[str, Any] | None,
                      gates: Mapping[str, bool]) -> None:
    """Kueue's webhook rules for the annotations behind gates: ``admission-gated-by``
    (``pkg/webhooks/admissiongatedby.go``: well-formed, distinct gates on create; on update
    gates may only be removed, never added) and ``priority-boost`` (an int32)."""
    notes = _annotations(obj)
    if enabled(gates, GATE_ADMISSION_GATED_BY):
        path = f"metadata.annotations[{ADMISSION_GATED_BY}]"
        new = notes.get(ADMISSION_GATED_BY)
        if old is not None:
            _gates_only_removed(errs, path, _annotations(old).get(ADMISSION_GATED_BY), new)
        if isinstance(new, str) and new:
            _gate_names(errs, path, new)
    boost = notes.get(PRIORITY_BOOST)
    if enabled(gates, GATE_PRIORITY_BOOST) and PRIORITY_BOOST in notes and boost_of(boost) is None:
        errs.invalid(f"metadata.annotations[{PRIORITY_BOOST}]", boost, "must be a signed 32-bit integer")


def boost_of(value: object) -> int | None:
    """A ``priority-boost`` annotation's value, as Go's ``strconv.ParseInt(v, 10, 32)`` reads it, or None."""
    if not isinstance(value, str) or not _INT32.match(value):
        return None
    n = int(value)
    return n if -2**31 <= n < 2**31 else None


def _gates_only_removed(errs: Errors, path: str, before: object, after: object) -> None:
    was = before if isinstance(before, str) else ""
    now = after if isinstance(after, str) else ""
    if not was and now:
        errs.forbidden(path, "cannot add admission gate after creation")
    elif was and now and any(gate not in was.split(",") for gate in now.split(",")):
        errs.forbidden(path, "can only remove gates, not add new ones")


def _gate_names(errs: Errors, path: str, value: str) -> None:
    seen: set[str] = set()
    for gate in (g.strip() for g in value.split(",")):
        if not gate:
            errs.invalid(path, value, "cannot contain empty gate names")
            continue
        if gate in seen:
            errs.invalid(path, value, f"duplicate gate name: {gate}")
            continue
        seen.add(gate)
        domain, _, rest = gate.partition("/")
        if not domain or not rest:
            errs.invalid(path, gate, 'must be a domain-prefixed path (such as "acme.io/foo")')
        else:
            for msg in dns_subdomain_errors(domain):
                errs.invalid(path, domain, msg)
            if not _HTTP_PATH.match(rest):
                errs.invalid(path, rest, "Invalid path")
        if len(gate) > _GATE_NAME_MAX:
            errs.too_long(path, gate, _GATE_NAME_MAX)


def _annotations(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    return notes if isinstance(notes, dict) else {}


def gated_pod_sets(errs: Errors, value: object, path: str, gates: Mapping[str, bool]) -> None:
    """The pod-set rules behind feature gates (wrong shapes were reported by :func:`_pod_sets`)."""
    slice_sizes, metadata = enabled(gates, GATE_SLICE_SIZE), enabled(gates, GATE_POD_SET_METADATA)
    if not isinstance(value, list) or not (slice_sizes or metadata):
        return
    for i, ps in enumerate(value):
        if not isinstance(ps, dict):
            continue
        p = index(path, i)
        if slice_sizes and isinstance(ps.get("topologyRequest"), dict):
            _slice_sizes(errs, ps["topologyRequest"], child(p, "topologyRequest"))
        meta = _dict(ps.get("template")).get("metadata")
        if metadata and isinstance(meta, dict):
            meta_path = child(child(p, "template"), "metadata")
            labels(errs, meta.get("labels"), child(meta_path, "labels"))
            annotation_map(errs, meta.get("annotations"), child(meta_path, "annotations"))


def _slice_sizes(errs: Errors, request: dict[str, Any], path: str) -> None:
    """``TASValidateWorkloadSliceSize``: a slice has a required topology and a positive size."""
    size, size_path = request.get("podSetSliceSize"), child(path, "podSetSliceSize")
    if request.get("podSetSliceRequiredTopology") is None:
        if size is not None:
            errs.forbidden(size_path, "may only be set together with podSetSliceRequiredTopology")
    elif size is None:
        errs.required(size_path, "must be set when podSetSliceRequiredTopology is set")
    elif type(size) is int and size < 1:
        errs.invalid(size_path, size, "must be greater than 0")
    constraints = request.get("podsetSliceRequiredTopologyConstraints")
    list_path = child(path, "podsetSliceRequiredTopologyConstraints")
    for i, constraint in enumerate(constraints if isinstance(constraints, list) else []):
        size = _dict(constraint).get("size")
        if type(size) is int and size < 1:
            errs.invalid(child(index(list_path, i), "size"), size, "must be greater than 0")


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
