"""Remembered verdicts and folded dead rounds change how much work a run does, never what it decides."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actors.rounds as rounds_module
import kueued.scheduling.cycle as cycle_module
from actors.harness import LiveEngine
from actors.simulation import simulate_timed
from kueued.scheduling.cycle import run_cycle
from kueued.scheduling.cycle import run_cycle as real_cycle
from kueued.scheduling.forest import build_forest
from kueued.scheduling.preemption.classical import ClassicalPreemptor
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.verdicts import Verdict, Verdicts, shape_of
from kueued.scheduling.workload import WorkloadInfo
from kueued.trace import ARRIVAL, RUNTIME
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload


def timed(name: str, at: int, runtime: int, cpu: str, queue: str, priority: int) -> dict[str, Any]:
    m = workload(name, "ns", queue, cpu=cpu, priority=priority)
    m["metadata"].pop("creationTimestamp", None)
    m["metadata"].setdefault("annotations", {}).update({ARRIVAL: str(at), RUNTIME: str(runtime)})
    return m


def setup(strategy: str, within: str, reclaim: str, borrow: str) -> list[dict[str, Any]]:
    """Two trees: a cohort of three queues (one configurable) and a lone queue."""
    preemption = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim,
                  "borrowWithinCohort": {"policy": borrow}}
    return [namespace("ns"), flavor("default"), cohort("org"),
            cluster_queue("a", quotas("default", cpu="3"), cohort="org", preemption=preemption,
                          strategy=strategy),
            cluster_queue("b", quotas("default", cpu="2"), cohort="org",
                          preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            cluster_queue("c", quotas("default", cpu="1"), cohort="org"),
            cluster_queue("solo", quotas("default", cpu="2")),
            *(local_queue(f"lq-{q}", "ns", q) for q in ("a", "b", "c", "solo"))]


_wl = st.tuples(st.integers(0, 4), st.integers(1, 3), st.sampled_from(["1", "2", "3"]),
                st.sampled_from(["lq-a", "lq-b", "lq-c", "lq-solo"]), st.sampled_from([0, 10, 20]))
_config = st.tuples(st.sampled_from(["BestEffortFIFO", "StrictFIFO"]),
                    st.sampled_from(["LowerPriority", "LowerOrNewerEqualPriority", "Never"]),
                    st.sampled_from(["Any", "LowerPriority", "Never"]),
                    st.sampled_from(["Never", "LowerPriority"]))


def _plain(mp: pytest.MonkeyPatch) -> None:
    """Judge every head in its own cycle: nothing recalled, nothing folded (no queue looks ahead)."""
    mp.setattr(Verdicts, "recall", lambda self, cq, wl: None)
    mp.setattr(Verdicts, "known", lambda self, cluster_queue: None)


def _decisions(run) -> tuple:
    return run.summary.workloads, run.report.workloads, run.summary.admissions, run.summary.evictions


@pytest.mark.interpreted  # monkeypatches compiled internals (tests/conftest.py)
@settings(max_examples=60, deadline=None)
@given(_config, st.lists(_wl, min_size=1, max_size=14))
def test_verdicts_and_folding_decide_as_full_nomination_does(config: tuple, workloads: list[tuple]) -> None:
    manifests = setup(*config) + [timed(f"w{i}", *w) for i, w in enumerate(workloads)]
    with pytest.MonkeyPatch.context() as mp:
        _plain(mp)
        plain = simulate_timed(manifests)
    assert _decisions(simulate_timed(manifests)) == _decisions(plain)


def nested(strategy: str, within: str, reclaim: str, borrow: str) -> list[dict[str, Any]]:
    """Cohorts two levels deep with quota, borrowing and lending limits at every level."""
    preemption = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim,
                  "borrowWithinCohort": {"policy": borrow}}
    return [namespace("ns"), flavor("default"),
            cohort("root", quotas("default", cpu="2")),
            cohort("left", quotas("default", cpu=("1", "3", "1")), parent="root"),
            cohort("right", parent="root"),
            cluster_queue("a", quotas("default", cpu=("2", "2")), cohort="left", preemption=preemption,
                          strategy=strategy),
            cluster_queue("b", quotas("default", cpu=("2", None, "1")), cohort="left",
                          preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
            cluster_queue("c", quotas("default", cpu="3"), cohort="right", preemption=preemption),
            cluster_queue("solo", quotas("default", cpu="1"), cohort="right"),
            *(local_queue(f"lq-{q}", "ns", q) for q in ("a", "b", "c", "solo"))]


@pytest.mark.interpreted  # monkeypatches compiled internals (tests/conftest.py)
@settings(max_examples=60, deadline=None)
@given(_config, st.lists(_wl, min_size=1, max_size=20))
def test_verdicts_and_folding_decide_as_full_nomination_does_in_a_nested_tree(config: tuple,
                                                                               workloads: list[tuple]) -> None:
    manifests = nested(*config) + [timed(f"w{i}", *w) for i, w in enumerate(workloads)]
    with pytest.MonkeyPatch.context() as mp:
        _plain(mp)
        plain = simulate_timed(manifests)
    assert _decisions(simulate_timed(manifests)) == _decisions(plain)


def _timed_engine(world: World) -> LiveEngine:
    """An engine under a clock (dead rounds fold only then) whose preemptor finds nothing."""
    return LiveEngine(world, preemptor=lambda snap, w, afs: _Counting(), clock=lambda: 4_000_000_000.0)


def _record_nominations(mp: pytest.MonkeyPatch) -> list[str]:
    """Every head fully judged from now on (in a cycle or ahead of one), in order."""
    judged: list[str] = []
    real = cycle_module._nominate

    def counting(snap, wl, *args, **kw):
        judged.append(wl.key)
        return real(snap, wl, *args, **kw)
    mp.setattr(cycle_module, "_nominate", counting)
    return judged


@pytest.mark.interpreted  # monkeypatches compiled internals (tests/conftest.py)
def test_a_saturated_queue_is_judged_once_per_shape_and_its_dead_rounds_fold() -> None:
    """Ten identical heads that cannot fit: one full nomination, the other nine recalled."""
    world = World()
    for m in [namespace("ns"), flavor("default"), cluster_queue("q", quotas("default", cpu="1")),
              local_queue("lq", "ns", "q"), *(workload(f"w{i}", "ns", "lq", cpu="2") for i in range(10))]:
        world.apply(m)
    with pytest.MonkeyPatch.context() as mp, _timed_engine(world) as eng:
        judged = _record_nominations(mp)
        eng.run(max_cycles=1)  # w0 judged and parked
        eng.run()  # the next nine are known dead: parked without a cycle entry
        assert len(eng.coordinator.cluster_queues["q"].queue.inadmissible) == 10
    assert judged == ["ns/w0"]
    assert all("insufficient" in eng.reasons[f"ns/w{i}"] for i in range(10))


@pytest.mark.interpreted  # monkeypatches compiled internals (tests/conftest.py)
def test_heads_no_verdict_answers_are_judged_ahead_up_to_the_trees_first_live_round() -> None:
    """Queue q holds four heads of four shapes too big for the tree; queue p beside it one such
    head, then one that fits.  The first round judges ahead: p's second head is live, so the
    tree's first live round is its second.  q keeps one park (the rest go back, unjudged past
    that round), and the one cycle run judges q's second head and admits p's; no dead head
    is judged twice."""
    world = World()
    for m in [namespace("ns"), flavor("default"), cohort("org"),
              cluster_queue("q", quotas("default", cpu="1"), cohort="org"),
              cluster_queue("p", quotas("default", cpu="1"), cohort="org"),
              local_queue("lq", "ns", "q"), local_queue("lp", "ns", "p"),
              *(workload(f"q{i}", "ns", "lq", cpu=str(5 + i), created=i) for i in range(4)),
              workload("p0", "ns", "lp", cpu="9", created=0), workload("p1", "ns", "lp", cpu="1", created=1)]:
        world.apply(m)
    with pytest.MonkeyPatch.context() as mp, _timed_engine(world) as eng:
        judged = _record_nominations(mp)
        cycles = []
        mp.setattr(rounds_module, "run_cycle", lambda snap, heads, **kw: (
            cycles.append(sorted(wl.key for wl, _ in heads)), real_cycle(snap, heads, **kw))[1])
        eng.run(max_cycles=1)
        queues = eng.coordinator.cluster_queues
        assert set(queues["q"].queue.inadmissible) == {"ns/q0"}  # (q1's requeue rides on the next message)
        assert {wl.key for wl in queues["q"].queue.pending()} == {"ns/q0", "ns/q2", "ns/q3"}
        assert set(queues["p"].admitted) == {"ns/p1"}
    assert cycles == [["ns/p1", "ns/q1"]]
    # p1 was live when judged alone, so the cycle judged it again
    assert sorted(judged) == ["ns/p0", "ns/p1", "ns/p1", "ns/q0", "ns/q1"]
    assert "insufficient quota" in eng.reasons["ns/q0"] and "insufficient quota" in eng.reasons["ns/q1"]


CPU = ("default", "cpu")


def _forest(world: World, usage: dict[str, int]) -> Snapshot:
    """The world's quota forest with each ClusterQueue charged ``usage[name]`` millicpu."""
    snap = build_forest(cluster_queues=world.cluster_queues, cohorts=world.cohorts, flavors=world.flavors,
                        settings=world.settings)
    for name, milli in usage.items():
        snap.cluster_queues[name].add_usage({CPU: milli})
    return snap


