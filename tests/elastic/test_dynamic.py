"""The pure engine while time passes: the forced recycling timer, workloads coming and going."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.scheduling.elastic import ElasticRun, ElasticWorkload, GroupState, prepare
from tests.elastic.builders import EQ, WL, group, milli


def _state(*admitted: tuple[str, str, bool]) -> GroupState:
    state = GroupState(group("g", max=milli(cpu="10")))
    for i, (key, cpu, non_preemptible) in enumerate(admitted):
        state.workloads[key] = ElasticWorkload(key, "g", milli(cpu=cpu), 0, float(i), non_preemptible, True)
    return state


def test_recycling_waits_for_the_delay_and_restarts_its_timer() -> None:
    state = _state(("a", "6", False), ("b", "2", False))
    runtime = milli(cpu="5")
    assert state.recycle(runtime, now=100.0, delay=30.0) == []  # over from 100 s
    assert state.recycle_deadline(runtime, 30.0) == 130.0
    assert state.recycle(runtime, now=129.0, delay=30.0) == []
    # b then a are taken (least important first); b is given back, a (6 > 5) is evicted
    assert [w.key for w in state.recycle(runtime, now=130.0, delay=30.0)] == ["a"]
    assert state.over_since == 130.0  # the timer restarted when it fired...
    assert state.recycle(runtime, now=131.0, delay=30.0) == [] and state.over_since is None  # ...and b fits


def test_the_timer_stops_as_soon_as_used_fits() -> None:
    state = _state(("a", "6", False))
    assert state.recycle(milli(cpu="5"), now=0.0, delay=30.0) == []
    assert state.recycle(milli(cpu="6"), now=20.0, delay=30.0) == []  # fits again: timer off
    assert state.over_since is None and state.recycle_deadline(milli(cpu="6"), 30.0) is None
    assert state.recycle(milli(cpu="5"), now=40.0, delay=30.0) == []  # over again: a new 30 s
    assert state.recycle_deadline(milli(cpu="5"), 30.0) == 70.0


def test_without_a_clock_the_delay_has_always_elapsed() -> None:
    state = _state(("a", "6", False))
    assert [w.key for w in state.recycle(milli(cpu="5"))] == ["a"]
    assert state.over_since is None


def test_a_recycling_that_can_evict_nothing_sets_no_new_deadline() -> None:
    """Only non-preemptible workloads over runtime: waking up again would change nothing."""
    state = _state(("a", "6", True))
    runtime = milli(cpu="5")
    state.recycle(runtime, now=0.0, delay=10.0)
    assert state.recycle(runtime, now=10.0, delay=10.0) == []
    assert state.recycle_deadline(runtime, 10.0) is None
    # ... until something moves: a smaller runtime is a new situation
    assert state.recycle_deadline(milli(cpu="4"), 10.0) == 20.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "elsewhere"]), st.integers(0, 8)), max_size=8),
       st.integers(0, 8))
def test_a_workload_arriving_then_finishing_leaves_the_amounts_as_they_were(others, cpu) -> None:
    quotas = [EQ("cluster").cluster(cpu="10").build(),
              EQ("a").parent("cluster").min(cpu="4").max(cpu="10").build(),
              EQ("b").parent("cluster").min(cpu="6").max(cpu="10").no_lend().build()]
    workloads = [WL(f"w{i}", q).req(cpu=str(c)).build() for i, (q, c) in enumerate(others)]
    run = ElasticRun(prepare(quotas, workloads, []))
    before = run.quota()
    run.arrive(run.setup.place(WL("late", "a").req(cpu=str(cpu)).build()))
    assert run.quota()["a"].request.get("cpu", 0) == before["a"].request.get("cpu", 0) + cpu * 1000
    assert run.finish("default/late") and not run.finish("default/late")
    assert run.quota() == before
