"""Partial admission: a workload whose pod set allows fewer pods (``minCount``) is admitted with as
many as fit when all of them do not.

Kueue's scheduler (``getAssignments``, gate PartialAdmission, beta and on by default) tries the
full counts first.  Only when they neither fit nor find preemption targets, and some pod set has
``minCount`` below its ``count``, does its pod-set reducer (``flavorassigner/podset_reducer.go``)
search for the largest counts that do:

* each pod set may give up ``count - minCount`` pods; the budget taken away is spread from the
  last pod set to the first (one is cut to its minimum before the one before it is touched);
* a binary search over the budget finds the smallest cut whose assignment fits, or needs
  preemption and finds targets for the reduced workload;
* when no cut works, the full counts' outcome stands (its message says why).

Kueue's webhook lets only one pod set carry ``minCount`` (so does kueued's validation), so the
order-based spread is a plain binary search on that pod set's count; Kueue's later "give back"
pass only changes anything with two reduced pod sets and is not needed here.

What is reduced is a *view* of the workload (:func:`reduced`): the same scheduling state with pod
sets of fewer pods, their requests scaled.  Flavor assignment, the preemption oracle and the
search for targets read it as they read any workload; the cycle admits the real one with the
view's usage and counts (``Placement.counts``), which the status admission records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from kueued.scheduling.workload import PodSetRequest, WorkloadInfo

__all__ = ["can_be_reduced", "reduced", "search"]

R = TypeVar("R")


def can_be_reduced(wl: WorkloadInfo) -> bool:
    """Kueue's ``CanBePartiallyAdmitted``: some pod set takes fewer pods than it asks."""
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in wl.spec.obj.spec.pod_sets)


def reduced(wl: WorkloadInfo, counts: list[int]) -> WorkloadInfo:
    """``wl`` with these pod counts (one per pod set, each at most its count): requests scale with
    the count (they are whole multiples of one pod's), the rest of the state is the same."""
    pod_sets = []
    for ps, n in zip(wl.pod_sets, counts, strict=True):
        if n == ps.count:
            pod_sets.append(ps)
            continue
        per_pod = {r: v // ps.count for r, v in ps.requests.items()}
        pod_sets.append(PodSetRequest(ps.name, n, {r: v * n for r, v in per_pod.items() if v * n}, ps.spec,
                                      ps.zeros))
    spec = msgspec.structs.replace(wl.spec, pod_sets=tuple(pod_sets))
    return WorkloadInfo(spec, wl.placement, evictions=wl.evictions, victims=wl.victims, preempting=wl.preempting)


def search(wl: WorkloadInfo, works: Callable[[list[int]], R | None]) -> R | None:
    """What ``works`` answers for the largest counts it accepts, cutting from the last pod set
    first (module notes); None when not even every pod set at its minimum does."""
    full = [ps.count for ps in wl.pod_sets]
    mins = [ps.min_count if ps.min_count is not None else ps.count for ps in wl.spec.obj.spec.pod_sets]
    deltas = [max(0, c - m) for c, m in zip(full, mins, strict=True)]
    total = sum(deltas)
    best: R | None = None
    lo, hi = 1, total  # the smallest cut that works lies in [lo, hi]; cut 0 is the full count, already tried
    while lo <= hi:
        mid = (lo + hi) // 2
        answer = works(_cut(full, deltas, mid))
        if answer is not None:
            best, hi = answer, mid - 1
        else:
            lo = mid + 1
    return best


def _cut(full: list[int], deltas: list[int], amount: int) -> list[int]:
    counts = list(full)
    for i in reversed(range(len(full))):
        take = min(deltas[i], amount)
        counts[i] -= take
        amount -= take
    return counts
