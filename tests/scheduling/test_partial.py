"""Partial admission (Kueue's gate PartialAdmission, on by default): a pod set with ``minCount``
is admitted with the most pods that fit, or that find preemption targets, when all of them do not."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actors.harness import LiveEngine
from actors.reclaim import query_for
from kueued.kube.port import InMemoryPort
from kueued.model import api
from kueued.scheduling import partial
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def _partial(name: str, *, count: int, min_count: int, priority: int = 0, **requests: str) -> dict[str, Any]:
    doc = workload(name, "ns", "lq", count=count, priority=priority, **requests)
    doc["spec"]["podSets"][0]["minCount"] = min_count
    return doc


class _Recording(InMemoryPort):
    def __init__(self) -> None:
        super().__init__()
        self.admitted: dict[str, tuple[dict, dict[str, int] | None]] = {}

    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int], counts: dict[str, int] | None = None) -> bool:
        self.admitted[workload] = (usage, counts)
        return await super().admit(workload, cluster_queue=cluster_queue, flavors=flavors, usage=usage)


def _run(*docs: dict[str, Any], cpu: str = "10", preemption: dict | None = None,
         gates: dict[str, bool] | None = None) -> tuple[World, _Recording]:
    world, port = World(), _Recording()
    cq = cluster_queue("cq", quotas("default", cpu=cpu), **({"preemption": preemption} if preemption else {}))
    for doc in (namespace("ns"), flavor("default"), cq, local_queue("lq", "ns", "cq"), *docs):
        world.apply(doc)
    if gates is not None:
        world.settings = world.settings.__class__(**{**_fields(world.settings), "feature_gates": gates})
    with LiveEngine(world, port=port) as engine:
        engine.run()
    return world, port


def _fields(settings: Any) -> dict[str, Any]:
    return {f: getattr(settings, f) for f in settings.__struct_fields__}


def test_the_most_pods_that_fit_are_admitted_and_recorded() -> None:
    world, port = _run(_partial("w", count=8, min_count=2, cpu="2"), cpu="10")  # 8 x 2 cpu; 5 fit
    usage, counts = port.admitted["ns/w"]
    assert counts == {"main": 5} and usage == {("default", "cpu"): 10_000}
    assert world.placed["ns/w"].counts == {"main": 5}


def test_below_the_minimum_nothing_is_admitted_and_without_min_count_nothing_is_reduced() -> None:
    _, port = _run(_partial("short", count=8, min_count=6, cpu="2"), cpu="10")  # 6 x 2 cpu > 10
    assert "ns/short" not in port.admitted
    _, port = _run(workload("whole", "ns", "lq", count=8, cpu="2"), cpu="10")
    assert "ns/whole" not in port.admitted


def test_the_gate_off_admits_only_whole_workloads() -> None:
    _, port = _run(_partial("w", count=8, min_count=2, cpu="2"), cpu="10", gates={"PartialAdmission": False})
    assert "ns/w" not in port.admitted


def test_fewer_pods_that_need_preemption_beat_fewer_still_that_fit() -> None:
    """Kueue's reducer takes the smallest cut that fits *or finds targets*: with 10 of 20 cpu held
    by a lower-priority workload, 10 pods evicting it beat 5 that fit beside it."""
    low = workload("low", "ns", "lq", cpu="10", priority=-4)
    low["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "10"}}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    world, port = _run(low, _partial("high", count=30, min_count=4, cpu="1", priority=4), cpu="20",
                       preemption={"withinClusterQueue": "LowerPriority"})
    assert port.admitted["ns/high"][1] == {"main": 20}
    assert [c.workload for c in port.log if c.kind == "evict"] == ["ns/low"]


def test_a_head_that_cannot_fit_whole_still_asks_the_tree_for_candidates_when_it_may_shrink() -> None:
    world = World()
    for doc in (namespace("ns"), flavor("default"),
                cluster_queue("cq", quotas("default", cpu="4"), preemption={"withinClusterQueue": "LowerPriority"}),
                local_queue("lq", "ns", "cq"), _partial("w", count=8, min_count=2, cpu="1"),
                workload("plain", "ns", "lq", count=8, cpu="1")):
        world.apply(doc)
    with LiveEngine(world) as engine:
        snap = engine.state.clone()
    cq = snap.cluster_queues["cq"]
    assert type(query_for(snap, cq, WorkloadInfo(world.workloads["ns/w"]), fair=False)).__name__ == "Reclaim"
    assert type(query_for(snap, cq, WorkloadInfo(world.workloads["ns/plain"]), fair=False)).__name__ == "Assignment"


@given(count=st.integers(1, 40), minimum=st.integers(1, 40), room=st.integers(0, 50))
def test_the_search_finds_the_largest_count_that_works(count: int, minimum: int, room: int) -> None:
    minimum = min(minimum, count)
    wl = WorkloadInfo.of(api.decode(_partial("w", count=count, min_count=minimum, cpu="1")))  # type: ignore[arg-type]
    tried: list[int] = []

    def works(counts: list[int]) -> int | None:
        tried.append(counts[0])
        return counts[0] if counts[0] <= room else None

    found = partial.search(wl, works)
    best = min(room, count - 1)  # the full count is not searched: it was tried before
    assert found == (best if best >= minimum else None)
    assert all(minimum <= n < count for n in tried)


def test_a_reduced_view_scales_the_requests_and_keeps_the_state() -> None:
    wl = WorkloadInfo.of(api.decode(_partial("w", count=4, min_count=1, cpu="1500m")))  # type: ignore[arg-type]
    wl.evictions = 2
    view = partial.reduced(wl, [3])
    assert view.pod_sets[0].count == 3 and view.pod_sets[0].requests == {"cpu": 4500}
    assert (view.key, view.evictions, wl.pod_sets[0].requests) == (wl.key, 2, {"cpu": 6000})
