"""How a round's commits reach the API server: concurrently, a bounded number at a time, in order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from kueued.kube.port import ApiPort

__all__ = ["commit_all", "COMMITS_IN_FLIGHT"]

COMMITS_IN_FLIGHT = 64
"""Commits one round sends to the API at once: enough to hide round trips (with 32, admissions
waited 4 s on average on Kueue's large-scale config through the API server; with 64, about 2 s),
few enough not to flood the API server's inflight limits (commit p99 0.6 s there)."""


async def commit_all(port: ApiPort, calls: list[Callable[[], Awaitable[bool]]], *,
                     limiter: anyio.CapacityLimiter | None = None) -> list[bool]:
    """Run the round's commits concurrently, at most COMMITS_IN_FLIGHT at a time; results in order.
    ``limiter``: one shared with other batches in flight (``actors.pipeline``), else the batch's own.

    A port that answers without waiting (``instant``, the in-memory one) gains nothing from
    tasks: its commits run one after another, in exactly the order the round decided them.
    """
    if getattr(port, "instant", False) or (limiter is None and len(calls) <= 1):
        return [await call() for call in calls]
    results = [False] * len(calls)
    bound = limiter if limiter is not None else anyio.CapacityLimiter(COMMITS_IN_FLIGHT)

    async def one(i: int) -> None:
        async with bound:
            results[i] = await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return results
