"""Pacing a refresh whose cost grows with the cluster: at most a set share of the daemon's time.

Two things the daemon redoes while changes keep arriving read every queue at once: the queues'
gauges (``actors.observe``) and the statuses the tree should show (``kueued.kube.status_publisher``).
On a tree of 1,000 ClusterQueues one took 56 ms and the other 36 ms, and both ran after nearly
every pass: measured on ``bench/kueue_perf_api.py --config large-scale --scale 0.1``, 49 and 30
runs, 4.1 of the daemon's 11.8 CPU seconds, on two cores it shares with the API server.  A
refresh's result is only read from outside (a scrape, ``kubectl get``), seconds apart at best, so
none of that bought anything a user sees.

:class:`Pace` spaces the runs by their own cost: a run that took ``c`` seconds lets the next one
start ``c / share`` seconds after it started (never sooner than ``every``, never later than
``longest``).  A small cluster's refresh costs a millisecond and is hardly paced; a large one's
waits longer, in proportion, so the refresh takes at most ``share`` of the time whatever the size
(up to a refresh of ``longest * share``: 125 ms).  The
cost is read on the caller's clock (a test's fake clock makes every run free: never paced), as
wall time: what other tasks did while the refresh awaited its actors counts too, so a loaded
daemon paces harder; ``longest`` (5 s, a third of Prometheus' usual scrape interval) bounds the
wait all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Pace", "SHARE", "LONGEST"]

SHARE = 0.025
"""The share of the time a paced refresh may take at most: 56 ms of gauges on 1,000 ClusterQueues
then run every 2.2 s, a hundred queues' (5 ms) every 0.2 s (under a backlog the gauges' own
once-a-second bound then rules, as before)."""

LONGEST = 5.0
"""The longest a paced refresh waits after the last one started, whatever it cost (module notes)."""


class Pace:
    """When a paced refresh may run again (module notes)."""

    __slots__ = ("clock", "every", "share", "longest", "next_at")

    def __init__(self, clock: Callable[[], float], *, every: float = 0.0, share: float = SHARE,
                 longest: float = LONGEST) -> None:
        self.clock = clock
        self.every = every
        self.share = share
        self.longest = longest
        self.next_at = -float("inf")

    def ready(self) -> bool:
        return self.clock() >= self.next_at

    def wait(self) -> float:
        """Seconds until the next run may start (0 if it may now)."""
        return max(0.0, self.next_at - self.clock())

    @contextmanager
    def run(self) -> Iterator[None]:
        """Time one run (``with pace.run(): ...``); the next may start once its cost is paid for."""
        start = self.clock()
        try:
            yield
        finally:
            self.next_at = start + min(self.longest, max(self.every, (self.clock() - start) / self.share))
