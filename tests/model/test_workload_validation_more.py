"""Workload rules ported from Kueue's workload webhook: podSetUpdates, quota without an
admission, TAS slice sizes and pod-template metadata (with their feature gates).

Each case asserts the exact field paths refused; the reasons are read where the wording
is the point (a Required error, an immutable field).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueued.errors import FieldError
from kueued.model.validation import validate_object
from kueued.model.validation.workload import validate_workload

from .test_validation import paths, pod_set, reserved, workload

Obj = dict[str, Any]

PS0 = "spec.podSets[0]"
TR0 = f"{PS0}.topologyRequest"
AC0 = "status.admissionChecks[0]"
PSU0 = f"{AC0}.podSetUpdates[0]"
PSU1 = f"{AC0}.podSetUpdates[1]"
FIRST_SECOND = [pod_set("first"), pod_set("second")]


def check(*updates: Obj, name: str = "check", state: str = "Ready", **fields: Any) -> Obj:
    """One admission check state carrying ``updates`` as its podSetUpdates."""
    return {"name": name, "state": state, "message": "", "lastTransitionTime": "2026-01-01T00:00:20Z",
            "podSetUpdates": list(updates), **fields}


def with_checks(wl: Obj, *checks: Obj) -> Obj:
    wl = copy.deepcopy(wl)
    wl.setdefault("status", {})["admissionChecks"] = list(checks)
    return wl


def quota_reserved_without_admission(wl: Obj) -> Obj:
    wl = copy.deepcopy(wl)
    wl["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "AdmittedByTest",
                                    "message": "admitted", "lastTransitionTime": "2026-01-01T00:00:10Z"}]}
    return wl


def with_metadata(**meta: Any) -> Obj:
    ps = pod_set("bad-metadata")
    ps["template"]["metadata"] = meta
    return workload(pod_sets=[ps])


def slice_request(**request: Any) -> Obj:
    return workload(pod_sets=[pod_set("main", topologyRequest=request)])


def reasons(errors: list[FieldError], path: str) -> list[str]:
    return [e.reason for e in errors if e.path == path]


# ---- status.admissionChecks[].podSetUpdates ---------------------------------------------------

@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(with_checks(workload(), {"name": "check", "state": "Ready"}), set(), id="no-pod-set-updates"),
    pytest.param(with_checks(workload(pod_sets=FIRST_SECOND), check({"name": "first"})), set(),
                 id="updates-for-a-subset-of-pod-sets"),
    pytest.param(with_checks(workload(pod_sets=FIRST_SECOND), check(
        {"name": "first", "labels": {"l1": "first"}, "annotations": {"foo": "bar"}, "nodeSelector": {"type": "first"},
         "tolerations": [{"key": "t1", "operator": "Equal", "value": "t1v", "effect": "NoExecute",
                          "tolerationSeconds": 5}]},
        {"name": "second", "labels": {"l2": "second"}, "annotations": {"foo": "baz"},
         "nodeSelector": {"type": "second"}})), set(), id="matched-names"),
    pytest.param(with_checks(workload(pod_sets=FIRST_SECOND), check({"name": "first"}, {"name": "third"})),
                 {f"{PSU1}.name"}, id="unknown-pod-set"),
    pytest.param(with_checks(workload(), check({"name": "main", "labels": {"@abc": "foo"}})),
                 {f"{PSU0}.labels"}, id="invalid-label-name"),
    pytest.param(with_checks(workload(), check({"name": "main", "labels": {"foo": "@abc"}})),
                 {f"{PSU0}.labels"}, id="invalid-label-value"),
    pytest.param(with_checks(workload(), check({"name": "main", "nodeSelector": {"@abc": "foo"}})),
                 {f"{PSU0}.nodeSelector"}, id="invalid-node-selector-name"),
    pytest.param(with_checks(workload(), check({"name": "main", "nodeSelector": {"foo": "a b"}})),
                 {f"{PSU0}.nodeSelector"}, id="invalid-node-selector-value"),
    pytest.param(with_checks(workload(), check({"name": "main", "annotations": {"a/b/c": "v"}})),
                 {f"{PSU0}.annotations"}, id="invalid-annotation-key"),
    pytest.param(with_checks(workload(), check({"name": "main", "tolerations": [{"key": "@abc",
                                                                                  "operator": "Exists"}]})),
                 {f"{PSU0}.tolerations[0].key"}, id="invalid-toleration-key"),
    pytest.param(with_checks(workload(), check({"name": "main", "tolerations": [{"operator": "Equal"}]})),
                 {f"{PSU0}.tolerations"}, id="toleration-without-key-must-be-exists"),
    pytest.param(with_checks(workload(), check({"name": "main", "tolerations": [
        {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]})),
        {f"{PSU0}.tolerations"}, id="toleration-seconds-without-no-execute"),
    pytest.param(with_checks(workload(), check({"labels": {"a": "b"}})), {f"{PSU0}.name"}, id="update-without-name"),
    pytest.param(with_checks(workload(), check(name="a"), check(name="a")), {"status.admissionChecks[1]"},
                 id="duplicate-check-names"),
    pytest.param(with_checks(workload(), check(state="Done")), {f"{AC0}.state"}, id="unknown-check-state"),
    pytest.param(with_checks(workload(), {"state": "Ready"}), {f"{AC0}.name"}, id="check-without-name"),
    pytest.param(with_checks(workload(), *[check(name=f"c{i}") for i in range(9)]), {"status.admissionChecks"},
                 id="nine-checks"),
])
def test_admission_checks(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


def test_unknown_pod_set_update_lists_the_pod_sets() -> None:
    obj = with_checks(workload(pod_sets=FIRST_SECOND), check({"name": "third"}))
    assert reasons(validate_object(obj), f"{PSU0}.name") == [
        'Unsupported value: "third": supported values: "first", "second"']


# ---- podSetUpdates are frozen while the check is Ready ----------------------------------------

BEFORE = with_checks(workload(pod_sets=FIRST_SECOND),
                     check({"name": "first", "labels": {"foo": "bar"}}, {"name": "second"}, name="ac1", message="old"))


def _edited(state: str = "Ready", old_state: str = "Ready", **first: Any) -> tuple[Obj, Obj]:
    old = copy.deepcopy(BEFORE)
    old["status"]["admissionChecks"][0]["state"] = old_state
    new = copy.deepcopy(BEFORE)
    new["status"]["admissionChecks"][0]["state"] = state
    new["status"]["admissionChecks"][0]["podSetUpdates"][0].update(first)
    return old, new


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param(*_edited(labels={"foo": "baz"}), {f"{AC0}.podSetUpdates"}, id="ready-updates-edited"),
    pytest.param(*_edited(old_state="Pending", labels={"foo": "baz"}), set(), id="becomes-ready"),
    pytest.param(*_edited(state="Retry", labels={"foo": "baz"}), set(), id="leaves-ready"),
    pytest.param(*_edited(), set(), id="unchanged"),
    pytest.param(*_edited(annotations={}, tolerations=[]), set(), id="empty-fields-are-absent-fields"),
    pytest.param(BEFORE, with_checks(BEFORE, {**BEFORE["status"]["admissionChecks"][0], "message": "new",
                                              "lastTransitionTime": "2026-01-01T00:00:40Z"}),
                 set(), id="other-fields-mutable"),
    pytest.param(BEFORE, with_checks(BEFORE, check(name="ac2")), set(), id="check-replaced"),
])
def test_pod_set_updates_frozen_when_ready(old: Obj, new: Obj, expected: set[str]) -> None:
    assert paths(validate_workload(new, old)) == expected


def test_frozen_pod_set_updates_reason() -> None:
    old, new = _edited(labels={"foo": "baz"})
    assert reasons(validate_workload(new, old), f"{AC0}.podSetUpdates") == [
        'Invalid value: "array": field is immutable']


# ---- QuotaReserved needs an admission ---------------------------------------------------------

def test_quota_reserved_without_admission_is_refused() -> None:
    errors = validate_object(quota_reserved_without_admission(workload()))
    assert paths(errors) == {"status.admission"}
    assert reasons(errors, "status.admission")[0].startswith("Required value")


def test_update_into_quota_reserved_without_admission_is_refused() -> None:
    new = quota_reserved_without_admission(workload())
    assert paths(validate_workload(new, workload())) == {"status.admission"}


def test_a_workload_already_reserved_without_admission_stays_updatable() -> None:
    old = quota_reserved_without_admission(workload())
    old["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    assert validate_workload(quota_reserved_without_admission(workload()), old) == []


def test_losing_the_admission_while_reserved_is_refused() -> None:
    running = reserved(workload())
    assert paths(validate_workload(quota_reserved_without_admission(workload()), running)) == {"status.admission"}


# ---- TAS slice sizes (TASValidateWorkloadSliceSize) -------------------------------------------

HOST = "kubernetes.io/hostname"


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(slice_request(podSetSliceRequiredTopology=HOST, podSetSliceSize=2), set(), id="valid-slice"),
    pytest.param(slice_request(podSetSliceRequiredTopology=HOST, podSetSliceSize=0),
                 {f"{TR0}.podSetSliceSize"}, id="zero-slice-size"),
    pytest.param(slice_request(podSetSliceRequiredTopology=HOST, podSetSliceSize=-3),
                 {f"{TR0}.podSetSliceSize"}, id="negative-slice-size"),
    pytest.param(slice_request(podSetSliceSize=1), {f"{TR0}.podSetSliceSize"}, id="slice-size-without-topology"),
    pytest.param(slice_request(podSetSliceRequiredTopology=HOST), {f"{TR0}.podSetSliceSize"},
                 id="topology-without-slice-size"),
    pytest.param(slice_request(podsetSliceRequiredTopologyConstraints=[{"topology": HOST, "size": 0}]),
                 {f"{TR0}.podsetSliceRequiredTopologyConstraints[0].size"}, id="constraint-size-zero"),
    pytest.param(slice_request(podsetSliceRequiredTopologyConstraints=[{"topology": "rack", "size": 4},
                                                                       {"topology": HOST, "size": 2}]),
                 set(), id="valid-constraints"),
    pytest.param(slice_request(podsetSliceRequiredTopologyConstraints=[{"size": 2}]),
                 {f"{TR0}.podsetSliceRequiredTopologyConstraints[0].topology"}, id="constraint-without-topology"),
    pytest.param(slice_request(podsetSliceRequiredTopologyConstraints=[{"topology": HOST, "size": 1}] * 4),
                 {f"{TR0}.podsetSliceRequiredTopologyConstraints"}, id="four-constraints"),
    pytest.param(slice_request(podSetSliceRequiredTopology=HOST, podSetSliceSize="2"),
                 {f"{TR0}.podSetSliceSize"}, id="string-slice-size"),
])
def test_slice_sizes(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


def test_slice_size_reasons() -> None:
    path = f"{TR0}.podSetSliceSize"
    assert reasons(validate_object(slice_request(podSetSliceSize=1)), path)[0].startswith("Forbidden")
    assert reasons(validate_object(slice_request(podSetSliceRequiredTopology=HOST)), path)[0].startswith(
        "Required value")
    assert reasons(validate_object(slice_request(podSetSliceRequiredTopology=HOST, podSetSliceSize=0)), path) == [
        "Invalid value: 0: must be greater than 0"]


@pytest.mark.parametrize("obj", [
    pytest.param(slice_request(podSetSliceRequiredTopology=HOST, podSetSliceSize=0), id="zero-slice-size"),
    pytest.param(slice_request(podSetSliceSize=1), id="slice-size-without-topology"),
    pytest.param(slice_request(podsetSliceRequiredTopologyConstraints=[{"topology": HOST, "size": 0}]),
                 id="constraint-size-zero"),
])
def test_slice_sizes_gate_off(obj: Obj) -> None:
    assert validate_object(obj, feature_gates={"TASValidateWorkloadSliceSize": False}) == []


# ---- pod template metadata (WorkloadValidationForPodSetMetadata) ------------------------------

META = f"{PS0}.template.metadata"
BAD_META = with_metadata(labels={"valid": "invalid value with spaces, test-wec1"},
                         annotations={"invalid/annotation/key/too/long/invalid": "val"})


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(with_metadata(labels={"valid": "invalid value with spaces"}), {f"{META}.labels"},
                 id="invalid-label-value"),
    pytest.param(with_metadata(labels={"@abc": "v"}), {f"{META}.labels"}, id="invalid-label-key"),
    pytest.param(with_metadata(annotations={"invalid/annotation/key/too/long/invalid": "val"}),
                 {f"{META}.annotations"}, id="invalid-annotation-key"),
    pytest.param(with_metadata(labels={"app": "web"}, annotations={"example.com/note": "any text at all"}), set(),
                 id="valid-metadata"),
    pytest.param(BAD_META, {f"{META}.labels", f"{META}.annotations"}, id="both"),
])
def test_pod_template_metadata(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


def test_pod_template_metadata_gate_off() -> None:
    assert validate_object(BAD_META, feature_gates={"WorkloadValidationForPodSetMetadata": False}) == []


def test_pod_template_metadata_gate_on_explicitly() -> None:
    gates = {"WorkloadValidationForPodSetMetadata": True, "TASValidateWorkloadSliceSize": False}
    assert paths(validate_object(BAD_META, feature_gates=gates)) == {f"{META}.labels", f"{META}.annotations"}


def test_pod_template_metadata_on_update() -> None:
    new = with_metadata(labels={"valid": "invalid value with spaces"})
    assert paths(validate_object(new, old=with_metadata())) == {f"{META}.labels"}
    assert validate_object(new, old=with_metadata(),
                           feature_gates={"WorkloadValidationForPodSetMetadata": False}) == []


def test_gated_verdicts_are_not_remembered_across_gates() -> None:
    """The pod sets' verdict is memoised by content; the gated rules must not be."""
    obj = slice_request(podSetSliceRequiredTopology=HOST, podSetSliceSize=0)
    assert validate_object(obj, feature_gates={"TASValidateWorkloadSliceSize": False}) == []
    assert paths(validate_object(copy.deepcopy(obj))) == {f"{TR0}.podSetSliceSize"}
    assert validate_object(copy.deepcopy(obj), feature_gates={"TASValidateWorkloadSliceSize": False}) == []
