"""Evictions that are not preemptions (Kueue's workload controller): a deactivated Workload, and
one admitted behind a LocalQueue or ClusterQueue whose stopPolicy is HoldAndDrain; and the
workloads that may not queue meanwhile (``actors.drains``)."""

from __future__ import annotations

import copy
from typing import Any

from actors.harness import LiveEngine
from kueued.kube.port import InMemoryPort
from kueued.world import World
from tests.actors.test_two_phase_eviction import SlowRelease
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def _world() -> World:
    world = World()
    for m in [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
              local_queue("lq", "ns", "cq")]:
        world.apply(m)
    return world


def _stopped(policy: str) -> dict[str, Any]:
    lq = local_queue("lq", "ns", "cq")
    lq["spec"]["stopPolicy"] = policy
    return lq


def _evictions(port: InMemoryPort) -> list[tuple[str, str]]:
    return [(c.workload, c.detail.split(":", 1)[0]) for c in port.log if c.kind == "evict"]


def _inactive(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["spec"]["active"] = False
    return doc


def test_a_deactivated_workload_is_evicted_waits_outside_the_queues_and_comes_back_when_active() -> None:
    world, port = _world(), InMemoryPort()
    running = workload("running", "ns", "lq", cpu="2", created=1)
    with LiveEngine(world, port=port) as engine:
        engine.apply(running)
        engine.apply(_inactive(workload("off", "ns", "lq", cpu="1", created=2)))
        engine.run()
        assert set(world.placed) == {"ns/running"} and "deactivated" in engine.unrouted["ns/off"]
        engine.apply(_inactive(running))
        engine.run()
        assert world.placed == {} and "deactivated" in engine.unrouted["ns/running"]
        assert _evictions(port) == [("ns/running", "Deactivated")]
        assert "ns/running" not in engine.coordinator.evicted  # not a preemption
        engine.apply(workload("off", "ns", "lq", cpu="1", created=2))  # active again
        engine.run()
        assert set(world.placed) == {"ns/off"}


def test_a_local_queue_on_hold_keeps_what_it_admitted_and_one_draining_evicts_it() -> None:
    world, port = _world(), InMemoryPort()
    with LiveEngine(world, port=port) as engine:
        engine.apply(workload("a", "ns", "lq", cpu="1", created=1))
        engine.run()
        engine.apply(_stopped("Hold"))
        engine.apply(workload("b", "ns", "lq", cpu="1", created=2))
        engine.run()
        assert set(world.placed) == {"ns/a"} and "LocalQueue lq is stopped" in engine.unrouted["ns/b"]
        engine.apply(_stopped("HoldAndDrain"))
        engine.run()
        assert world.placed == {} and _evictions(port) == [("ns/a", "LocalQueueStopped")]
        engine.apply(local_queue("lq", "ns", "cq"))
        engine.run()
        assert set(world.placed) == {"ns/a", "ns/b"}


def test_a_draining_cluster_queue_evicts_in_two_phases_and_keeps_its_workloads_queued() -> None:
    world, port = _world(), SlowRelease()
    with LiveEngine(world, port=port) as engine:
        engine.apply(workload("a", "ns", "lq", cpu="2"))
        engine.run()
        engine.apply(cluster_queue("cq", quotas("default", cpu="2"), stopPolicy="HoldAndDrain"))
        engine.run()
        assert _evictions(port) == [("ns/a", "ClusterQueueStopped")]
        assert set(world.placed) == {"ns/a"}  # its reservation is not cleared yet: it holds the quota
        assert engine.state.cluster_queues["cq"].node.usage[("default", "cpu")] == 2000
        port.held.clear()
        engine.run()
        assert world.placed == {} and "ns/a" not in engine.unrouted  # it waits in its (stopped) queue
        engine.apply(cluster_queue("cq", quotas("default", cpu="2")))
        engine.run()
        assert set(world.placed) == {"ns/a"}
    assert len(_evictions(port)) == 1


def _gated(doc: dict[str, Any], gates: str) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/admission-gated-by"] = gates
    return doc


def test_an_admission_gated_workload_waits_until_its_last_gate_is_removed() -> None:
    """Kueue's AdmissionGatedBy (beta, on by default): while the annotation names a gate the
    workload reserves no quota (reason AdmissionGated); removing gates one by one releases it."""
    world, port = _world(), InMemoryPort()
    wl = workload("gated", "ns", "lq", cpu="1", created=1)
    with LiveEngine(world, port=port) as engine:
        engine.apply(_gated(wl, "example.com/a,example.com/b"))
        engine.run()
        assert world.placed == {}
        assert engine.unrouted["ns/gated"] == "Admission is gated by: example.com/a,example.com/b"
        engine.apply(_gated(wl, "example.com/b"))
        engine.run()
        assert world.placed == {}
        engine.apply(_gated(wl, ""))
        engine.run()
        assert set(world.placed) == {"ns/gated"}


def test_with_the_gate_off_the_annotation_holds_nothing_back() -> None:
    world, port = _world(), InMemoryPort()
    world.apply({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                 "featureGates": {"AdmissionGatedBy": False}})
    with LiveEngine(world, port=port) as engine:
        engine.apply(_gated(workload("gated", "ns", "lq", cpu="1"), "example.com/a"))
        engine.run()
        assert set(world.placed) == {"ns/gated"}


def test_a_deactivated_workload_is_evicted_once_however_often_the_tree_changes_after() -> None:
    """Deactivated while admitted (its version still carries the admission, as a cluster's does), it is
    evicted once.  The tree changing later must not adopt that stale admission again and evict again
    (found on a cluster: every ClusterQueue edit evicted every workload deactivated since the start)."""
    world, port = _world(), InMemoryPort()
    admitted = workload("w", "ns", "lq", cpu="1", created=1)
    admitted["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
        "conditions": [{"type": t, "status": "True", "reason": t, "lastTransitionTime": "2026-01-01T00:00:05Z"}
                       for t in ("QuotaReserved", "Admitted")]}
    with LiveEngine(world, port=port) as engine:
        engine.apply(admitted)
        engine.run()
        assert set(world.placed) == {"ns/w"}
        engine.apply(_inactive(admitted))
        engine.run()
        for cpu in ("3", "4"):  # two ClusterQueue edits: each rebuilds the tree and places every workload
            engine.apply(cluster_queue("cq", quotas("default", cpu=cpu)))
            engine.run()
        assert _evictions(port) == [("ns/w", "Deactivated")]
        assert world.placed == {} and "deactivated" in engine.unrouted["ns/w"]