def _judge(world: World, snap: Snapshot, verdicts: Verdicts, heads: list[tuple[WorkloadInfo, str]]) -> None:
    """One cycle on a copy of ``snap`` (processing charges what it reserves): the verdicts learn."""
    copy = snap.clone()
    run_cycle(copy, heads, preemptor=ClassicalPreemptor(copy, settings=world.settings),
              namespaces=world.namespaces, verdicts=verdicts)


def _saturated_pair(preemption: dict[str, str] | None = None) -> World:
    world = World()
    for m in [namespace("ns"), flavor("default"), cohort("org"),
              cluster_queue("q", quotas("default", cpu="1"), cohort="org", preemption=preemption),
              cluster_queue("other", quotas("default", cpu="1"), cohort="org"),
              cluster_queue("solo", quotas("default", cpu="1")),
              workload("w", "ns", "lq", cpu="2")]:
        world.apply(m)
    return world


def _judged_on_saturated_pair(preemption: dict[str, str] | None = None) -> tuple[
        Verdicts, Snapshot, WorkloadInfo, Verdict | None]:
    """q's head judged with other using 1 cpu: the verdicts, the snapshot, the head, its verdict."""
    world = _saturated_pair(preemption)
    verdicts = Verdicts()
    snap = _forest(world, {"other": 1000})
    verdicts.forget(snap, world.settings)
    wl = WorkloadInfo(world.workloads["ns/w"])
    _judge(world, snap, verdicts, [(wl, "q")])
    return verdicts, snap, wl, verdicts.recall(snap.cluster_queues["q"], wl)


