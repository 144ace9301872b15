"""Pacing a refresh by its own cost (kueued.pace.Pace)."""

from __future__ import annotations

import pytest

from kueued.pace import Pace


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def test_a_run_lets_the_next_start_its_cost_over_the_share_after_it_started() -> None:
    clock = Clock()
    pace = Pace(clock, share=0.05)
    assert pace.ready() and pace.wait() == 0.0  # never run: ready
    with pace.run():
        clock.now += 0.1  # the run took 100 ms
    assert pace.next_at == pytest.approx(12.0)  # 10.0 + 0.1 / 0.05
    assert not pace.ready() and pace.wait() == pytest.approx(1.9)
    clock.now = 11.99
    assert not pace.ready()
    clock.now = 12.0
    assert pace.ready()


def test_a_cheap_run_is_paced_by_its_floor_and_a_free_one_not_at_all() -> None:
    clock = Clock()
    floored = Pace(clock, every=1.0, share=0.05)
    with floored.run():
        clock.now += 0.001  # 20 ms of pace: the floor's second wins
    assert floored.next_at == pytest.approx(11.0)
    free = Pace(clock)
    with free.run():
        pass  # a fake clock that does not move: every run is free
    assert free.ready()


def test_a_run_that_fails_still_counts_its_cost() -> None:
    clock = Clock()
    pace = Pace(clock, share=0.5)
    with pytest.raises(RuntimeError), pace.run():
        clock.now += 1.0
        raise RuntimeError("the actors went away")
    assert pace.next_at == pytest.approx(12.0)


def test_a_refresh_never_waits_longer_than_its_bound() -> None:
    clock = Clock()
    pace = Pace(clock, share=0.025, longest=5.0)
    with pace.run():
        clock.now += 1.0  # a loaded daemon: the refresh's awaits took a second of others' work
    assert pace.next_at == pytest.approx(15.0)  # not 10.0 + 1.0 / 0.025 = 50.0
