"""A ClusterQueue deleted while workloads are admitted in it terminates, as Kueue's finalizer keeps it.

Until its last admitted workload leaves it stays in its Cohort, inactive: its admitted workloads
keep charging the tree (their pods still run), and nothing new is admitted in it.  Removed at
once, its workloads' usage vanished from the tree and a sibling was given quota they still held.
"""

from __future__ import annotations

import copy

from actors.harness import LiveEngine
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload

FR = ("default", "cpu")


def _world() -> tuple[World, dict, dict]:
    """Cohort ``team`` owns 4 cpu; its queues a and b own none and may borrow all of it."""
    world = World()
    a = cluster_queue("a", quotas("default", cpu=("0", "4")), cohort="team")
    b = cluster_queue("b", quotas("default", cpu=("0", "4")), cohort="team")
    for m in [namespace("ns"), flavor("default"), cohort("team", quotas("default", cpu="4")), a, b,
              local_queue("lq-a", "ns", "a"), local_queue("lq-b", "ns", "b"),
              workload("a1", "ns", "lq-a", cpu="4", created=1)]:
        world.apply(m)
    return world, a, b


def test_a_deleted_queue_keeps_charging_its_cohort_until_its_workloads_leave() -> None:
    world, a, _ = _world()
    with LiveEngine(world) as engine:
        engine.run()
        assert world.placed["ns/a1"].cluster_queue == "a"
        engine.delete(a)
        assert "a" in world.cluster_queues and world.terminating == {"a"}
        engine.apply(workload("b1", "ns", "lq-b", cpu="4", created=2))
        engine.run()
        assert "ns/b1" not in world.placed  # the cohort's 4 cpu are still a1's
        assert engine.state.cohorts["team"].node.usage[FR] == 4000
        engine.finish("ns/a1")
        engine.run()
        assert "a" not in world.cluster_queues and not world.terminating
        assert "a" not in engine.coordinator.cluster_queues  # its actor stopped
        assert world.placed["ns/b1"].cluster_queue == "b"
        assert engine.state.cohorts["team"].node.usage[FR] == 4000


def test_a_terminating_queue_admits_nothing_new() -> None:
    world, a, _ = _world()
    world.apply(workload("a2", "ns", "lq-a", cpu="1", created=2))
    with LiveEngine(world) as engine:
        engine.run()
        assert "ns/a2" not in world.placed  # the cohort is full
        engine.delete(a)
        engine.run()
        cq = engine.state.cluster_queues["a"]
        assert not cq.active and "terminating" in cq.inactive_reason
        engine.finish("ns/a1")  # a2 would fit now, but not in a queue that is going away
        engine.run()
        assert "a" not in world.cluster_queues
        assert "ns/a2" not in world.placed
        assert "ClusterQueue a doesn't exist" in engine.coordinator.unrouted["ns/a2"]


def test_a_queue_with_nothing_admitted_goes_at_once() -> None:
    world, _, b = _world()
    with LiveEngine(world) as engine:
        engine.run()
        engine.delete(b)
        assert "b" not in world.cluster_queues and not world.terminating


def test_a_queue_held_by_a_finalizer_goes_when_the_api_server_deletes_it() -> None:
    """On a cluster a ClusterQueue carrying Kueue's finalizer is not gone when deleted: the watch
    shows it with a deletionTimestamp, and it goes when the watch says it is deleted (once the
    status publisher has taken the finalizer off: tests/kube/test_finalizers.py)."""
    world, a, _ = _world()
    with LiveEngine(world) as engine:
        engine.run()
        held = copy.deepcopy(a)
        held["metadata"]["deletionTimestamp"] = "2026-11-26T12:00:00Z"
        held["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
        engine.apply(held)
        assert world.terminating == {"a"} and world.held_by_finalizer("a")
        assert not engine.state.cluster_queues["a"].active
        engine.finish("ns/a1")
        engine.run()
        assert "a" in world.terminating and not world.holds_admitted("a")  # the finalizer's to go first
        gone = copy.deepcopy(held)
        gone["metadata"]["finalizers"] = []
        engine.delete(gone)
        engine.run()
        assert "a" not in world.cluster_queues and not world.terminating


def test_applied_again_while_terminating_it_is_a_queue_again() -> None:
    """A manifest directory's file put back: the queue is active again and keeps its workloads."""
    world, a, _ = _world()
    with LiveEngine(world) as engine:
        engine.run()
        engine.delete(a)
        engine.apply(a)
        engine.run()
        assert not world.terminating and engine.state.cluster_queues["a"].active
        assert world.placed["ns/a1"].cluster_queue == "a"
        engine.apply(workload("a2", "ns", "lq-a", cpu="1", created=2))
        engine.finish("ns/a1")
        engine.run()
        assert world.placed["ns/a2"].cluster_queue == "a"
