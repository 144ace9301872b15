"""Garbage-collector thresholds for a scheduler's heap: many long-lived objects, many short-lived ones.

CPython starts a generation-0 collection every 700 net allocations and, every 10 of those, a
generation-1 one; every 10 of those scans generation 2, which here holds every Workload,
quota node and queue entry the process knows (hundreds of thousands of objects).  The
scheduler allocates a short-lived object for nearly every step (a message, a reply, a
candidate, a cycle entry), so the full scans came often and long: on Kueue's large-scale
configuration (``bench/kueue_perf.py --config large-scale``, 1,000 ClusterQueues, 50,000
workloads, virtual clock) raising the thresholds to (50,000, 20, 100) took the pure core from
36 s to 23 s and the actor engine from 80 s to 39 s, same decisions.  ``gc.freeze()`` after
loading gave nothing more, so it is not used (a frozen object is never collected again).

Entry points call :func:`tune` once (the CLI, the benchmarks); the library never changes the
collector behind its caller's back.
"""

from __future__ import annotations

import gc

__all__ = ["THRESHOLDS", "tune"]

THRESHOLDS = (50_000, 20, 100)


def tune() -> None:
    gc.set_threshold(*THRESHOLDS)
