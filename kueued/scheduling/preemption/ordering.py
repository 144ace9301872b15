"""The order in which preemption candidates are tried: Kueue's ``CandidatesOrdering``.

Both the classical search and fair sharing sort their candidates the same way
(``pkg/scheduler/preemption/common/ordering.go``), cheapest victim first:

0. workloads already being evicted (their quota is as good as free);
1. workloads of other ClusterQueues before those of the preemptor's own;
2. admission fair sharing only: within one ClusterQueue, workloads of a LocalQueue
   with higher usage first (a pairwise rule, skipped across ClusterQueues or within
   one LocalQueue);
3. lower effective priority;
4. more recent QuotaReserved time (the least sunk work); a workload without one
   counts as reserved "now";
5. UID, only to make the order total.

Without (2) the order is a plain sort key (:func:`candidate_order_key`); with it the
rule is pairwise, so the key wraps a comparator.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from kueued.scheduling.workload import WorkloadInfo

__all__ = ["candidate_order_key", "compare_candidates", "is_evicted", "LocalQueueUsage"]

LocalQueueUsage = Callable[[WorkloadInfo], float | None]
"""A workload's LocalQueue usage under admission fair sharing, None where AFS is off."""


def is_evicted(wl: WorkloadInfo) -> bool:
    """Still holding quota but already marked Evicted (a manifest caught mid-eviction)."""
    if wl.evictions or wl.obj.status.admission is None:
        return False  # re-admitted by us: the manifest's conditions no longer describe it
    return any(c.type == "Evicted" and c.status == "True" for c in wl.obj.status.conditions)


def _reserved(wl: WorkloadInfo) -> float:
    return wl.reserved_at or math.inf


def _base_key(wl: WorkloadInfo, cq_name: str) -> tuple:
    return (not is_evicted(wl), wl.cluster_queue == cq_name, wl.priority, -_reserved(wl), wl.uid)


def compare_candidates(a: WorkloadInfo, b: WorkloadInfo, cq_name: str,
                       lq_usage: LocalQueueUsage | None = None) -> int:
    """-1 when ``a`` should be preempted before ``b``, 1 after, 0 for the same workload."""
    ka, kb = _base_key(a, cq_name), _base_key(b, cq_name)
    if ka[:2] != kb[:2]:
        return -1 if ka[:2] < kb[:2] else 1
    if (lq_usage is not None and a.cluster_queue == b.cluster_queue
            and a.local_queue != b.local_queue):
        ua, ub = lq_usage(a), lq_usage(b)
        if ua is not None and ub is not None and ua != ub:
            return -1 if ua > ub else 1
    if ka == kb:
        return 0
    return -1 if ka < kb else 1


def candidate_order_key(cq_name: str, *, lq_usage: LocalQueueUsage | None = None
                        ) -> Callable[[WorkloadInfo], Any]:
    """A ``sorted`` key putting the preferred victims of a preemptor in ``cq_name`` first."""
    if lq_usage is None:
        return lambda wl: _base_key(wl, cq_name)
    return functools.cmp_to_key(lambda a, b: compare_candidates(a, b, cq_name, lq_usage))
