"""How long a watch waits before trying again: capped exponential backoff with full jitter.

The n-th consecutive failure (from 0) waits a uniformly random time in
``[0, min(cap, base * 2**n))`` (AWS's "full jitter"): nine watches that lost the same
server do not come back in lock-step, and the expected wait still doubles.  When the
server said how long to wait (``Retry-After`` on a 429, ``retryAfterSeconds`` in a
Status) the wait is at least that, plus a tenth of the jitter so throttled clients
still spread out.

Pure and seeded: a test gives it a ``random.Random(seed)`` and checks the schedule
without sleeping.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    base: float = 0.5
    """The first failure's ceiling, in seconds."""
    cap: float = 30.0
    """No ceiling grows past this (Retry-After may still ask for more)."""
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def ceiling(self, attempt: int) -> float:
        """The largest wait after ``attempt`` consecutive earlier failures (0 for the first)."""
        # min() before the power would overflow: 2**1100 is fine as an int, not as a float.
        return min(self.cap, self.base * 2 ** min(attempt, 64))

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """A wait for the ``attempt``-th consecutive failure, honouring the server's Retry-After."""
        jitter = self.rng.uniform(0.0, self.ceiling(max(0, attempt)))
        if retry_after is not None and retry_after > 0:
            return retry_after + jitter * 0.1
        return jitter
