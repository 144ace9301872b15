"""The watch backoff: exponential ceilings, capped, full jitter, at least the server's Retry-After."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kueued.kube.backoff import Backoff


def test_ceilings_double_from_base_up_to_the_cap() -> None:
    backoff = Backoff(base=0.5, cap=30.0)
    assert [backoff.ceiling(n) for n in range(9)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_huge_attempt_count_does_not_overflow() -> None:
    assert Backoff(base=0.5, cap=30.0).ceiling(10_000) == 30.0


def test_the_schedule_is_reproducible_with_a_seeded_rng() -> None:
    first = Backoff(rng=random.Random(7))
    second = Backoff(rng=random.Random(7))
    assert [first.delay(n) for n in range(12)] == [second.delay(n) for n in range(12)]


@given(attempt=st.integers(min_value=0, max_value=200), seed=st.integers(min_value=0, max_value=2**32))
def test_full_jitter_stays_between_zero_and_the_ceiling(attempt: int, seed: int) -> None:
    backoff = Backoff(base=0.25, cap=10.0, rng=random.Random(seed))
    assert 0.0 <= backoff.delay(attempt) <= backoff.ceiling(attempt)


def test_jitter_spreads_over_the_whole_range() -> None:
    # Full jitter, not "ceiling plus a little": some waits are short, some near the ceiling.
    backoff = Backoff(base=1.0, cap=8.0, rng=random.Random(1))
    waits = [backoff.delay(3) for _ in range(2000)]
    assert min(waits) < 0.5 and max(waits) > 7.5
    assert 3.5 < sum(waits) / len(waits) < 4.5


@pytest.mark.parametrize("attempt", [pytest.param(0, id="first"), pytest.param(20, id="capped")])
def test_retry_after_is_a_floor(attempt: int) -> None:
    backoff = Backoff(base=0.5, cap=30.0, rng=random.Random(3))
    waits = [backoff.delay(attempt, retry_after=45.0) for _ in range(200)]
    assert all(45.0 <= w <= 45.0 + 0.1 * backoff.ceiling(attempt) for w in waits)


def test_a_negative_attempt_counts_as_the_first() -> None:
    backoff = Backoff(base=0.5, cap=30.0, rng=random.Random(0))
    assert all(0.0 <= backoff.delay(-1) <= 0.5 for _ in range(100))
