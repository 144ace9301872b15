"""Reclaim travels down the tree as messages: checked against the pure search over the whole tree.

Random trees, limits, policies and workloads (``test_engine_properties.scenarios``) are run
to quiescence on the actors; then, on the final balances:

* the queues a :class:`~actors.messages.Reclaim` query reaches through the actors are
  exactly those the pure classical search looks at (``candidates.reclaim_reach``): the
  Cohorts prune every subtree within its quota, and nothing else;
* for every pending workload, the pure cycle given only the workloads its query reached
  decides exactly what it decides given every workload of the tree (the same victims, the
  same verdict), under classical preemption and under fair sharing.  A pruning that drops
  a subtree the search would enter changes some victim, so it fails here.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.harness import LiveEngine
from actors.messages import Reclaim
from actors.reclaim import gather, query_for
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.scheduling.cycle import run_cycle
from kueued.scheduling.preemption.candidates import reclaim_reach
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import World
from tests.scheduling.test_engine_properties import scenarios

FAIR_SHARING = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}


def _settled(docs: list[dict]) -> tuple[World, LiveEngine]:
    world = World()
    for d in docs:
        world.apply(d)
    engine = LiveEngine(world)
    return world, engine


def _decide(snap: Snapshot, world: World, key: str, cq: str) -> tuple:
    snap = snap.clone()
    result = run_cycle(snap, [(WorkloadInfo(world.workloads[key]), cq)], preemptor=make_preemptor(snap, world),
                       namespaces=world.namespaces, iterate=make_iterate(world))
    (entry,) = result.entries
    return (entry.status, sorted(t.workload.key for t in entry.targets),
            sorted((t.workload.key, t.reason) for t, _ in result.evictions))


def _only(snap: Snapshot, reached: dict) -> Snapshot:
    """The snapshot as a round sees it: each queue's workloads only where a query reached it."""
    out = snap.clone()
    for name, cq in out.cluster_queues.items():
        cq.workloads = {wl.key: wl for wl in reached.get(name, ())}
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_a_reclaim_query_reaches_what_the_pure_search_looks_at_and_decides_alike(docs, fair) -> None:
    if fair:
        docs = [FAIR_SHARING, *docs]
    world, engine = _settled(docs)
    with engine:
        engine.run(max_cycles=500)
        pending = {name: [wl.key for wl in engine.pending(name)] for name in engine.coordinator.cluster_queues}
        final = engine.state
        actors = engine.coordinator.cluster_queues
        for name, keys in pending.items():
            cq = final.cluster_queues[name]
            frs = frozenset(fr for fr in cq.node.limits)
            if not frs:
                continue
            query = Reclaim(name, frs, fair)
            found, _ = engine._call(gather, actors[name], query)
            if not fair:
                assert set(found) == reclaim_reach(final, cq, frs), name
            for key in keys:
                asked = query_for(final, cq, WorkloadInfo(world.workloads[key]), fair=fair)
                reached = engine._call(gather, actors[name], asked)[0] if isinstance(asked, Reclaim) else {}
                assert _decide(_only(final, reached), world, key, name) == _decide(final, world, key, name), key


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans(), st.randoms(use_true_random=False))
def test_a_round_s_queries_reach_together_what_each_reaches_alone(docs, fair, rnd) -> None:
    """``ask_all`` does not send a classical query whose preemptor an earlier one searched: what
    a round's queries reach together is still exactly what each reaches alone, put together."""
    from actors.reclaim import ask_all
    if fair:
        docs = [FAIR_SHARING, *docs]
    world, engine = _settled(docs)
    with engine:
        engine.run(max_cycles=500)
        final = engine.state
        actors = engine.coordinator.cluster_queues
        queries = [Reclaim(name, frozenset(cq.node.limits), fair, cohort=rnd.random() < 0.8)
                   for name, cq in final.cluster_queues.items() if cq.node.limits]
        rnd.shuffle(queries)
        together = engine._call(ask_all, actors, queries)
        alone: dict[str, tuple] = {}
        for q in queries:
            alone.update(engine._call(gather, actors[q.preemptor], q)[0])
    assert {k: [wl.key for wl in v] for k, v in together.items()} == {k: [wl.key for wl in v] for k, v in alone.items()}


