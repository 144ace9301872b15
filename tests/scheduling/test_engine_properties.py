"""Whole-engine properties over random cohort trees, limits, policies and workloads.

* No node of the tree ever holds more than the tree allows once the run is quiescent
  (nothing was pre-admitted, so every admission went through the checks).
* Quiescence is real: at the end, the pure cycle function (``run_cycle``, the reference
  the actors call) finds nothing to admit or evict for any workload left pending.
* A run reaches quiescence (bounded: the engine reports how many cycles it took).
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors.harness import LiveEngine
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.quota import node as qn
from kueued.scheduling.cycle import run_cycle
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload

cpu = st.integers(0, 8).map(str)
maybe_cpu = st.one_of(st.none(), cpu)
policy = st.sampled_from(["Never", "LowerPriority", "Any"])


@st.composite
def scenarios(draw) -> list[dict]:
    docs = [namespace("ns"), flavor("default"), flavor("spot")]
    n_cohorts = draw(st.integers(1, 4))
    for i in range(n_cohorts):
        parent = "" if i == 0 else f"co{draw(st.integers(0, i - 1))}"
        limits = (draw(cpu), draw(maybe_cpu) if parent else None, draw(maybe_cpu) if parent else None)
        docs.append(cohort(f"co{i}", quotas("default", cpu=limits), parent=parent))
    n_cq = draw(st.integers(1, 5))
    for i in range(n_cq):
        nominal = draw(cpu)
        lending = draw(maybe_cpu)
        if lending is not None and int(lending) > int(nominal):
            lending = nominal
        reclaim = draw(policy)
        preemption: dict = {"withinClusterQueue": draw(st.sampled_from(
                                ["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"])),
                            "reclaimWithinCohort": reclaim}
        if reclaim != "Never" and draw(st.booleans()):
            preemption["borrowWithinCohort"] = {"policy": "LowerPriority"}
            if draw(st.booleans()):
                preemption["borrowWithinCohort"]["maxPriorityThreshold"] = draw(st.sampled_from([0, 5]))
        docs.append(cluster_queue(
            f"cq{i}", quotas("default", cpu=(nominal, draw(maybe_cpu), lending)), quotas("spot", cpu=draw(cpu)),
            cohort=f"co{draw(st.integers(0, n_cohorts - 1))}",
            strategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])), preemption=preemption))
        docs.append(local_queue(f"lq{i}", "ns", f"cq{i}"))
    for w in range(draw(st.integers(1, 14))):
        docs.append(workload(f"w{w}", "ns", f"lq{draw(st.integers(0, n_cq - 1))}", created=w,
                             priority=draw(st.sampled_from([0, 0, 5, 10])), cpu=draw(st.integers(1, 6).map(str))))
    return docs


@st.composite
def two_waves(draw) -> tuple[list[dict], list[dict]]:
    """A scenario, then a second wave of higher-priority workloads once the first has settled."""
    docs = draw(scenarios())
    n_cq = sum(1 for d in docs if d["kind"] == "ClusterQueue")
    wave = [workload(f"late{w}", "ns", f"lq{draw(st.integers(0, n_cq - 1))}", created=100 + w,
                     priority=draw(st.sampled_from([5, 10, 20])), cpu=draw(st.integers(1, 6).map(str)))
            for w in range(draw(st.integers(1, 6)))]
    return docs, wave


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(two_waves())
def test_no_node_exceeds_the_tree_and_runs_end(waves) -> None:
    """No over-admission and no flopping (KEP-1337): 2,000 random trees, policies and two
    waves of workloads, the second arriving (with higher priorities) after the first settled."""
    docs, wave = waves
    world = World()
    for d in docs:
        world.apply(d)
    with LiveEngine(world) as engine:
        assert engine.run(max_cycles=500) < 500, "no quiescence: the run flops"
        for d in wave:
            engine.apply(d)
        assert engine.run(max_cycles=500) < 500, "no quiescence: the run flops"
        event(f"evictions: {'some' if engine.events else 'none'}")
    state = engine.state
    assert qn.violations(state.nodes()) == []
    # and usage is conserved up the tree
    for co in state.cohorts.values():
        for fr in co.node.usage:
            assert co.node.usage[fr] == sum(qn.parent_share(c, fr, c.usage.get(fr, 0)) for c in co.node.children)
    held: dict = {}
    for placed in world.placed.values():
        for fr, v in placed.usage.items():
            held[(placed.cluster_queue, fr)] = held.get((placed.cluster_queue, fr), 0) + v
    for name, cq in state.cluster_queues.items():
        for fr, v in cq.node.usage.items():
            assert v == held.get((name, fr), 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_at_quiescence_the_pure_cycle_admits_and_evicts_nothing(docs) -> None:
    """Each workload left pending (of a StrictFIFO queue only the head: the rest wait behind
    it), offered to ``run_cycle`` on the final balances beside every StrictFIFO queue's head
    (those are nominated every cycle, and one that waits for quota it cannot reclaim holds
    that quota back, as Kueue's does), is neither admitted nor makes anyone evict: the actors
    stopped because nothing could change, not early."""
    world = World()
    for d in docs:
        world.apply(d)
    with LiveEngine(world) as engine:
        engine.run(max_cycles=500)
        states = {name: engine.pending(name) for name in engine.coordinator.cluster_queues}
    pending = {name: [wl.key for wl in held] for name, held in states.items()}
    state_of = {wl.key: wl for held in states.values() for wl in held}  # as its queue holds it
    final = engine.state
    strict = {name for name in pending if final.cluster_queues[name].spec.queueing_strategy == "StrictFIFO"}
    blocking = {name: keys[0] for name, keys in pending.items() if name in strict and keys}
    for name, keys in pending.items():
        for key in keys[:1] if name in strict else keys:
            heads = {**blocking, name: key}
            snap = final.clone()
            result = run_cycle(snap, [(state_of[k], q) for q, k in heads.items()],
                               preemptor=make_preemptor(snap, world), namespaces=world.namespaces,
                               iterate=make_iterate(world))
            assert not result.admitted and not result.evictions, (key, name, result.entries)
