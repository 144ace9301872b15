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

Generation 0 at 200,000 rather than 50,000, timed with ``gc.callbacks``: on ``bench/throughput.py
--no-preemption --cluster-queues 1000 --workloads 50000`` collection took 1.00 s (129 generation-0
passes, 0.69 s; 9 generation-1 passes, 0.31 s) and 0.28 s with 200,000 (91 passes, 0.27 s; 7,
0.01 s); on the in-process large-scale run 0.69 s against 0.31 s.  Peak RSS the same (368 and 330
MiB), ``bench/memory.py`` the same (529 MiB for 100,000 pending).  A generation-0 pass took 3 ms
on average.

Entry points call :func:`tune` once (the CLI, the benchmarks); the library never changes the
collector behind its caller's back.
"""

from __future__ import annotations

import gc

__all__ = ["THRESHOLDS", "tune"]

THRESHOLDS = (200_000, 20, 100)


def tune() -> None:
    gc.set_threshold(*THRESHOLDS)