def test_a_query_skips_a_subtree_within_its_quota_and_enters_one_over_it() -> None:
    """root: left {a (3 cpu, holds 3), b (3, holds 0)}, right {c (2, holds 4: borrowing), d}.

    From b, for cpu: left is b's own side, so a is asked (a within its quota is still on the
    path: Kueue's walk enters every child of an ancestor that is over its quota, and prunes
    a within-quota child; a holds exactly its quota, so it is pruned); right is over its
    quota (4 of 2 + 0), so it is entered, and c (over) is asked, d (within) is not."""
    from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
    pre = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"}
    docs = [namespace("ns"), flavor("default"), cohort("root"),
            cohort("left", parent="root"), cohort("right", parent="root"),
            cluster_queue("a", quotas("default", cpu="3"), cohort="left", preemption=pre),
            cluster_queue("b", quotas("default", cpu="3"), cohort="left", preemption=pre),
            cluster_queue("c", quotas("default", cpu="2"), cohort="right", preemption=pre),
            cluster_queue("d", quotas("default", cpu="0"), cohort="right", preemption=pre),
            *(local_queue(f"lq-{q}", "ns", q) for q in "abcd"),
            workload("a1", "ns", "lq-a", cpu="3"), workload("c1", "ns", "lq-c", cpu="4", created=1)]
    world, engine = _settled(docs)
    with engine:
        engine.run()
        assert "ns/a1" in world.placed and "ns/c1" in world.placed
        found, searched = engine._call(gather, engine.coordinator.cluster_queues["b"],
                                       Reclaim("b", frozenset({("default", "cpu")})))
    assert set(found) == {"b", "c"}
    assert [wl.key for wl in found["c"]] == ["ns/c1"]
    assert {"queue/a", "queue/d"}.isdisjoint(searched)  # never sent to the pruned ones
    assert set(searched) >= {"queue/b", "cohort/left", "cohort/root", "cohort/right", "queue/c"}


def test_a_query_never_waits_inside_the_tree() -> None:
    """Every query of a round sent at once from both sides of a tree: the answers come back
    (a Cohort that waited for its parent while the parent waited for it would deadlock)."""
    from actors.reclaim import ask_all
    from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
    pre = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    docs = [namespace("ns"), flavor("default"), cohort("root"),
            *(cohort(f"co{i}", parent="root") for i in range(4)),
            *(cluster_queue(f"q{i}", quotas("default", cpu="1"), cohort=f"co{i % 4}", preemption=pre)
              for i in range(16)),
            *(local_queue(f"lq{i}", "ns", f"q{i}") for i in range(16)),
            *(workload(f"w{i}", "ns", f"lq{i}", cpu="2", created=i) for i in range(16))]
    world, engine = _settled(docs)
    with engine:
        engine.run()
        queries = [Reclaim(f"q{i}", frozenset({("default", "cpu")})) for i in range(16)]
        found = engine._call(ask_all, engine.coordinator.cluster_queues, queries)  # (a deadlock hangs)
    held = {name for name, wls in found.items() if wls}
    assert held == {p.cluster_queue for p in world.placed.values()}



def test_a_cohort_and_a_cluster_queue_of_the_same_name_are_two_nodes() -> None:
    """Kueue's Cohorts and ClusterQueues are two kinds, so a Cohort ``a`` may sit beside a
    ClusterQueue ``a``.  ClusterQueue ``a`` borrows the 2 cpu of Cohort ``a``'s queue ``b``; when
    ``b`` wants them back its query climbs through Cohort ``a`` to the root, which must still
    enter ClusterQueue ``a`` (the tree once named both ``a``, took the queue for the Cohort the
    query came from, and ``b`` waited for ever)."""
    from actors.simulation import simulate_timed
    from kueued.trace import ARRIVAL
    from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
    docs = [namespace("ns"), flavor("default"), cohort("root"), cohort("a", parent="root"),
            cluster_queue("a", quotas("default", cpu="0"), cohort="root"),
            cluster_queue("b", quotas("default", cpu="2"), cohort="a",
                          preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"}),
            local_queue("lq-a", "ns", "a"), local_queue("lq-b", "ns", "b"),
            workload("wa", "ns", "lq-a", cpu="2"), workload("wb", "ns", "lq-b", cpu="2", created=1)]
    docs[-2]["metadata"]["annotations"] = {ARRIVAL: "0"}
    docs[-1]["metadata"]["annotations"] = {ARRIVAL: "5"}
    run = simulate_timed(docs)
    assert run.report.workloads["ns/wb"].state == "admitted"
    assert run.report.workloads["ns/wa"].state == "pending" and run.report.workloads["ns/wa"].preemptions == 1


def test_a_later_query_still_enters_what_an_earlier_one_did_not_search() -> None:
    """a asks only in its own queue (reclaimWithinCohort Never), so its walk searches a alone;
    b's walk after it must still climb and enter c, which borrows: the skipped set is what
    earlier walks searched, nothing more."""
    from actors.reclaim import ask_all
    from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
    fr = frozenset({("default", "cpu")})
    docs = [namespace("ns"), flavor("default"), cohort("root"),
            cohort("left", parent="root"), cohort("right", parent="root"),
            cluster_queue("a", quotas("default", cpu="2"), cohort="left"),
            cluster_queue("b", quotas("default", cpu="2"), cohort="left"),
            cluster_queue("c", quotas("default", cpu="0"), cohort="right"),
            *(local_queue(f"lq-{q}", "ns", q) for q in "abc"),
            workload("a1", "ns", "lq-a", cpu="1"), workload("c1", "ns", "lq-c", cpu="2", created=1)]
    world, engine = _settled(docs)
    with engine:
        engine.run()
        assert "ns/c1" in world.placed
        queries = [Reclaim("a", fr, cohort=False), Reclaim("b", fr)]
        together = engine._call(ask_all, engine.coordinator.cluster_queues, queries)
    assert {k: [wl.key for wl in v] for k, v in together.items()} == {"a": ["ns/a1"], "b": [], "c": ["ns/c1"]}
