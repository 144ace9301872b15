"""A namespace's LimitRanges default and bound its Workloads' pods, as Kueue reads them
(``workload.AdjustResources`` and ``ValidateLimitRange``); the World applies them to pending ones."""

from __future__ import annotations

from typing import Any

from kueued.model import api
from kueued.scheduling.limitrange import ABOVE_MAX, BELOW_MIN, summarize, violations, with_defaults
from kueued.scheduling.workload import pod_requests, spec_of
from kueued.world import Change, World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def limit_range(name: str, ns: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": ns},
            "spec": {"limits": list(items)}}


def _decode(doc: dict[str, Any]) -> Any:
    return api.decode(doc)


def test_the_summary_keeps_the_tightest_bounds_the_first_defaults_and_the_api_server_s_defaulting() -> None:
    a = _decode(limit_range("a", "ns", {"type": "Container", "max": {"cpu": "4"}, "min": {"cpu": "100m"}},
                            {"type": "Pod", "max": {"memory": "8Gi"}}))
    b = _decode(limit_range("b", "ns", {"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "200m"},
                                        "default": {"cpu": "1"}, "defaultRequest": {"memory": "1Gi"}}))
    s = summarize([b, a])
    assert s is not None
    assert (s.container_max, s.container_min, s.pod_max) == ({"cpu": "2"}, {"cpu": "200m"}, {"memory": "8Gi"})
    # a (first by name) defaults its limit from max and its request from that limit
    assert s.default == {"cpu": "4"} and s.default_request == {"cpu": "4", "memory": "1Gi"}
    assert summarize([_decode(limit_range("c", "ns", {"type": "PersistentVolumeClaim",
                                                       "max": {"storage": "1Gi"}}))]) is None


def test_defaults_fill_only_what_a_container_leaves_out() -> None:
    s = summarize([_decode(limit_range("a", "ns", {"type": "Container", "default": {"cpu": "1", "memory": "1Gi"},
                                                   "defaultRequest": {"cpu": "500m"}}))])
    assert s is not None
    spec = api.PodSpec(containers=[api.Container(name="c", resources=api.ResourceRequirements(
        requests={"memory": "2Gi"}))])
    c = with_defaults(spec, s).containers[0]
    assert c.resources.requests == {"cpu": "500m", "memory": "2Gi"}
    assert c.resources.limits == {"cpu": "1", "memory": "1Gi"}


def test_a_pod_outside_the_bounds_is_named_with_kueue_s_messages() -> None:
    s = summarize([_decode(limit_range("a", "ns", {"type": "Container", "max": {"cpu": "1"}, "min": {"memory": "1Gi"}},
                                       {"type": "Pod", "max": {"cpu": "1500m"}}))])
    assert s is not None
    spec = api.PodSpec(containers=[
        api.Container(name="a", resources=api.ResourceRequirements(requests={"cpu": "800m", "memory": "2Gi"},
                                                                   limits={"cpu": "1200m"})),
        api.Container(name="b", resources=api.ResourceRequirements(requests={"cpu": "800m", "memory": "512Mi"}))])
    found = violations(spec, s, "podSets[0].template.spec", pod_requests(spec))
    assert found == [f'podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: {ABOVE_MAX}',
                     f'podSets[0].template.spec.containers[1]: Invalid value: ["memory"]: {BELOW_MIN}',
                     f'podSets[0].template.spec: Invalid value: ["cpu"]: {ABOVE_MAX}']


def test_a_workload_s_requests_take_the_defaults_and_a_refused_pod_is_not_admissible() -> None:
    s = summarize([_decode(limit_range("a", "ns", {"type": "Container", "defaultRequest": {"cpu": "2"},
                                                   "max": {"cpu": "3"}}))])
    bare = workload("w", "ns", "lq", count=3)
    spec = spec_of(_decode(bare), priority=0, limit_ranges=s)
    assert spec.pod_sets[0].requests == {"cpu": 6000} and spec.limits_error == ""
    big = spec_of(_decode(workload("big", "ns", "lq", cpu="4")), priority=0, limit_ranges=s)
    assert "request (4) exceeds its limit (3)" in big.limits_error  # the defaulted limit is the max
    plain = spec_of(_decode(bare), priority=0)
    assert plain.pod_sets[0].requests == {} and plain.shape != spec.shape


def test_the_world_reads_pending_workloads_again_when_a_namespace_s_limit_ranges_change() -> None:
    world = World()
    for doc in (namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="4")),
                local_queue("lq", "ns", "cq"), workload("w", "ns", "lq"), workload("held", "ns", "lq")):
        world.apply(doc)
    world.placed["ns/held"] = world.workloads["ns/held"].observed or _placement()  # as if admitted
    held = world.workloads["ns/held"]
    lr = limit_range("defaults", "ns", {"type": "Container", "defaultRequest": {"cpu": "1"}})
    assert world.apply(lr)[0] is Change.ROUTING
    assert world.workloads["ns/w"].pod_sets[0].requests == {"cpu": 1000}
    assert world.workloads["ns/held"] is held  # admitted: kept as it was admitted
    assert world.apply(workload("later", "ns", "lq"))[0] is Change.WORKLOAD
    assert world.workloads["ns/later"].pod_sets[0].requests == {"cpu": 1000}
    assert world.delete(lr)[0] is Change.ROUTING
    assert world.workloads["ns/w"].pod_sets[0].requests == {}


def test_a_limit_range_the_api_server_would_refuse_is_refused() -> None:
    world = World()
    change, key = world.apply(limit_range("bad", "ns", {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}},
                                          {"type": "Pod", "default": {"cpu": "1"}}))
    assert change is Change.REJECTED
    assert "spec.limits[0].min[cpu]" in world.rejected[key] and "spec.limits[1].default" in world.rejected[key]


def _placement() -> Any:
    from kueued.scheduling.workload import Placement
    return Placement("cq", {}, {})
