"""A workload's scheduling state belongs to the queue that holds it, and outlives its versions.

The World keeps each Workload's current version as an immutable spec; the ClusterQueue actor
that holds the workload owns its state (where it holds quota, how often it was evicted, whom
it evicted).  That state survives whatever moves the workload between queue entries: a new
version of the Workload, a routing change that takes every pending workload out and routes
it again, the deletion of the ClusterQueue it waited in.  Losing it would let a preemptor
evict the same victim twice (the no-flopping rule) and reset the eviction counts preemption
orders candidates by.
"""

from __future__ import annotations

from actors.harness import LiveEngine
from kueued.world import World
from tests.actors.test_two_phase_eviction import SlowRelease
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def _states(engine: LiveEngine, cq: str) -> dict[str, tuple[int, frozenset[str]]]:
    return {wl.key: (wl.evictions, frozenset(wl.victims)) for wl in engine.pending(cq)}


def _setup() -> tuple[World, SlowRelease, LiveEngine]:
    """``low`` (2 cpu) fills ``q``; the port clears an evicted reservation when the test says."""
    world = World()
    for m in [namespace("ns"), flavor("default"),
              cluster_queue("q", quotas("default", cpu="2"), preemption={"withinClusterQueue": "LowerPriority"}),
              local_queue("lq", "ns", "q"), workload("low", "ns", "lq", cpu="2", priority=0, created=1)]:
        world.apply(m)
    port = SlowRelease()
    engine = LiveEngine(world, port=port)
    return world, port, engine


def _preempt(engine: LiveEngine) -> None:
    """``high`` evicts ``low``: the first phase is committed, the reservation not yet cleared."""
    engine.run()
    engine.apply(workload("high", "ns", "lq", cpu="2", priority=10, created=2))
    engine.run()


def test_a_routing_change_and_a_new_version_keep_what_a_pending_preemptor_evicted() -> None:
    world, port, engine = _setup()
    with engine:
        _preempt(engine)
        assert _states(engine, "q") == {"ns/high": (0, frozenset({"ns/low"}))}  # waits for its victim
        engine.apply(local_queue("other", "ns", "q"))  # a routing change: every pending is routed again
        assert _states(engine, "q") == {"ns/high": (0, frozenset({"ns/low"}))}
        relabelled = workload("high", "ns", "lq", cpu="2", priority=10, created=2)
        relabelled["metadata"]["labels"] = {"team": "x"}
        engine.apply(relabelled)  # a new version of the pending preemptor
        assert _states(engine, "q") == {"ns/high": (0, frozenset({"ns/low"}))}
        port.held.clear()
        engine.run()
        assert set(world.placed) == {"ns/high"}
        assert _states(engine, "q") == {"ns/low": (1, frozenset())}
        engine.apply(local_queue("third", "ns", "q"))
        assert _states(engine, "q") == {"ns/low": (1, frozenset())}  # the victim's count goes with it
    assert [c.workload for c in port.log if c.kind == "evict"] == ["ns/low"]


def test_a_deleted_cluster_queue_s_pending_keep_their_history_where_they_go_next() -> None:
    world, port, engine = _setup()
    with engine:
        _preempt(engine)
        port.held.clear()
        engine.run()
        assert _states(engine, "q") == {"ns/low": (1, frozenset())}
        engine.apply(cluster_queue("r", quotas("default", cpu="0")))
        engine.delete(local_queue("lq", "ns", "q"))  # low routes nowhere for a while
        assert _states(engine, "q") == {} and "ns/low" in engine.coordinator.unrouted
        engine.apply(local_queue("lq", "ns", "r"))
        assert _states(engine, "r") == {"ns/low": (1, frozenset())}
        engine.delete(cluster_queue("r", quotas("default", cpu="0")))  # nothing admitted: gone at once
        assert "r" not in engine.coordinator.cluster_queues
        engine.delete(local_queue("lq", "ns", "r"))
        engine.apply(local_queue("lq", "ns", "q"))
        assert _states(engine, "q") == {"ns/low": (1, frozenset())}
        assert not world.rejected


def test_a_workload_first_seen_evicted_but_still_reserved_holds_its_quota() -> None:
    """Seen for the first time between an eviction's two writes (a watch's re-list, another
    scheduler's eviction): its status says it still holds quota, so it does until the second
    write clears it; handing that quota on would admit more than the tree allows.  Its eviction
    is finished, never issued again: a preemptor that targets it counts it (Kueue's
    IssuePreemptions), and the eviction is not one of this run's."""
    world = World()
    for m in [namespace("ns"), flavor("default"),
              cluster_queue("q", quotas("default", cpu="2"), preemption={"withinClusterQueue": "LowerPriority"}),
              local_queue("lq", "ns", "q")]:
        world.apply(m)
    victim = workload("v", "ns", "lq", cpu="2")
    victim["status"] = {
        "admission": {"clusterQueue": "q", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}, "count": 1}]},
        "conditions": [{"type": t, "status": "True", "reason": t, "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"} for t in ("QuotaReserved", "Evicted")]}
    port = SlowRelease()
    with LiveEngine(world, port=port) as engine:
        engine.run()
        engine.apply(victim)
        engine.apply(workload("next", "ns", "lq", cpu="2", priority=10))
        engine.run()
        assert set(world.placed) == {"ns/v"}
        assert engine.state.cluster_queues["q"].node.usage[("default", "cpu")] == 2000
        port.held.clear()  # the second write lands
        engine.run()
        assert set(world.placed) == {"ns/next"}
        assert "ns/v" not in engine.coordinator.evicted
    assert [c.workload for c in port.log if c.kind == "evict"] == []


def test_a_new_queueing_strategy_keeps_the_queue_its_workloads_and_their_history() -> None:
    world, port, engine = _setup()
    with engine:
        _preempt(engine)
        port.held.clear()
        engine.run()
        actor = engine.coordinator.cluster_queues["q"]
        assert not actor.queue.strict
        engine.apply(cluster_queue("q", quotas("default", cpu="2"), strategy="StrictFIFO",
                                   preemption={"withinClusterQueue": "LowerPriority"}))
        assert engine.coordinator.cluster_queues["q"] is actor and actor.queue.strict  # told, not replaced
        assert _states(engine, "q") == {"ns/low": (1, frozenset())}
        assert set(world.placed) == {"ns/high"}
        assert engine.state.cluster_queues["q"].node.usage[("default", "cpu")] == 2000
