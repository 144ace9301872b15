"""ElasticQuota trees on simulate's clock: arrivals, finishes, and the forced recycling delay.

Each trace runs on the actor engine (the ElasticQuota coordinator on the timeline's
clock); random traces are checked against the tree's limits at every instant.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.simulation import simulate_timed
from kueued.trace import ARRIVAL, RUNTIME, US
from tests.elastic.builders import EQ, WL, configuration


def timed(wl: WL, *, at: float, runtime: float | None = None) -> dict[str, Any]:
    m = wl.build()
    m["metadata"].pop("creationTimestamp")  # queue order follows arrival
    m["metadata"]["annotations"] = {ARRIVAL: str(at), **({RUNTIME: str(runtime)} if runtime is not None else {})}
    return m


def teams() -> list[dict[str, Any]]:
    return [EQ("cluster").cluster(cpu="10").build(),
            EQ("team-a").parent("cluster").min(cpu="5").max(cpu="10").build(),
            EQ("team-b").parent("cluster").min(cpu="5").max(cpu="10").build()]


def held_at(run: Any, group: str) -> dict[float, int]:
    """A group's admitted milli-cpu after each event time (seconds)."""
    return {t / US: held.get(group, 0) for t, held in run.timeline.samples}


def test_an_over_used_group_is_recycled_once_the_delay_has_passed() -> None:
    """b1 arrives at 10 s and takes b's min back: a (8 cpu on a runtime of 5) is over from 10 s.

    With a 30 s delay a1 is revoked at 40 s, not before; it is admitted again when b1
    finishes at 110 s and runs its whole 100 s again.
    """
    run = simulate_timed([configuration(delay_evict_time="30s"), *teams(),
                          timed(WL("a1", "team-a").req(cpu="8"), at=0, runtime=100),
                          timed(WL("b1", "team-b").req(cpu="5"), at=10, runtime=100)])
    t = run.summary.workloads
    assert (t["default/b1"].admitted_ms, t["default/b1"].finished_ms) == (10_000, 110_000)
    # (a1's first finish, at 100 s, was cancelled by its eviction: no event then)
    assert held_at(run, "team-a") == {0: 8000, 10: 8000, 40: 0, 110: 8000, 210: 0}
    assert (t["default/a1"].evictions, t["default/a1"].finished_ms) == (1, 210_000)
    assert run.report.workloads["default/a1"].preemptions == 1
    assert run.report.evictions == [{"workload": "default/a1", "by": "", "reason": "Revoked"}]


def test_a_group_back_within_its_runtime_before_the_delay_is_not_recycled() -> None:
    """Koordinator's default 120 s: b1 finishes at 110 s, a is within its runtime again, a1 keeps running."""
    run = simulate_timed([*teams(), timed(WL("a1", "team-a").req(cpu="8"), at=0, runtime=300),
                          timed(WL("b1", "team-b").req(cpu="5"), at=10, runtime=100)])
    t = run.summary.workloads
    assert (t["default/a1"].evictions, t["default/a1"].finished_ms) == (0, 300_000)
    assert run.summary.evictions == 0


def test_a_finished_workload_lets_the_next_one_in() -> None:
    run = simulate_timed([*teams(), timed(WL("a1", "team-a").req(cpu="6"), at=0, runtime=5),
                          timed(WL("a2", "team-a").req(cpu="6"), at=1, runtime=5)])
    t = run.summary.workloads
    assert [(t[k].admitted_ms, t[k].finished_ms) for k in ("default/a1", "default/a2")] == [
        (0, 5_000), (5_000, 10_000)]
    assert run.report.workloads["default/a2"].state == "finished"


# --- random traces stay within the tree ------------------------------------------------------------
_wl = st.tuples(st.sampled_from(["team-a", "team-b"]), st.integers(0, 30), st.sampled_from([None, 5, 20, 60]),
                st.integers(1, 8), st.integers(0, 2), st.booleans())


@settings(max_examples=30, deadline=None)
@given(st.lists(_wl, min_size=1, max_size=8), st.sampled_from(["0s", "7s", "30s"]))
def test_timed_elastic_traces_stay_within_the_tree(workloads: list[tuple], delay: str) -> None:
    """At every instant each group holds at most its max (not the groups together at most the
    cluster: a group's guaranteed min is admitted at once and the group over its runtime is
    recycled only after the delay, as Koordinator does); only a workload with a run time
    finishes; every eviction is reported once."""
    manifests = [configuration(delay_evict_time=delay), *teams()]
    runtimes = {}
    for i, (quota, at, runtime, cpu, prio, non_preemptible) in enumerate(workloads):
        wl = WL(f"w{i}", quota).req(cpu=str(cpu)).priority(prio)
        if non_preemptible:
            wl.non_preemptible()
        manifests.append(timed(wl, at=at, runtime=runtime))
        runtimes[f"default/w{i}"] = runtime
    run = simulate_timed(manifests)
    for _, held in run.timeline.samples:
        assert held.get("team-a", 0) <= 10_000 and held.get("team-b", 0) <= 10_000
    for key, t in run.summary.workloads.items():
        if t.finished_ms is not None:
            assert runtimes[key] is not None
        if t.admitted_ms is None:
            assert t.finished_ms is None
    assert len(run.report.evictions) == run.summary.evictions == sum(
        t.evictions for t in run.summary.workloads.values())
