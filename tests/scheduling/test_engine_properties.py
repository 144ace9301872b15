"""Whole-engine properties over random cohort trees, limits, policies and workloads.

* No node of the tree ever holds more than the tree allows once the run is quiescent
  (nothing was pre-admitted, so every admission went through the checks).
* The actor engine and the pure synchronous core make the same decisions.
* A run reaches quiescence (bounded: the engine reports how many cycles it took).
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors.simulation import run_actors
from kueued.engine.sync import Engine
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.quota import node as qn
from kueued.simulate import simulate
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


def _final_state(docs: list[dict]) -> tuple[Engine, World]:
    world = World()
    for d in docs:
        world.apply(d)
    engine = Engine(world, preemptor=make_preemptor, iterate=make_iterate(world))
    engine.rebuild()
    engine.run(max_cycles=500)
    return engine, world


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(two_waves())
def test_no_node_exceeds_the_tree_and_runs_end(waves) -> None:
    """No over-admission and no flopping (KEP-1337): 2,000 random trees, policies and two
    waves of workloads, the second arriving (with higher priorities) after the first settled."""
    docs, wave = waves
    engine, world = _final_state(docs)
    assert engine.cycles < 500, "no quiescence: the run flops"
    for d in wave:
        world.apply(d)
    engine.rebuild()
    before = engine.cycles
    engine.run(max_cycles=500)
    event(f"evictions: {'some' if engine.events else 'none'}")
    assert engine.cycles - before < 500, "no quiescence: the run flops"
    assert qn.violations(engine.state.nodes()) == []
    # and usage is conserved up the tree
    for co in engine.state.cohorts.values():
        for fr in co.node.usage:
            assert co.node.usage[fr] == sum(qn.parent_share(c, fr, c.usage.get(fr, 0)) for c in co.node.children)
    held = {}
    for wl in world.workloads.values():
        for fr, v in wl.usage.items():
            held[(wl.cluster_queue, fr)] = held.get((wl.cluster_queue, fr), 0) + v
    for name, cq in engine.state.cluster_queues.items():
        for fr, v in cq.node.usage.items():
            assert v == held.get((name, fr), 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_actor_engine_agrees_with_the_pure_core(docs) -> None:
    sync, live = simulate(docs), simulate(docs, runner=run_actors)
    assert live.workloads == sync.workloads
    assert live.evictions == sync.evictions