def test_a_verdict_outlives_its_generation_while_what_it_read_holds() -> None:
    """q (1 cpu) and other (1 cpu) share a cohort; other uses 1, so q's 2-cpu head fails with
    1 more needed.  Another admission in the tree that leaves q's reads alone keeps the
    verdict; giving other's cpu back (q's available quota moves) does not."""
    verdicts, snap, wl, kept = _judged_on_saturated_pair()
    assert kept is not None and "1 more needed" in kept.message and kept.reads
    verdicts.touch("other")  # a change in the tree that q's reads do not see
    assert verdicts.recall(snap.cluster_queues["q"], wl) is kept
    assert verdicts.known("q").lookup(wl) is kept  # its queue's own look-ahead sees it again too
    verdicts.touch("other")
    # the queue checks the reads itself once the round's balances are read (a LookFurther's Known)
    assert verdicts.known("q").lookup(wl) is None
    assert verdicts.known("q", snap.cluster_queues["q"]).lookup(wl) is kept
    assert verdicts.known("q").lookup(wl) is kept  # brought up to the generation
    verdicts.touch("other")
    freed = _forest(_saturated_pair(), {})  # other's workload finished: q may now borrow both
    assert verdicts.known("q", freed.cluster_queues["q"]).lookup(wl) is None
    assert verdicts.recall(freed.cluster_queues["q"], wl) is None


