"""Pods that finished for good (``status.reclaimablePods``, KEP-78) need no quota: a pending
Workload asks for the rest only, and an admitted one gives theirs back at once (Kueue's
``totalRequestsFromPodSets`` / ``totalRequestsFromAdmission``)."""

from __future__ import annotations

import copy
from typing import Any

from actors.harness import LiveEngine
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def _admitted(doc: dict[str, Any], count: int, cpu: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "count": count, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": cpu}}]},
        "conditions": [{"type": t, "status": "True", "reason": t, "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"} for t in ("QuotaReserved", "Admitted")]}
    return doc


def test_an_admitted_workload_s_reclaimable_pods_free_their_quota_for_the_next() -> None:
    world = World()
    for m in [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="4")),
              local_queue("lq", "ns", "cq")]:
        world.apply(m)
    big = _admitted(workload("big", "ns", "lq", count=4, cpu="1", created=1), 4, "4")
    with LiveEngine(world) as engine:
        engine.apply(big)
        engine.apply(workload("next", "ns", "lq", count=2, cpu="1", created=2))
        engine.run()
        assert set(world.placed) == {"ns/big"}
        done = copy.deepcopy(big)
        done["status"]["reclaimablePods"] = [{"name": "main", "count": 2}]
        engine.apply(done)
        engine.run()
        assert set(world.placed) == {"ns/big", "ns/next"}
        assert world.placed["ns/big"].usage == {("default", "cpu"): 2000}
        assert engine.state.cluster_queues["cq"].node.usage[("default", "cpu")] == 4000


def test_a_pending_workload_asks_only_for_the_pods_still_to_run() -> None:
    world = World()
    doc = workload("w", "ns", "lq", count=4, cpu="1")
    doc["status"] = {"reclaimablePods": [{"name": "main", "count": 3}]}
    world.apply(doc)
    (ps,) = world.workloads["ns/w"].pod_sets
    assert (ps.count, ps.requests) == (1, {"cpu": 1000})
