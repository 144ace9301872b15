"""Kueue's admission rules: one table per kind, update rules, and a replay of every scenario.

Each table row is an object built with the builders below and the set of field paths the
validation must name ("" never appears: every rule names its field).  An empty set means
the object is valid.  The replay applies every conformance scenario in order, tracking the
last accepted version of each object, and compares what was refused with
``expect.rejected``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.errors import FieldError
from kueued.model.validation import validate_object
from kueued.model.validation.configuration import parse_duration
from kueued.model.validation.names import exact
from kueued.world import Settings, World

KUEUE = "kueue.x-k8s.io/v1beta2"
CONFIG = "config.kueue.x-k8s.io/v1beta2"
Obj = dict[str, Any]


# ---- builders ---------------------------------------------------------------------------------

def res(name: str = "cpu", nominal: object = "4", *, borrowing: object = None, lending: object = None) -> Obj:
    quota: Obj = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    if lending is not None:
        quota["lendingLimit"] = lending
    return quota


def flavor(name: str = "default", *resources: Obj) -> Obj:
    return {"name": name, "resources": list(resources) or [res()]}


def group(covered: tuple[str, ...] = ("cpu",), *flavors: Obj) -> Obj:
    return {"coveredResources": list(covered), "flavors": list(flavors) or [flavor()]}


def quotas(*resources: Obj, covered: tuple[str, ...] | None = None) -> list[Obj]:
    """One resource group, one flavor "default", covering the given resources in order."""
    names = covered if covered is not None else tuple(r["name"] for r in resources)
    return [group(names, flavor("default", *resources))]


def cluster_queue(name: str = "cq", *, groups: list[Obj] | None = None, **spec: Any) -> Obj:
    body: Obj = {"namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                 "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
                 "resourceGroups": groups if groups is not None else [group()]}
    body.update(spec)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def cohort(name: str = "pool", *, groups: list[Obj] | None = None, **spec: Any) -> Obj:
    body: Obj = {"resourceGroups": groups} if groups is not None else {}
    body.update(spec)
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": body}


def local_queue(name: str = "lq", cq: object = "cq", *, namespace: str = "team", **spec: Any) -> Obj:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq, **spec}}


def container(requests: Obj | None = None, *, limits: Obj | None = None, name: str | None = "c") -> Obj:
    resources: Obj = {"requests": requests if requests is not None else {"cpu": "1"}}
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "resources": resources} if name is not None else {"resources": resources}


def pod_set(name: str | None = "main", count: object = 1, *, requests: Obj | None = None,
            containers: list[Obj] | None = None, pod: Obj | None = None, **extra: Any) -> Obj:
    spec = {"restartPolicy": "Never", "containers": containers or [container(requests)], **(pod or {})}
    ps: Obj = {"count": count, "template": {"spec": spec}, **extra}
    if name is not None:
        ps["name"] = name
    return ps


def workload(name: str = "wl", *, pod_sets: list[Obj] | None = None, queue: object = "lq",
             namespace: str = "team", **spec: Any) -> Obj:
    body: Obj = {"queueName": queue, "podSets": pod_sets if pod_sets is not None else [pod_set()], **spec}
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:01Z"},
            "spec": body}


def reserved(wl: Obj, *, assignments: list[Obj] | None = None, admitted: bool = True) -> Obj:
    """The workload holding a quota reservation (and admitted) in ClusterQueue cq."""
    wl = copy.deepcopy(wl)
    if assignments is None:
        assignments = [{"name": ps.get("name", "main"), "flavors": {"cpu": "default"},
                        "resourceUsage": {"cpu": "1"}, "count": 1} for ps in wl["spec"]["podSets"]]
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "reason": "Admitted",
                           "lastTransitionTime": "2026-01-01T00:00:00Z"})
    wl["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": assignments},
                    "conditions": conditions}
    return wl


def resource_flavor(name: str = "default", **spec: Any) -> Obj:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def configuration(**fields: Any) -> Obj:
    return {"apiVersion": CONFIG, "kind": "Configuration", **fields}


def namespace(name: str, **labels: str) -> Obj:
    meta: Obj = {"name": name, "labels": labels} if labels else {"name": name}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def priority_class(name: str = "high", value: object = 100, **fields: Any) -> Obj:
    obj: Obj = {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, **fields}
    if value is not None:
        obj["value"] = value
    return obj


def fungibility(borrow: str, preempt: str, preference: str) -> Obj:
    return {"whenCanBorrow": borrow, "whenCanPreempt": preempt, "preference": preference}


def priority_ref(group: str = "kueue.x-k8s.io", kind: str = "WorkloadPriorityClass") -> Obj:
    return {"group": group, "kind": kind, "name": "high"}


def paths(errors: list[FieldError]) -> set[str]:
    return {e.path for e in errors}


RG0 = "spec.resourceGroups[0]"
WEIGHT = "spec.fairSharing.weight"
RQ0 = f"{RG0}.flavors[0].resources[0]"
AC0 = "spec.admissionChecksStrategy.admissionChecks[0]"


def checks(*rules: tuple[str, list[str]]) -> Obj:
    """An admissionChecksStrategy: (check name, onFlavors) per rule."""
    return {"admissionChecks": [{"name": name, "onFlavors": on} for name, on in rules]}


# ---- ClusterQueue -----------------------------------------------------------------------------

@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(cluster_queue(), set(), id="valid"),
    pytest.param(cluster_queue(cohortName="pool", groups=[group(("cpu",), flavor("default", res(
        "cpu", "4", borrowing="0", lending="4")))]), set(), id="limits-with-cohort"),
    pytest.param(cluster_queue(groups=[group((f"r{i}",), flavor(f"f{i}", res(f"r{i}"))) for i in range(17)]),
                 {"spec.resourceGroups"}, id="17-resource-groups"),
    pytest.param(cluster_queue(groups=[group(("cpu",), *[flavor(f"f{i}") for i in range(65)])]),
                 {f"{RG0}.flavors"}, id="65-flavors"),
    pytest.param(cluster_queue(groups=[group(tuple(f"r{i}" for i in range(65)), flavor(
        "default", *[res(f"r{i}") for i in range(65)]))]),
        {f"{RG0}.coveredResources", f"{RG0}.flavors[0].resources"}, id="65-resources"),
    pytest.param(cluster_queue(groups=[group(("cpu", "memory"), flavor("default", res("cpu"), res("memory"))),
                                       group(("memory",), flavor("spot", res("memory")))]),
                 {"spec.resourceGroups[1].coveredResources[0]"}, id="duplicate-resource-across-groups"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default"), flavor("default"))]),
                 {f"{RG0}.flavors[1].name"}, id="duplicate-flavor-in-group"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("spot")),
                                       group(("memory",), flavor("spot", res("memory")))]),
                 {"spec.resourceGroups[1].flavors[0].name"}, id="duplicate-flavor-across-groups"),
    pytest.param(cluster_queue(groups=[group(("@cpu",), flavor("default", res("@cpu")))]),
                 {f"{RG0}.coveredResources[0]"}, id="invalid-resource-name"),
    pytest.param(cluster_queue(groups=quotas(res("example.com/gpu"))), set(), id="prefixed-resource-name"),
    pytest.param(cluster_queue(groups=quotas(res("memory"), res("cpu"), covered=("cpu", "memory"))),
                 {f"{RQ0}.name", f"{RG0}.flavors[0].resources[1].name"}, id="resource-order-mismatch"),
    pytest.param(cluster_queue(groups=[group(("cpu", "memory"), flavor("default", res("cpu")))]),
                 {RG0}, id="fewer-resources-than-covered"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", res("cpu"), res("cpu")))]),
                 {RG0, f"{RG0}.flavors[0].resources[1]"}, id="duplicate-resource-in-flavor"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", res("cpu", "-1")))]),
                 {f"{RQ0}.nominalQuota"}, id="negative-nominal"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", res("cpu", "ten")))]),
                 {f"{RQ0}.nominalQuota"}, id="bad-quantity"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", res("cpu", "1e3Ki")))]),
                 {f"{RQ0}.nominalQuota"}, id="exponent-and-suffix"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", res("cpu", 4)))]),
                 set(), id="integer-quantity"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", {"name": "cpu"}))]),
                 {f"{RQ0}.nominalQuota"}, id="missing-nominal"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", res("cpu", "4", borrowing="2")))]),
                 {f"{RQ0}.borrowingLimit"}, id="borrowing-limit-without-cohort"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("default", res("cpu", "4", lending="1")))]),
                 {f"{RQ0}.lendingLimit"}, id="lending-limit-without-cohort"),
    pytest.param(cluster_queue(cohortName="pool", groups=[group(("cpu",), flavor("default", res(
        "cpu", "3", lending="5")))]), {f"{RQ0}.lendingLimit"}, id="lending-above-nominal"),
    pytest.param(cluster_queue(cohortName="pool", groups=[group(("cpu",), flavor("default", res(
        "cpu", "1", lending="1001m")))]), {f"{RQ0}.lendingLimit"}, id="lending-above-nominal-exactly"),
    pytest.param(cluster_queue(cohortName="pool", groups=[group(("cpu",), flavor("default", res(
        "cpu", "4", borrowing="-1")))]), {f"{RQ0}.borrowingLimit"}, id="negative-borrowing-limit"),
    pytest.param(cluster_queue(cohortName="Pool_A"), {"spec.cohortName"}, id="invalid-cohort-name"),
    pytest.param(cluster_queue(groups=[group(("cpu",), flavor("Spot"))]),
                 {f"{RG0}.flavors[0].name"}, id="invalid-flavor-name"),
    pytest.param(cluster_queue("Team_Queue"), {"metadata.name"}, id="invalid-object-name"),
    pytest.param(cluster_queue(queueingStrategy="FIFO"), {"spec.queueingStrategy"}, id="unknown-strategy"),
    pytest.param(cluster_queue(stopPolicy="Pause"), {"spec.stopPolicy"}, id="unknown-stop-policy"),
    pytest.param(cluster_queue(flavorFungibility={"whenCanBorrow": "Borrow"}),
                 {"spec.flavorFungibility.whenCanBorrow"}, id="v1beta1-fungibility-value"),
    pytest.param(cluster_queue(flavorFungibility=fungibility("TryNextFlavor", "MayStopSearch",
                                                             "BorrowingOverPreemption")),
                 {"spec.flavorFungibility.preference"}, id="preference-when-can-preempt-may-stop"),
    pytest.param(cluster_queue(flavorFungibility={"preference": "PreemptionOverBorrowing"}),
                 {"spec.flavorFungibility.preference"}, id="preference-with-defaults"),
    pytest.param(cluster_queue(flavorFungibility=fungibility("TryNextFlavor", "TryNextFlavor",
                                                             "PreemptionOverBorrowing")),
                 set(), id="preference-with-both-try-next"),
    pytest.param(cluster_queue(preemption={"reclaimWithinCohort": "Foo"}),
                 {"spec.preemption.reclaimWithinCohort"}, id="unknown-reclaim-policy"),
    pytest.param(cluster_queue(preemption={"withinClusterQueue": "Any"}),
                 {"spec.preemption.withinClusterQueue"}, id="any-is-not-a-within-cq-policy"),
    pytest.param(cluster_queue(preemption={"reclaimWithinCohort": "Never",
                                           "borrowWithinCohort": {"policy": "LowerPriority"}}),
                 {"spec.preemption"}, id="borrow-within-cohort-with-reclaim-never"),
    pytest.param(cluster_queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
                 {"spec.preemption"}, id="borrow-within-cohort-with-default-reclaim"),
    pytest.param(cluster_queue(preemption={"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {
        "policy": "LowerPriority", "maxPriorityThreshold": 10}}), set(), id="borrow-within-cohort"),
    pytest.param(cluster_queue(fairSharing={"weight": "-1"}), {WEIGHT}, id="negative-weight"),
    pytest.param(cluster_queue(fairSharing={"weight": "1n"}), {WEIGHT}, id="tiny-weight"),
    pytest.param(cluster_queue(fairSharing={"weight": "0"}), set(), id="zero-weight"),
    pytest.param(cluster_queue(fairSharing={"weight": "1500m"}), set(), id="fractional-weight"),
    pytest.param(cluster_queue(namespaceSelector={"matchExpressions": [{"key": "dep", "operator": "Has"}]}),
                 {"spec.namespaceSelector.matchExpressions[0].operator"}, id="bad-selector-operator"),
    pytest.param(cluster_queue(namespaceSelector={"matchExpressions": [{"key": "dep", "operator": "In"}]}),
                 {"spec.namespaceSelector.matchExpressions[0].values"}, id="in-without-values"),
    pytest.param(cluster_queue(namespaceSelector={"matchLabels": {"dep": "a b"}}),
                 {"spec.namespaceSelector.matchLabels"}, id="bad-selector-label-value"),
    pytest.param(cluster_queue(admissionScope={"admissionMode": "Sometimes"}),
                 {"spec.admissionScope.admissionMode"}, id="unknown-admission-mode"),
    pytest.param(cluster_queue(admissionChecksStrategy={"admissionChecks": []}),
                 {"spec.admissionChecksStrategy.admissionChecks"}, id="empty-admission-checks"),
    pytest.param(cluster_queue(admissionChecksStrategy=checks(("ac", ["default"]), ("all", []))),
                 set(), id="check-on-own-flavor"),
    pytest.param(cluster_queue(admissionChecksStrategy=checks(("ac", ["default", "spot"]))),
                 {f"{AC0}.onFlavors[1]"}, id="check-on-flavor-the-queue-lacks"),
    pytest.param(cluster_queue(groups=[], admissionChecksStrategy=checks(("ac", ["default"]))),
                 {f"{AC0}.onFlavors[0]"}, id="check-on-flavor-without-resource-groups"),
    pytest.param(cluster_queue(admissionChecks=["ac"], admissionChecksStrategy=checks(("ac", []))),
                 {"spec"}, id="legacy-admission-checks-beside-strategy"),
    pytest.param(cluster_queue(admissionChecks=["ac"]), set(), id="legacy-admission-checks-alone"),
    pytest.param(cluster_queue(groups=[group((f"r{g}",), *[flavor(f"f{g}-{i}", res(f"r{g}")) for i in range(52)])
                                       for g in range(5)]),
                 {"spec.resourceGroups"}, id="260-flavors-in-all"),
    pytest.param(cluster_queue(groups=[group(tuple(f"r{g}-{i}" for i in range(52)), flavor(
        f"f{g}", *[res(f"r{g}-{i}") for i in range(52)])) for g in range(5)]),
        {"spec.resourceGroups"}, id="260-covered-resources-in-all"),
    pytest.param(cluster_queue(groups=[group(tuple(f"r{i}" for i in range(9)), *[
        flavor(f"f{j}", *[res(f"r{i}") for i in range(9)]) for j in range(57)])]),
        {RG0}, id="513-flavor-resource-pairs-in-a-group"),
    pytest.param(cluster_queue(resourceGroups="cpu"), {"spec.resourceGroups"}, id="wrong-type"),
])
def test_cluster_queue(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


def test_cluster_queue_reasons_read_like_kueue() -> None:
    lending = cluster_queue(cohortName="pool", groups=quotas(res("cpu", "3", lending="5")))
    policy = cluster_queue(preemption={"reclaimWithinCohort": "Foo"})
    assert [e.reason for e in validate_object(lending)] == [
        'Invalid value: "5": must be less than or equal to the nominalQuota (5 > 3)']
    assert [e.reason for e in validate_object(policy)] == [
        'Unsupported value: "Foo": supported values: "Never", "LowerPriority", "Any"']
    on_flavors = cluster_queue(groups=[group(("cpu",), flavor("spot"), flavor("default"))],
                               admissionChecksStrategy=checks(("ac", ["gpu"])))
    assert [e.reason for e in validate_object(on_flavors)] == [
        'Unsupported value: "gpu": supported values: "default", "spot"']


# ---- Cohort -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(cohort(), set(), id="empty"),
    pytest.param(cohort(parentName="root", groups=[group(("cpu",), flavor("default", res(
        "cpu", "3", borrowing="1", lending="5")))]), set(), id="lending-above-nominal-allowed"),
    pytest.param(cohort(groups=[group(("cpu",), flavor("default", res("cpu", "4", borrowing="2")))]),
                 {f"{RQ0}.borrowingLimit"}, id="borrowing-limit-without-parent"),
    pytest.param(cohort(groups=[group(("cpu",), flavor("default", res("cpu", "4", lending="2")))]),
                 {f"{RQ0}.lendingLimit"}, id="lending-limit-without-parent"),
    pytest.param(cohort(groups=[group(("cpu",), flavor("default", res("cpu", "-4")))]),
                 {f"{RQ0}.nominalQuota"}, id="negative-nominal"),
    pytest.param(cohort(parentName="Root"), {"spec.parentName"}, id="invalid-parent-name"),
    pytest.param(cohort(parentName="pool"), set(), id="self-parent-is-a-cycle-not-an-error"),
    pytest.param(cohort(fairSharing={"weight": "-2"}), {WEIGHT}, id="negative-weight"),
    pytest.param(cohort(groups=[group((f"r{i}",), flavor(f"f{i}", res(f"r{i}"))) for i in range(17)]),
                 {"spec.resourceGroups"}, id="17-groups"),
])
def test_cohort(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


def test_cohort_limit_reason_names_the_parent() -> None:
    obj = cohort(groups=quotas(res("cpu", "4", borrowing="2")))
    reasons = [e.reason for e in validate_object(obj)]
    assert reasons == ['Invalid value: "2": must be nil when parent is empty']


# ---- LocalQueue, ResourceFlavor, WorkloadPriorityClass, Namespace ----------------------------

@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(local_queue(), set(), id="valid"),
    pytest.param(local_queue(cq="invalid_name"), {"spec.clusterQueue"}, id="invalid-cluster-queue-name"),
    pytest.param(local_queue(cq="x" * 254), {"spec.clusterQueue"}, id="cluster-queue-name-too-long"),
    pytest.param(local_queue(stopPolicy="Drain"), {"spec.stopPolicy"}, id="unknown-stop-policy"),
    pytest.param(local_queue(fairSharing={"weight": "2"}), set(), id="weight"),
    pytest.param(local_queue(fairSharing={"weight": "two"}), {"spec.fairSharing.weight"}, id="bad-weight"),
    pytest.param(local_queue(namespace="Team"), {"metadata.namespace"}, id="invalid-namespace"),
    pytest.param(resource_flavor(), set(), id="flavor-empty-spec"),
    pytest.param(resource_flavor(nodeLabels={"cloud.provider.com/instance": "spot"},
                                 nodeTaints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}],
                                 tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
                 set(), id="flavor-valid"),
    pytest.param(resource_flavor(nodeTaints=[{"key": "spot", "value": "true", "effect": "Sometimes"}]),
                 {"spec.nodeTaints"}, id="taint-effect"),
    pytest.param(resource_flavor(nodeTaints=[{"key": "spot", "effect": "NoSchedule"}] * 2),
                 {"spec.nodeTaints[1]"}, id="duplicate-taint"),
    pytest.param(resource_flavor(nodeTaints=[{"value": "x", "effect": "NoSchedule"}]),
                 {"spec.nodeTaints[0].key"}, id="taint-without-key"),
    pytest.param(resource_flavor(nodeLabels={f"k{i}": "v" for i in range(9)}), {"spec.nodeLabels"},
                 id="nine-node-labels"),
    pytest.param(resource_flavor(nodeLabels={"bad key": "v"}), {"spec.nodeLabels"}, id="bad-label-key"),
    pytest.param(resource_flavor(tolerations=[{"key": "a", "operator": "Exists", "value": "x"}]),
                 {"spec.tolerations"}, id="exists-with-value"),
    pytest.param(resource_flavor(tolerations=[{"operator": "Equal", "value": "x"}]),
                 {"spec.tolerations"}, id="no-key-needs-exists"),
    pytest.param(resource_flavor(tolerations=[{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]),
                 {"spec.tolerations"}, id="toleration-seconds-need-no-execute"),
    pytest.param(resource_flavor(topologyName="default"), {"spec"}, id="topology-without-node-labels"),
    pytest.param(priority_class(), set(), id="priority-class"),
    pytest.param(priority_class(value=None), {"value"}, id="priority-class-without-value"),
    pytest.param(priority_class(value="high"), {"value"}, id="priority-class-string-value"),
    pytest.param(priority_class(value=2**31), {"value"}, id="priority-class-beyond-int32"),
    pytest.param(priority_class(description="x" * 2049), {"description"}, id="description-too-long"),
    pytest.param(namespace("team", dep="a"), set(), id="namespace"),
    pytest.param(namespace("Team"), {"metadata.name"}, id="namespace-upper-case"),
    pytest.param(namespace("a.b"), {"metadata.name"}, id="namespace-is-a-label-not-a-subdomain"),
    pytest.param(namespace("n" * 64), {"metadata.name"}, id="namespace-too-long"),
    pytest.param({**cluster_queue(), "metadata": {}}, {"metadata.name"}, id="no-name"),
])
def test_small_kinds(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


# ---- Workload ---------------------------------------------------------------------------------

PS0 = "spec.podSets[0]"
C0 = f"{PS0}.template.spec.containers[0]"


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(workload(), set(), id="valid"),
    pytest.param(workload(pod_sets=[pod_set("driver"), pod_set("workers", 100)]), set(), id="two-pod-sets"),
    pytest.param(workload(pod_sets=[pod_set(f"ps{i:02}") for i in range(18)]), set(), id="18-pod-sets"),
    pytest.param(workload(pod_sets=[pod_set(f"ps{i:02}") for i in range(19)]), {"spec.podSets"},
                 id="19-pod-sets"),
    pytest.param(workload(pod_sets=[]), {"spec.podSets"}, id="no-pod-sets"),
    pytest.param({**workload(), "spec": {"queueName": "lq"}}, {"spec.podSets"}, id="pod-sets-missing"),
    pytest.param(workload(pod_sets=[pod_set("main"), pod_set("main")]), {"spec.podSets[1]"},
                 id="duplicate-names"),
    pytest.param(workload(pod_sets=[pod_set(None), pod_set(None)]), {"spec.podSets[1]"},
                 id="duplicate-default-names"),
    pytest.param(workload(pod_sets=[pod_set("Driver")]), {f"{PS0}.name"}, id="upper-case-name"),
    pytest.param(workload(pod_sets=[pod_set("a" * 64)]), {f"{PS0}.name"}, id="name-too-long"),
    pytest.param(workload(pod_sets=[pod_set(count=-1)]), {f"{PS0}.count"}, id="negative-count"),
    pytest.param(workload(pod_sets=[pod_set(count="3")]), {f"{PS0}.count"}, id="string-count"),
    pytest.param(workload(pod_sets=[pod_set(count=0)]), set(), id="zero-count"),
    pytest.param(workload(pod_sets=[pod_set(count=3, minCount=4)]), {PS0}, id="min-count-above-count"),
    pytest.param(workload(pod_sets=[pod_set(count=3, minCount=0)]), {f"{PS0}.minCount"}, id="zero-min-count"),
    pytest.param(workload(pod_sets=[pod_set("a", 3, minCount=2), pod_set("b", 3, minCount=1)]),
                 {"spec.podSets"}, id="two-min-count-pod-sets"),
    pytest.param(workload(pod_sets=[pod_set(requests={"cpu": "3", "pods": "1"})]),
                 {f"{C0}.resources.requests[pods]"}, id="reserved-pods-request"),
    pytest.param(workload(pod_sets=[pod_set(containers=[container(limits={"pods": "1"})])]),
                 {f"{C0}.resources.limits[pods]"}, id="reserved-pods-limit"),
    pytest.param(workload(pod_sets=[pod_set(requests={"cpu": "-1"})]),
                 {f"{C0}.resources.requests[cpu]"}, id="negative-request"),
    pytest.param(workload(pod_sets=[pod_set(containers=[container(limits={"memory": "-1Gi"})])]),
                 {f"{C0}.resources.limits[memory]"}, id="negative-limit"),
    pytest.param(workload(pod_sets=[pod_set(requests={"cpu": "3 cores"})]),
                 {f"{C0}.resources.requests[cpu]"}, id="bad-request-quantity"),
    pytest.param(workload(pod_sets=[pod_set(pod={"initContainers": [container({"pods": "1"})]})]),
                 {f"{PS0}.template.spec.initContainers[0].resources.requests[pods]"}, id="init-container"),
    pytest.param(workload(pod_sets=[pod_set(pod={"resources": {"requests": {"cpu": "-2"}}})]),
                 {f"{PS0}.template.spec.resources.requests[cpu]"}, id="pod-level-resources"),
    pytest.param(workload(pod_sets=[pod_set(containers=[container(name=None)])]), {f"{C0}.name"},
                 id="container-without-name"),
    pytest.param(workload(pod_sets=[{"name": "main", "count": 1}]), {f"{PS0}.template"}, id="no-template"),
    pytest.param(workload(queue="@invalid"), {"spec.queueName"}, id="invalid-queue-name"),
    pytest.param(workload(maximumExecutionTimeSeconds=0), {"spec.maximumExecutionTimeSeconds"},
                 id="max-execution-time-zero"),
    pytest.param(workload(maximumExecutionTimeSeconds=60), set(), id="max-execution-time"),
    pytest.param(workload(priority=100, priorityClassRef=priority_ref()), set(), id="priority-class-ref"),
    pytest.param(workload(priorityClassRef=priority_ref()), {"spec"},
                 id="priority-class-ref-without-priority"),
    pytest.param(workload(priority=1, priorityClassRef=priority_ref("scheduling.k8s.io")),
                 {"spec.priorityClassRef"}, id="scheduling-group-with-workload-kind"),
    pytest.param(workload(priority=1, priorityClassRef=priority_ref(kind="PriorityClass")),
                 {"spec.priorityClassRef"}, id="kueue-group-with-pod-kind"),
    pytest.param(workload(priority=1, priorityClassRef=priority_ref("scheduling.k8s.io", "PriorityClass")),
                 set(), id="pod-priority-class"),
    pytest.param(workload(priority=1, priorityClassRef=priority_ref("example.com", "PriorityClass")),
                 {"spec.priorityClassRef.group"}, id="unknown-priority-group"),
    pytest.param(workload(priority="high"), {"spec.priority"}, id="string-priority"),
    pytest.param(reserved(workload()), set(), id="reserved"),
    pytest.param(reserved(workload(pod_sets=[pod_set("a"), pod_set("b")]), assignments=[
        {"name": "a", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]),
        {"status.admission.podSetAssignments"}, id="one-assignment-for-two-pod-sets"),
    pytest.param(reserved(workload(), assignments=[{"name": "other", "count": 1}]),
                 {"status.admission.podSetAssignments[0].name"}, id="assignment-for-unknown-pod-set"),
    pytest.param(reserved(workload(pod_sets=[pod_set(count=3)]), assignments=[
        {"name": "main", "resourceUsage": {"cpu": "1"}, "count": 3}]),
        {"status.admission.podSetAssignments[0].resourceUsage[cpu]"}, id="usage-not-a-multiple-of-count"),
    pytest.param(reserved(workload(pod_sets=[pod_set(count=3)]), assignments=[
        {"name": "main", "resourceUsage": {"cpu": "1500m"}, "count": 3}]), set(), id="usage-in-milli-cpu"),
    pytest.param({**workload(), "status": {"reclaimablePods": [{"name": "main", "count": 2}]}},
                 {"status.reclaimablePods[main].count"}, id="reclaimable-above-count"),
    pytest.param({**workload(), "status": {"conditions": [{"type": "QuotaReserved", "status": "Yes"}]}},
                 {"status.conditions[0].status"}, id="bad-condition-status"),
])
def test_workload(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


# ---- updates ----------------------------------------------------------------------------------

def _with(obj: Obj, **spec: Any) -> Obj:
    obj = copy.deepcopy(obj)
    obj["spec"].update(spec)
    return obj


RUNNING = reserved(workload(pod_sets=[pod_set(count=2, requests={"cpu": "1"})]), assignments=[
    {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}, "count": 2}])


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param(local_queue(cq="cq-a"), local_queue(cq="cq-b"), {"spec.clusterQueue"}, id="lq-retarget"),
    pytest.param(local_queue(cq="cq-a"), local_queue(cq="cq-a", stopPolicy="Hold"), set(), id="lq-stop"),
    pytest.param({**local_queue(), "spec": {}}, local_queue(cq="cq-a"), set(), id="lq-first-target"),
    pytest.param(cluster_queue(cohortName="pool", groups=[group(("cpu",), flavor("default", res(
        "cpu", "2", borrowing="2")))]), cluster_queue(groups=[group(("cpu",), flavor("default", res(
            "cpu", "2", borrowing="2")))]), {f"{RQ0}.borrowingLimit"}, id="cq-remove-cohort-keeps-limit"),
    pytest.param(cluster_queue(queueingStrategy="StrictFIFO"), cluster_queue(), set(),
                 id="cq-strategy-mutable"),
    pytest.param(resource_flavor(nodeLabels={"a": "b"}, topologyName="t"),
                 resource_flavor(nodeLabels={"a": "c"}, topologyName="t"), {"spec"}, id="tas-flavor-frozen"),
    pytest.param(resource_flavor(nodeLabels={"a": "b"}), resource_flavor(nodeLabels={"a": "c"}), set(),
                 id="flavor-mutable"),
    pytest.param(RUNNING, _with(RUNNING, podSets=[pod_set(count=3, requests={"cpu": "1"})]),
                 {"spec.podSets[0]"}, id="scale-up-while-reserved"),
    pytest.param(RUNNING, _with(RUNNING, podSets=[pod_set(count=1, requests={"cpu": "1"})]),
                 set(), id="scale-down-while-reserved"),
    pytest.param(RUNNING, _with(RUNNING, podSets=[pod_set(count=2, requests={"cpu": "2"})]),
                 {"spec.podSets[0]"}, id="bigger-pods-while-reserved"),
    pytest.param(RUNNING, _with(RUNNING, podSets=[pod_set(count=2, requests={"cpu": "1000m"})]),
                 set(), id="same-amount-other-spelling"),
    pytest.param(RUNNING, _with(RUNNING, podSets=[pod_set(count=2), pod_set("extra")]),
                 {"spec.podSets", "status.admission.podSetAssignments"}, id="add-pod-set-while-reserved"),
    pytest.param(workload(), workload(pod_sets=[pod_set(count=5)]), set(), id="pending-pod-sets-mutable"),
    pytest.param(RUNNING, _with(RUNNING, queueName="lq-b"), {"spec.queueName"},
                 id="queue-name-while-reserved"),
    pytest.param(workload(), workload(queue="lq-b"), set(), id="queue-name-while-pending"),
    pytest.param(RUNNING, _with(RUNNING, priority=5, priorityClassRef={
        "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}),
        {"spec.priorityClassRef"}, id="priority-class-ref-added-while-reserved"),
    pytest.param(RUNNING, _with(RUNNING, maximumExecutionTimeSeconds=60),
                 {"spec.maximumExecutionTimeSeconds"}, id="max-execution-time-while-admitted"),
    pytest.param(RUNNING, _with(RUNNING, priority=7), set(), id="priority-mutable"),
    pytest.param(RUNNING, {**RUNNING, "status": {**RUNNING["status"], "admission": {
        **RUNNING["status"]["admission"], "clusterQueue": "other"}}}, {"status.admission"},
        id="admission-edited"),
    pytest.param(RUNNING, {**RUNNING, "status": {}}, set(), id="admission-cleared"),
])
def test_update(old: Obj, new: Obj, expected: set[str]) -> None:
    assert paths(validate_object(new, old=old)) == expected


# ---- Configuration ----------------------------------------------------------------------------

FS = "fairSharing.preemptionStrategies"
FS_KEY = "preemptionStrategies"
REQUEUE = "waitForPodsReady.requeuingStrategy"
SYSTEM = ["kube-system", "kueue-system"]


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(configuration(), set(), id="defaults"),
    pytest.param(configuration(fairSharing={"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}), set(),
                 id="final-share"),
    pytest.param(configuration(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]}), set(),
                 id="initial-share"),
    pytest.param(configuration(fairSharing={"preemptionStrategies": [
        "LessThanOrEqualToFinalShare", "LessThanInitialShare"]}), set(), id="both-strategies"),
    pytest.param(configuration(fairSharing={}), {FS}, id="missing-strategies"),
    pytest.param(configuration(fairSharing={"preemptionStrategies": []}), {FS}, id="empty-strategies"),
    pytest.param(configuration(fairSharing={"preemptionStrategies": [
        "LessThanInitialShare", "LessThanOrEqualToFinalShare"]}), {FS}, id="strategies-out-of-order"),
    pytest.param(configuration(fairSharing={"preemptionStrategies": ["Fair"]}), {FS}, id="unknown-strategy"),
    pytest.param(configuration(fairSharing={"enable": True, FS_KEY: ["LessThanInitialShare"]}),
                 {"fairSharing.enable"}, id="v1beta1-enable-field"),
    pytest.param(configuration(metadata={"name": "cfg"}), {"metadata"}, id="strict-decoding"),
    pytest.param(configuration(admissionFairSharing={
        "usageHalfLifeTime": "10s", "usageSamplingInterval": "1s", "resourceWeights": {"cpu": 2.0}}),
        set(), id="afs"),
    pytest.param(configuration(admissionFairSharing={"usageHalfLifeTime": "-1s"}),
                 {"admissionFairSharing.usageHalfLifeTime"}, id="afs-negative-half-life"),
    pytest.param(configuration(admissionFairSharing={"usageHalfLifeTime": "ten seconds"}),
                 {"admissionFairSharing.usageHalfLifeTime"}, id="afs-bad-duration"),
    pytest.param(configuration(admissionFairSharing={"usageSamplingInterval": "-5m"}),
                 {"admissionFairSharing.usageSamplingInterval"}, id="afs-negative-interval"),
    pytest.param(configuration(admissionFairSharing={"resourceWeights": {"cpu": -1}}),
                 {"admissionFairSharing.resourceWeights[cpu]"}, id="afs-negative-weight"),
    pytest.param(configuration(waitForPodsReady={"timeout": "-1m"}), {"waitForPodsReady.timeout"},
                 id="negative-pods-ready-timeout"),
    pytest.param(configuration(waitForPodsReady={"timeout": "5m", "requeuingStrategy": {
        "timestamp": "Admission", "backoffLimitCount": -1}}),
        {f"{REQUEUE}.timestamp", f"{REQUEUE}.backoffLimitCount"},
        id="requeuing-strategy"),
    pytest.param(configuration(integrations={"frameworks": ["batch/job", "pod"]}), set(), id="frameworks"),
    pytest.param(configuration(integrations={"frameworks": ["batch/job", "batch/job"]}),
                 {"integrations.frameworks[1]"}, id="duplicate-framework"),
    pytest.param(configuration(integrations={"frameworks": ["example.com/widget"]}),
                 {"integrations.frameworks[0]"}, id="unknown-framework"),
    pytest.param(configuration(resources={"transformations": [{"input": "a", "strategy": "Keep"},
                                                              {"input": "a"}]}),
                 {"resources.transformations[0].strategy", "resources.transformations[1].input"},
                 id="transformations"),
    pytest.param(configuration(managedJobsNamespaceSelector={}), {"managedJobsNamespaceSelector"},
                 id="selector-matches-kube-system"),
    pytest.param(configuration(managedJobsNamespaceSelector={"matchExpressions": [{
        "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": SYSTEM}]}),
        set(), id="selector-excludes-system-namespaces"),
    pytest.param(configuration(namespace="kueue", managedJobsNamespaceSelector={"matchExpressions": [{
        "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}),
        {"managedJobsNamespaceSelector"}, id="selector-matches-kueue-namespace"),
    pytest.param(configuration(internalCertManagement={"webhookServiceName": "1-service"}),
                 {"internalCertManagement.webhookServiceName"}, id="webhook-service-name"),
    pytest.param(configuration(visibilityServer={"bindPort": 0}), {"visibilityServer.bindPort"}, id="port"),
    pytest.param(configuration(featureGates={"PrioritizePreemptorWorkloads": True}), set(),
                 id="feature-gate"),
    pytest.param(configuration(featureGates={"PartialAdmission": "yes"}), {"featureGates[PartialAdmission]"},
                 id="feature-gate-not-bool"),
    pytest.param(configuration(elasticQuota={"delayEvictTime": "2m"}), set(), id="elastic-delay"),
    pytest.param(configuration(elasticQuota={"delayEvictTime": "-1s"}), {"elasticQuota.delayEvictTime"},
                 id="elastic-negative-delay"),
    pytest.param(configuration(elasticQuota={"delayEvictTime": "soon"}), {"elasticQuota.delayEvictTime"},
                 id="elastic-bad-delay"),
    pytest.param(configuration(elasticQuota={"monitorAllQuotas": "yes"}), {"elasticQuota.monitorAllQuotas"},
                 id="elastic-monitor-not-a-boolean"),
    pytest.param(configuration(elasticQuota={"revokePodInterval": "1s"}), {"elasticQuota.revokePodInterval"},
                 id="elastic-unknown-field"),
])
def test_configuration(obj: Obj, expected: set[str]) -> None:
    assert paths(validate_object(obj)) == expected


def test_fair_sharing_without_strategies_is_refused_not_defaulted() -> None:
    """Kueue v1beta2 defaults no preemptionStrategies and validation requires them, so
    ``fairSharing: {}`` is refused and Kueue's defaults (no fair sharing) stay in force."""
    world = World()
    world.apply(configuration(fairSharing={}, admissionFairSharing={"usageHalfLifeTime": "10s"}))
    assert list(world.rejected) == ["Configuration"]
    assert world.settings == Settings()


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("10s", 10.0, id="seconds"),
    pytest.param("1h30m", 5400.0, id="compound"),
    pytest.param("500ms", 0.5, id="millis"),
    pytest.param("-2.5s", -2.5, id="negative-fraction"),
    pytest.param("0", 0.0, id="bare-zero"),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [pytest.param(t, id=t or "empty") for t in ("", "10", "s", "1d", "1 s")])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("text", "value"), [
    pytest.param("1n", 1e-9, id="nano"),
    pytest.param("1500m", 1.5, id="milli"),
    pytest.param("2Ki", 2048, id="binary"),
    pytest.param("1e3", 1000, id="exponent"),
    pytest.param("-4", -4, id="negative"),
])
def test_exact_quantity(text: str, value: float) -> None:
    assert float(exact(text)) == pytest.approx(value)


