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
from kueued.scheduling.cycle import run_cycle as real_cycle
from kueued.scheduling.verdicts import Verdicts, shape_of
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


def test_any_change_in_the_tree_invalidates_its_verdicts() -> None:
    world = World()
    for m in [namespace("ns"), flavor("default"), cohort("org"),
              cluster_queue("q", quotas("default", cpu="1"), cohort="org"),
              cluster_queue("other", quotas("default", cpu="1"), cohort="org"),
              cluster_queue("solo", quotas("default", cpu="1")),
              local_queue("lq", "ns", "q"), workload("w", "ns", "lq", cpu="3")]:
        world.apply(m)
    with LiveEngine(world, preemptor=lambda snap, w, afs: _Counting()) as eng:
        eng.run(max_cycles=1)
    verdicts = eng.coordinator.verdicts
    wl, cq = WorkloadInfo(world.workloads["ns/w"]), eng.state.cluster_queues["q"]
    assert verdicts.recall(cq, wl) is not None
    verdicts.touch("solo")  # another tree
    assert verdicts.recall(cq, wl) is not None
    verdicts.touch("other")  # same cohort
    assert verdicts.recall(cq, wl) is None


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
