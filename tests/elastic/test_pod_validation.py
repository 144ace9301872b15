"""Koordinator's pod webhook (pod_check.go) on the Workloads that stand for pods, and where those pods go."""

from __future__ import annotations

import pytest

from kueued.model import koordinator as k
from kueued.model.elastic_pod_validation import validate_elastic_pod
from kueued.world import Change, World
from tests.elastic.builders import EQ, WL

QUOTA_LABEL = f"metadata.labels[{k.LABEL_QUOTA_NAME}]"
PREEMPTIBLE_LABEL = f"metadata.labels[{k.LABEL_PREEMPTIBLE}]"


def _quotas() -> dict[str, dict]:
    """cluster (is-parent) > team (leaf); ops is a parent named like its namespace."""
    return {q["metadata"]["name"]: q for q in (
        EQ("cluster").cluster(cpu="10").build(),
        EQ("team").parent("cluster").max(cpu="10").build(),
        EQ("ops", "ops").parent("cluster").is_parent().max(cpu="10").build(),
    )}


@pytest.mark.parametrize(("new", "old", "gate", "paths"), [
    pytest.param(WL("w", "team"), None, False, [], id="leaf-quota"),
    pytest.param(WL("w", "cluster"), None, False, [QUOTA_LABEL], id="parent-quota"),
    pytest.param(WL("w", "cluster"), None, True, [], id="parent-quota-with-gate"),
    pytest.param(WL("w", namespace="ops"), None, False, ["metadata.namespace"],
                 id="parent-quota-of-the-namespace"),
    pytest.param(WL("w", "nowhere"), None, False, [], id="unknown-quota-is-the-default"),
    pytest.param(WL("w"), None, False, [], id="no-quota-is-the-default"),
    pytest.param(WL("w", "team").non_preemptible(), WL("w", "team"), False, [PREEMPTIBLE_LABEL],
                 id="preemptible-label-added"),
    pytest.param(WL("w", "team"), WL("w", "team").non_preemptible(), True, [PREEMPTIBLE_LABEL],
                 id="preemptible-label-removed"),
    pytest.param(WL("w", "team").non_preemptible().priority(3), WL("w", "team").non_preemptible(), False, [],
                 id="other-change-keeping-the-label"),
    pytest.param(WL("w", "cluster"), WL("w", "team"), False, [QUOTA_LABEL], id="update-to-parent-quota"),
])
def test_pod_webhook(new: WL, old: WL | None, gate: bool, paths: list[str]) -> None:
    errors = validate_elastic_pod(new.build(), old=old.build() if old is not None else None, quotas=_quotas(),
                                  parent_quota_pods=gate)
    assert [e.path for e in errors] == paths


def test_reasons_are_koordinators() -> None:
    quotas = _quotas()
    parent = validate_elastic_pod(WL("w", "cluster").build(), old=None, quotas=quotas)
    label = validate_elastic_pod(WL("w", "team").build(), old=WL("w", "team").non_preemptible().build(),
                                 quotas=quotas)
    assert [e.reason for e in parent + label] == [
        "pod can not be linked to a parentQuotaGroup,quota:cluster, pod:w",
        "Preemptible label is forbidden modify now."]


def _world(*manifests: dict) -> World:
    world = World()
    for m in manifests:
        world.apply(m)
    return world


def test_a_refused_update_leaves_the_earlier_pod_in_force() -> None:
    world = _world(*_quotas().values(), WL("w", "team").non_preemptible().req(cpu="1").build())
    change, key = world.apply(WL("w", "team").req(cpu="1").build())
    assert (change, key) == (Change.REJECTED, "Workload/default/w")
    assert world.workloads["default/w"].obj.metadata.labels[k.LABEL_PREEMPTIBLE] == "false"


def test_the_gate_comes_from_the_configuration() -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "featureGates": {k.GATE_PARENT_QUOTA_PODS: True}}
    world = _world(config, *_quotas().values(), WL("w", "cluster").build())
    assert not world.rejected


@pytest.mark.parametrize(("workload", "route"), [
    pytest.param(WL("w", "team"), "elastic", id="labelled"),
    pytest.param(WL("w", namespace="apps"), "elastic", id="unlabelled-without-local-queue"),
    pytest.param(WL("w", namespace="apps").queue("lq"), "LocalQueue lq doesn't exist in namespace apps",
                 id="kueue-workload"),
])
def test_a_pod_is_a_workload_that_names_a_quota_or_no_local_queue(workload: WL, route: str) -> None:
    world = _world(*_quotas().values(), workload.build())
    wl = next(iter(world.workloads.values()))
    assert world.route(wl)[1] == route