# ---- kinds left to others ---------------------------------------------------------------------

@pytest.mark.parametrize("obj", [
    pytest.param({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                  "metadata": {"name": "Bad_Name"}, "spec": {"min": {"cpu": "-1"}}}, id="elastic-quota"),
    pytest.param({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "N_1"}}, id="node"),
    pytest.param({**cluster_queue("Bad_Name"), "apiVersion": "kueue.x-k8s.io/v1beta1"}, id="other-version"),
])
def test_unknown_kinds_are_not_ours(obj: Obj) -> None:
    assert validate_object(obj) == []


# ---- robustness -------------------------------------------------------------------------------

_SCALARS = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False)
_JUNK = st.recursive(
    _SCALARS | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)
_SAMPLES = [cluster_queue(cohortName="pool", preemption={"reclaimWithinCohort": "Any"}),
            cohort(parentName="root", groups=[group()]), local_queue(), RUNNING, resource_flavor(
                nodeTaints=[{"key": "a", "effect": "NoSchedule"}], tolerations=[{"key": "a"}]),
            configuration(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]},
                          admissionFairSharing={}),
            priority_class(), namespace("team")]


def _containers(node: Any, trail: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every (path to a dict or list) inside a sample, to aim the junk at."""
    found = [trail]
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for k, v in items:
        if isinstance(v, dict | list):
            found.extend(_containers(v, (*trail, k)))
    return found


@settings(max_examples=300, deadline=None)
@given(sample=st.sampled_from(_SAMPLES), data=st.data(), junk=_JUNK)
def test_any_shape_is_reported_never_raised(sample: Obj, data: st.DataObject, junk: Any) -> None:
    obj = copy.deepcopy(sample)
    target: Any = obj
    for step in data.draw(st.sampled_from(_containers(obj))):
        target = target[step]
    if isinstance(target, dict):
        target[data.draw(st.sampled_from([*target.keys(), "extra"]))] = junk
    elif target:
        target[data.draw(st.integers(0, len(target) - 1))] = junk
    errors = validate_object(obj, old=sample)
    assert all(isinstance(e, FieldError) and e.path is not None for e in errors)


# ---- conformance scenarios --------------------------------------------------------------------

SCENARIOS = Path(__file__).parents[2] / ".." / "shared" / "conformance" / "scenarios"
OURS = frozenset({"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "Workload",
                  "WorkloadPriorityClass", "Configuration", "Namespace"})
_FILES = sorted(SCENARIOS.rglob("*.yaml")) if SCENARIOS.is_dir() else []


def _object_key(obj: Obj) -> str:
    kind = obj.get("kind")
    if kind == "Configuration":
        return "Configuration"
    meta = obj.get("metadata") or {}
    if kind in ("LocalQueue", "Workload"):
        return f"{kind}/{meta.get('namespace', 'default')}/{meta.get('name')}"
    return f"{kind}/{meta.get('name')}"


def replay(objects: list[Obj]) -> dict[str, list[FieldError]]:
    """Apply objects in order; an update is checked against the last accepted version."""
    accepted: dict[str, Obj] = {}
    refused: dict[str, list[FieldError]] = {}
    for obj in objects:
        if obj.get("kind") not in OURS:
            continue
        name = _object_key(obj)
        errors = validate_object(obj, old=accepted.get(name))
        if errors:
            refused[name] = errors
        else:
            accepted[name] = obj
    return refused


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(SCENARIOS))) for p in _FILES] or [
    pytest.param(None, id="no-scenarios", marks=pytest.mark.skip(reason=f"{SCENARIOS} is absent"))])
def test_scenario_rejections(path: Path) -> None:
    scenario = yaml.safe_load(path.read_text())
    expected = {r for r in (scenario.get("expect") or {}).get("rejected") or [] if r.split("/")[0] in OURS}
    refused = replay(scenario.get("objects") or [])
    assert set(refused) == expected, {k: [str(e) for e in v] for k, v in refused.items()}


def test_a_remembered_pod_template_gives_each_workload_its_own_paths() -> None:
    """Templates are checked once per content and path; the errors stay per pod set."""
    bad = container(limits={"memory": "-1Gi"})
    one = workload(pod_sets=[pod_set(containers=[bad])])
    two = workload(pod_sets=[pod_set(name="a", containers=[container()]), pod_set(name="b", containers=[bad])])
    first, again = validate_object(one), validate_object(copy.deepcopy(one))
    assert first == again and first
    paths = [e.path for e in validate_object(two)]
    assert paths and all(p.startswith("spec.podSets[1].template") for p in paths)
