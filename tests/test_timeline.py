"""Time in simulate: a virtual clock, arrivals, run times; Kueue's generator format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.simulation import simulate_timed
from kueued.errors import ManifestError
from kueued.generator import build_trace, load_generator, parse_generator
from kueued.trace import ARRIVAL, RUNTIME, trace_from
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload

PERF = Path(__file__).resolve().parents[2] / "shared" / "reference" / "kueue-perf"


def timed(name: str, *, at: float | str | None = None, runtime: float | None = None, cpu: str = "1",
          queue: str = "lq", priority: int | None = None) -> dict[str, Any]:
    m = workload(name, "ns", queue, cpu=cpu, priority=priority)
    m["metadata"].pop("creationTimestamp", None)
    ann = m["metadata"].setdefault("annotations", {})
    if at is not None:
        ann[ARRIVAL] = str(at)
    if runtime is not None:
        ann[RUNTIME] = str(runtime)
    return m


def one_queue(cpu: str = "4", **extra: Any) -> list[dict[str, Any]]:
    return [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu=cpu), **extra),
            local_queue("lq", "ns", "cq")]


def test_a_finished_workload_releases_its_quota_and_the_next_is_admitted() -> None:
    run = simulate_timed([*one_queue(), timed("a", at=0, runtime=10, cpu="3"), timed("b", at=1, runtime=5, cpu="3"),
                          timed("c", at=2, cpu="1")])
    t = run.summary.workloads
    assert (t["ns/a"].admitted_ms, t["ns/a"].finished_ms) == (0, 10_000)
    assert (t["ns/b"].admitted_ms, t["ns/b"].finished_ms) == (10_000, 15_000)
    assert t["ns/c"].admitted_ms == 2_000 and t["ns/c"].finished_ms is None  # no runtime: runs forever
    assert run.summary.wall_ms == 15_000
    assert run.report.workloads["ns/a"].state == "finished"
    assert run.report.workloads["ns/c"].state == "admitted"
    # 3 cpu x 15 s + 1 cpu x 13 s over 4 cpu x 15 s
    assert run.summary.cluster_queue_classes["all"].cpu_usage_percent == pytest.approx(100 * 58 / 60, abs=0.01)


def test_arrivals_are_played_in_time_order_not_file_order() -> None:
    run = simulate_timed([*one_queue("1"), timed("late", at=5, runtime=1), timed("early", at=1, runtime=1),
                          timed("middle", at=1.5, runtime=1)])
    t = run.summary.workloads
    assert [t[k].admitted_ms for k in ("ns/early", "ns/middle", "ns/late")] == [1_000, 2_000, 5_000]
    assert run.summary.workload_classes["all"].average_time_to_admission_ms == pytest.approx(500 / 3, abs=0.01)


def test_an_instant_arrival_counts_from_the_earliest_instant() -> None:
    trace = trace_from([*one_queue(), timed("a", at="2026-03-01T00:00:10Z"), timed("b", at="2026-03-01T00:00:00Z"),
                        timed("c", at=4)])
    assert {a.key: a.at for a in trace.arrivals} == {"ns/a": 10_000_000, "ns/b": 0, "ns/c": 4_000_000}


@pytest.mark.parametrize("bad", [pytest.param({ARRIVAL: "-1"}, id="negative"),
                                 pytest.param({RUNTIME: "soon"}, id="not-a-number")])
def test_unreadable_time_annotations_are_refused(bad: dict[str, str]) -> None:
    m = timed("a")
    m["metadata"]["annotations"] = bad
    with pytest.raises(ManifestError):
        trace_from([m])


def test_an_evicted_workload_runs_its_full_runtime_again_after_readmission() -> None:
    setup = one_queue("2", preemption={"withinClusterQueue": "LowerPriority"})
    run = simulate_timed([*setup, timed("low", at=0, runtime=10, cpu="2", priority=0),
                          timed("high", at=4, runtime=2, cpu="2", priority=100)])
    t = run.summary.workloads
    assert t["ns/high"].admitted_ms == 4_000 and t["ns/low"].evictions == 1
    # low's first finish (at 10 s) was cancelled; readmitted at 6 s, it runs 10 s more
    assert (t["ns/low"].admitted_ms, t["ns/low"].finished_ms) == (0, 16_000)
    assert run.summary.evictions == 1 and run.summary.wall_ms == 16_000


# --- random traces stay within the tree --------------------------------------------------------------
_wl = st.tuples(st.integers(0, 6), st.sampled_from([None, 1, 2, 3]), st.sampled_from(["1", "2", "3"]),
                st.sampled_from(["lq-a", "lq-b"]), st.sampled_from([0, 10]))


@settings(max_examples=20)
@given(st.lists(_wl, min_size=1, max_size=8))
def test_random_traces_stay_within_the_cohort(workloads: list[tuple]) -> None:
    """a (3 cpu) and b (2 cpu) share a Cohort and may borrow each other's quota: at every
    instant they hold at most 5 cpu together; a workload runs its whole run time from its
    last admission; every eviction is counted once."""
    setup = [namespace("ns"), flavor("default"), cohort("org"),
             cluster_queue("a", quotas("default", cpu="3"), cohort="org",
                           preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
             cluster_queue("b", quotas("default", cpu="2"), cohort="org"),
             local_queue("lq-a", "ns", "a"), local_queue("lq-b", "ns", "b")]
    manifests = setup + [timed(f"w{i}", at=at, runtime=rt, cpu=cpu, queue=q, priority=p)
                         for i, (at, rt, cpu, q, p) in enumerate(workloads)]
    run = simulate_timed(manifests)
    for _, held in run.timeline.samples:
        assert held.get("a", 0) + held.get("b", 0) <= 5_000
    runtimes = {f"ns/w{i}": rt for i, (_, rt, _, _, _) in enumerate(workloads)}
    for key, t in run.summary.workloads.items():
        if t.finished_ms is not None:
            assert runtimes[key] is not None and t.admitted_ms is not None
    assert run.summary.evictions == sum(t.evictions for t in run.summary.workloads.values())


# --- Kueue's generator format ----------------------------------------------------------------------------
@pytest.mark.skipif(not PERF.is_dir(), reason="../shared/reference/kueue-perf is not beside this checkout")
@pytest.mark.parametrize(("name", "queues", "workloads", "last_small_s"), [
    pytest.param("baseline", 30, 15_000, 35.0, id="baseline"),
    pytest.param("large-scale", 1_000, 50_000, 2.1, id="large-scale"),
])
def test_kueue_generator_files_build_their_objects(name: str, queues: int, workloads: int,
                                                   last_small_s: float) -> None:
    config = load_generator(PERF / f"{name}-generator.yaml")
    assert config.workloads == workloads
    trace = build_trace(config)
    cqs = [m for m in trace.setup if m["kind"] == "ClusterQueue"]
    assert len(cqs) == queues and len(trace.arrivals) == workloads
    spec = cqs[0]["spec"]
    assert spec["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}
    small = [a for a in trace.arrivals if a.klass == "small"]
    assert max(a.at for a in small) == round(last_small_s * 1e6)
    assert [a.at for a in trace.arrivals] == sorted(a.at for a in trace.arrivals)


def test_a_small_generator_runs_to_its_end() -> None:
    config = parse_generator({"cohorts": [{"className": "cohort", "count": 2, "queuesSets": [{
        "className": "cq", "count": 2, "nominalQuota": 2, "borrowingLimit": 2, "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority", "workloadsSets": [
            {"count": 4, "creationIntervalMs": 100, "workloads": [
                {"className": "small", "runtimeMs": 300, "priority": 50, "request": 1}]},
            {"count": 1, "creationIntervalMs": 250, "workloads": [
                {"className": "large", "runtimeMs": 500, "priority": 200, "request": 3}]}]}]}]})
    run = simulate_timed(build_trace(config))
    assert run.summary.finished == 20 and set(run.summary.workload_classes) == {"small", "large"}
    assert 0 < run.summary.cluster_queue_classes["cq"].cpu_usage_percent <= 100


def test_an_unknown_generator_field_is_refused() -> None:
    with pytest.raises(ManifestError):
        parse_generator({"cohorts": [{"className": "c", "count": 1, "queueSets": []}]})


# --- the real clock does not hold due events behind a settle ---------------------------------------------
def _settle_twice() -> tuple[list[int], list[str], list[str]]:
    """One queue of 1 cpu and five 1-cpu workloads: a is admitted, b..e park one per cycle.

    Settles once told an event is due (``until`` always true), then to quiescence; returns
    the cycles each settle ran and the workloads admitted after each.
    """
    import anyio

    from kueued.engine.wiring import make_iterate, make_preemptor
    from kueued.timeline import CoordinatorDriver, Timeline
    from kueued.world import World

    trace = trace_from([*one_queue("1"), *(timed(n, at=0, runtime=60) for n in "abcde")])
    world = World()
    for m in trace.setup:
        world.apply(m)
    timeline = Timeline(trace, world)

    def admitted() -> list[str]:
        return sorted(timeline.running)

    async def main() -> tuple[list[int], list[str], list[str]]:
        cycles: list[int] = []
        from actors.coordinator import Coordinator
        from kueued.timeline import TimelinePort
        coord = Coordinator(world, TimelinePort(timeline), preemptor=make_preemptor, iterate=make_iterate(world))
        live = CoordinatorDriver(coord, timeline)
        async with anyio.create_task_group() as tg:
            await coord.sync_topology(tg)
            for a in trace.arrivals:
                await live.arrive(a)
            start = coord.rounds
            await live.settle(lambda: True)
            cycles.append(coord.rounds - start)
            first = admitted()
            await live.settle()
            cycles.append(coord.rounds - start - cycles[0])
            coord.stop()
        return cycles, first, admitted()
    return anyio.run(main)


def test_a_settle_stops_after_one_cycle_when_an_event_is_due_and_the_next_resumes() -> None:
    cycles, first, last = _settle_twice()
    assert cycles[0] == 1 and first == ["ns/a"]
    assert cycles[1] >= 2  # b..e still had to park, one per cycle
    assert last == ["ns/a"]


def test_the_real_clock_plays_a_small_trace_to_its_end() -> None:
    """Live against the wall clock: one cpu, three 1-cpu workloads of 50 ms each, so they run
    one after another whatever the machine's speed; only orderings are asserted, not times."""
    run = simulate_timed([*one_queue("1"), *(timed(n, at=0.01 * i, runtime=0.05) for i, n in enumerate("abc"))],
                         real=True)
    t = run.summary.workloads
    assert all(t[f"ns/{n}"].finished_ms is not None for n in "abc")
    order = sorted("abc", key=lambda n: t[f"ns/{n}"].admitted_ms)
    assert order == ["a", "b", "c"]  # FIFO by arrival
    for first, then in zip(order, order[1:], strict=False):
        assert t[f"ns/{then}"].admitted_ms >= t[f"ns/{first}"].finished_ms  # one cpu: never together
    assert run.summary.wall_ms >= 150 and run.summary.clock == "real"


def test_the_usage_chart_keeps_a_cluster_queue_apart_from_a_cohort_of_its_name() -> None:
    """ClusterQueue ``a`` (in no cohort) and Cohort ``a`` (holding ``b`` and ``c``) are two lines."""
    from kueued.simulate import usage_by_cohort
    from kueued.world import World
    from tests.builders import cluster_queue, cohort, flavor, quotas
    world = World()
    for m in [flavor("default"), cohort("a"), cluster_queue("a", quotas("default", cpu="4")),
              cluster_queue("b", quotas("default", cpu="4"), cohort="a"),
              cluster_queue("c", quotas("default", cpu="4"), cohort="a")]:
        world.apply(m)
    samples = [(0, {"a": 2000, "b": 3000}), (1_000_000, {"a": 1000, "b": 1000, "c": 500})]
    assert usage_by_cohort(world, samples) == {"ClusterQueue a": [2.0, 1.0], "cohort a": [3.0, 1.5]}
