"""A Workload's maximum execution time (KEP-3125) in the engine: on the timeline's clock, across
evictions, and in an untimed run."""

from __future__ import annotations

from typing import Any

import pytest

from actors.simulation import simulate, simulate_timed
from tests.builders import workload
from tests.test_timeline import one_queue, timed


def limited(m: dict[str, Any], seconds: int) -> dict[str, Any]:
    m["spec"]["maximumExecutionTimeSeconds"] = seconds
    return m


def test_a_workload_out_of_time_is_deactivated_and_its_quota_goes_to_the_next() -> None:
    run = simulate_timed([*one_queue("2"), limited(timed("long", at=0, runtime=100, cpu="2"), 3),
                          timed("next", at=1, runtime=2, cpu="2")])
    t = run.summary.workloads
    assert t["ns/long"].admitted_ms == 0 and t["ns/long"].finished_ms is None  # never finishes: deactivated
    assert t["ns/next"].admitted_ms == 3_000  # at the instant long ran out, not when it would have finished
    assert run.report.workloads["ns/long"].state == "pending"
    assert "deactivated" in run.report.workloads["ns/long"].reason
    assert run.summary.wall_ms == 5_000


def test_a_workload_within_its_limit_finishes_as_usual() -> None:
    run = simulate_timed([*one_queue("2"), limited(timed("short", at=0, runtime=2, cpu="2"), 3)])
    assert run.summary.workloads["ns/short"].finished_ms == 2_000
    assert run.report.workloads["ns/short"].state == "finished"


def test_the_time_of_every_admission_counts_against_the_limit() -> None:
    """Preempted after 4 s of its 6, low gets 2 s once readmitted (Kueue's accumulated execution time),
    though its run time restarts in full."""
    setup = one_queue("2", preemption={"withinClusterQueue": "LowerPriority"})
    run = simulate_timed([*setup, limited(timed("low", at=0, runtime=10, cpu="2", priority=0), 6),
                          timed("high", at=4, runtime=1, cpu="2", priority=100)])
    t = run.summary.workloads
    assert t["ns/high"].admitted_ms == 4_000
    assert t["ns/low"].evictions == 2  # preempted at 4 s, drained as it ran out
    assert run.report.workloads["ns/low"].state == "pending"  # deactivated at 5 + 2 = 7 s
    assert run.summary.wall_ms == 7_000


def test_an_untimed_run_is_one_instant_in_which_no_limit_runs_out() -> None:
    """Untimed, a run is a snapshot taken to quiescence: a reservation its objects carry from long ago
    (an Admitted condition of 2026-01-01, a 60 s limit) is kept, as is one made during the run."""
    old = limited(workload("old", "ns", "lq", cpu="1"), 60)
    stamp = "2026-01-01T00:00:00Z"
    old["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
        "conditions": [{"type": t, "status": "True", "reason": t, "lastTransitionTime": stamp}
                       for t in ("QuotaReserved", "Admitted")]}
    docs = [*one_queue("2"), old, limited(workload("new", "ns", "lq", cpu="1", created=1), 1),
            *[workload(f"other{i}", "ns", "lq", cpu="1", created=i + 2) for i in range(5)]]
    report = simulate(docs)
    assert report.workloads["ns/old"].state == "admitted"
    assert report.workloads["ns/new"].state == "admitted"



def test_a_refused_deactivation_is_tried_again_a_second_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API refused the first write (the Workload changed meanwhile, or this process was not the
    leader): the workload keeps its quota until the write is made, a second later."""
    from kueued.timeline import TimelinePort

    calls: list[str] = []

    async def refuse_once(self: TimelinePort, workload: str, *, reason: str, message: str) -> bool:
        calls.append(workload)
        return len(calls) > 1

    monkeypatch.setattr(TimelinePort, "deactivate", refuse_once)
    run = simulate_timed([*one_queue("2"), limited(timed("long", at=0, runtime=100, cpu="2"), 3),
                          timed("next", at=1, runtime=2, cpu="2")])
    assert calls == ["ns/long", "ns/long"]
    assert run.summary.workloads["ns/next"].admitted_ms == 4_000
    assert run.report.workloads["ns/long"].state == "pending"