def test_a_preempting_queues_verdict_holds_for_its_generation_only() -> None:
    """A queue that may preempt also reads its candidates: no change is too small to drop its verdict."""
    verdicts, snap, wl, kept = _judged_on_saturated_pair(
        {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"})
    assert kept is not None and kept.reads is None
    verdicts.touch("solo")  # another tree
    assert verdicts.recall(snap.cluster_queues["q"], wl) is kept
    verdicts.touch("other")
    assert verdicts.known("q", snap.cluster_queues["q"]).lookup(wl) is None
    assert verdicts.recall(snap.cluster_queues["q"], wl) is None


def test_a_verdict_is_not_recalled_when_only_its_borrowing_level_moved() -> None:
    """c's 2-cpu head fails with "1 more needed" on both states (the root is full either way), but
    on the first it would fit within c's own quota (borrowing level 0), on the second only by
    borrowing up to the root (level 2): the order of the cycle and what it reserves differ."""
    world = World()
    for m in [*nested("BestEffortFIFO", "Never", "Never", "Never"), workload("h", "ns", "lq-c", cpu="2")]:
        world.apply(m)
    wl = WorkloadInfo(world.workloads["ns/h"])
    verdicts = Verdicts()
    first = _forest(world, {"a": 3000, "b": 3000, "c": 1000, "solo": 3000})
    verdicts.forget(first, world.settings)
    _judge(world, first, verdicts, [(wl, "c")])
    kept = verdicts.recall(first.cluster_queues["c"], wl)
    assert kept is not None and kept.assignment.borrowing == 0
    verdicts.touch("c")
    second = _forest(world, {"a": 3000, "b": 3000, "c": 2000, "solo": 2000})
    assert second.cluster_queues["c"].available(CPU) == first.cluster_queues["c"].available(CPU) == 1000
    assert verdicts.recall(second.cluster_queues["c"], wl) is None


_usage = st.fixed_dictionaries({q: st.sampled_from([0, 500, 1000, 2000, 3000]) for q in ("a", "b", "c", "solo")})


@settings(max_examples=200, deadline=None)
@given(_config, _usage, _usage, st.lists(st.tuples(st.sampled_from(["a", "c", "solo"]),
                                                   st.sampled_from(["1", "2", "3", "500m"])), min_size=1, max_size=6))
def test_a_recalled_verdict_is_what_nomination_would_decide_now(config: tuple, before: dict[str, int],
                                                                after: dict[str, int], heads: list[tuple]) -> None:
    """Judge heads on one state of the nested tree, move every queue's usage, and recall: every
    verdict recalled on the new state is the entry a fresh nomination there builds."""
    world = World()
    for m in nested(*config):
        world.apply(m)
    for i, (_, cpu) in enumerate(heads):
        world.apply(workload(f"h{i}", "ns", "lq-a", cpu=cpu))
    present = world.cluster_queues.keys()  # (a and c are refused when reclaim Never meets borrow LowerPriority)
    infos = [(WorkloadInfo(world.workloads[f"ns/h{i}"]), queue) for i, (queue, _) in enumerate(heads)
             if queue in present]
    before = {q: v for q, v in before.items() if q in present}
    after = {q: v for q, v in after.items() if q in present}
    verdicts = Verdicts()
    first = _forest(world, before)
    verdicts.forget(first, world.settings)
    for head in infos:  # one head a cycle, as a queue offers them
        _judge(world, first, verdicts, [head])
    for root in ("a", "c", "solo"):
        verdicts.touch(root)
    now = _forest(world, after)
    preemptor = ClassicalPreemptor(now, settings=world.settings)
    for wl, queue in infos:
        v = verdicts.recall(now.cluster_queues[queue], wl)
        if v is None:
            continue
        with now.steady():
            fresh = cycle_module._nominate(now, wl, queue, preemptor, world.namespaces)
        assert fresh.assignment is not None and not fresh.targets
        assert (v.nominated, v.assignment.mode, v.assignment.usage, v.assignment.borrowing) == (
            fresh.message, fresh.assignment.mode, fresh.assignment.usage, fresh.assignment.borrowing)


def test_the_shape_ignores_names_but_not_requests_priority_or_namespace() -> None:
    world = World()
    for m in [namespace("ns"), namespace("ns2"), workload("a", "ns", "lq", cpu="1"), workload("b", "ns", "lq", cpu="1"),
              workload("c", "ns", "lq", cpu="2"), workload("d", "ns", "lq", cpu="1", priority=5),
              workload("e", "ns2", "lq", cpu="1")]:
        world.apply(m)
    s = {k.split("/")[1]: shape_of(WorkloadInfo(w)) for k, w in world.workloads.items()}
    assert s["a"] == s["b"]
    assert len({s["a"], s["c"], s["d"], s["e"]}) == 4


class _Counting:
    """A preemptor that finds nothing (the heads here fail for quota alone)."""

    def oracle(self, cq, wl, fr, value):
        from kueued.scheduling.flavors import Mode
        return Mode.NO_CANDIDATES

    def get_targets(self, cq, wl, assignment):
        return []
