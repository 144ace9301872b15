"""Flavor assignment of resources requested at zero (Kueue's flavorassigner: kept when covered, skipped when not)."""

from __future__ import annotations

from typing import Any

import pytest

from kueued.model import api
from kueued.scheduling.flavors import Assignment, Mode, assign_flavors
from kueued.scheduling.forest import build_forest
from kueued.scheduling.workload import WorkloadInfo
from tests import builders as b

GPU = "example.com/gpu"


def group(resource: str, *flavors: tuple[str, str]) -> dict[str, Any]:
    """One resource group covering ``resource``: (flavor, nominal quota) per flavor."""
    return {"coveredResources": [resource],
            "flavors": [{"name": f, "resources": [{"name": resource, "nominalQuota": q}]} for f, q in flavors]}


CPU_MEMORY = [b.quotas("default", cpu="4", memory="4Gi")]
CPU_AND_GPU = [group("cpu", ("default", "4")), group(GPU, ("gpu-a", "0"))]
TAINTED_GPU = [group("cpu", ("default", "4")), group(GPU, ("tainted", "2"))]


def assign(groups: list[dict[str, Any]], *, count: int = 1, **requests: str) -> Assignment:
    if groups and "coveredResources" not in groups[0]:
        cq = b.cluster_queue("cq", *groups)
    else:
        cq = b.cluster_queue("cq")
        cq["spec"]["resourceGroups"] = groups
    flavors = [b.flavor(n) for n in ("default", "gpu-a")]
    flavors.append(b.flavor("tainted", nodeTaints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}]))
    flavors.append(b.flavor("self-tolerated", nodeTaints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}],
                            tolerations=[{"key": "gpu", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]))
    snap = build_forest(cluster_queues={"cq": api.decode(cq)}, cohorts={},  # type: ignore[dict-item]
                        flavors={f["metadata"]["name"]: api.decode(f) for f in flavors})  # type: ignore[misc]
    wl = b.workload("wl", "ns", "lq", count=count, **{GPU if r == "gpu" else r: q for r, q in requests.items()})
    info = WorkloadInfo.of(api.decode(wl), priority=0)  # type: ignore[arg-type]
    return assign_flavors(snap, snap.cluster_queues["cq"], info, lambda *_: Mode.NO_CANDIDATES)


@pytest.mark.parametrize(("groups", "requests", "count", "flavors", "usage"), [
    pytest.param(CPU_MEMORY, {"cpu": "1", "memory": "0"}, 1, {"cpu": "default", "memory": "default"},
                 {("default", "cpu"): 1000}, id="zero-beside-a-request-in-the-same-group"),
    pytest.param(CPU_AND_GPU, {"cpu": "1", "gpu": "0"}, 1, {"cpu": "default", GPU: "gpu-a"},
                 {("default", "cpu"): 1000}, id="zero-in-another-group-gets-that-groups-flavor"),
    pytest.param(CPU_MEMORY, {"cpu": "0"}, 1, {"cpu": "default"}, {}, id="only-a-zero-request"),
    pytest.param(CPU_MEMORY, {"cpu": "1", "gpu": "0"}, 1, {"cpu": "default"},
                 {("default", "cpu"): 1000}, id="zero-of-an-undeclared-resource-is-ignored"),
    pytest.param(CPU_MEMORY, {"cpu": "1"}, 0, {"cpu": "default"}, {}, id="zero-count-pod-set"),
])
def test_a_covered_zero_request_gets_its_groups_flavor_and_no_usage(
        groups: list[dict[str, Any]], requests: dict[str, str], count: int,
        flavors: dict[str, str], usage: dict[tuple[str, str], int]) -> None:
    a = assign(groups, count=count, **requests)
    assert a.mode == Mode.FIT
    assert a.flavors() == {"main": flavors}
    assert a.usage == usage


def test_a_zero_request_whose_only_flavor_is_untolerated_does_not_fit() -> None:
    """Kueue looks for a flavor for every covered resource the pod set lists, zero or not."""
    a = assign(TAINTED_GPU, cpu="1", gpu="0")
    assert a.mode == Mode.NO_FIT
    # in Kueue's words: its flavorassigner formats the corev1.Taint struct with %s
    assert "untolerated taint {gpu x NoSchedule <nil>} in flavor tainted" in a.message()


def test_a_flavor_s_own_tolerations_count_against_its_taints() -> None:
    """Kueue adds a flavor's tolerations to the pods it admits there, so its flavor assigner checks
    the flavor's taints against the pod's tolerations and the flavor's own."""
    a = assign([group("cpu", ("default", "4")), group(GPU, ("self-tolerated", "2"))], cpu="1", gpu="1")
    assert a.mode == Mode.FIT
    assert a.flavors() == {"main": {"cpu": "default", GPU: "self-tolerated"}}
