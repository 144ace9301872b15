"""A Workload's pod-set rules behind Kueue's feature gates (``pkg/features``): a Configuration's
``featureGates`` reach them through ``validate_object(..., feature_gates=)``; a gate it leaves
out takes Kueue's default.  They run outside the remembered pod-set verdicts, whose key is the
pod sets' content alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .fields import Errors, child, index
from .names import annotation_map, labels

__all__ = ["gated_pod_sets", "GATE_SLICE_SIZE", "GATE_POD_SET_METADATA"]

GATE_SLICE_SIZE = "TASValidateWorkloadSliceSize"
GATE_POD_SET_METADATA = "WorkloadValidationForPodSetMetadata"
_GATE_DEFAULTS = {GATE_SLICE_SIZE: True, GATE_POD_SET_METADATA: True}
"""Kueue's defaults (``pkg/features/kube_features.go``) for the gates these rules read."""


def _enabled(gates: Mapping[str, bool], gate: str) -> bool:
    return bool(gates[gate]) if gate in gates else _GATE_DEFAULTS[gate]


def gated_pod_sets(errs: Errors, value: object, path: str, gates: Mapping[str, bool]) -> None:
    """The pod-set rules behind feature gates (wrong shapes were reported by :func:`_pod_sets`)."""
    slice_sizes, metadata = _enabled(gates, GATE_SLICE_SIZE), _enabled(gates, GATE_POD_SET_METADATA)
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
