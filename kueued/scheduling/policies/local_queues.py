"""A ClusterQueue's ``fair`` policy: serve its LocalQueues least-consuming first.

The hook plugs into :class:`~kueued.scheduling.queues.PendingQueue`'s ``usage_of``,
the same door admission fair sharing uses: the queue's head is the pending workload
whose LocalQueue has the lowest key, then Kueue's order (priority, creation time).
A LocalQueue's key is the fair share (:func:`~.shares.fair_share`) of what its
admitted workloads in this ClusterQueue hold, per mille of what the ClusterQueue could
ever hold (its nominal quota plus what it may borrow), divided by the LocalQueue's
``spec.fairSharing.weight`` (default 1; 0 sends a consuming LocalQueue last).  The
usage is *current*, not decayed: this is KEP-1093's "least consumer first", not
KEP-4136.  ``capacity`` and ``fifo`` on a ClusterQueue keep Kueue's order (no hook).

Admitted usage per LocalQueue is gathered once per engine clock tick from the World's
workloads: both engines advance their clock before a round of pops, and admissions,
evictions and finishes land between rounds, so one gathering serves a whole pop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kueued.model.validation.policy import FAIR
from kueued.quota.node import FR
from kueued.scheduling.policies.shares import capacity_of, fair_share, parse_weight, per_resource, policy_of
from kueued.scheduling.snapshot import ClusterQueueSnapshot
from kueued.scheduling.view import WorldView as World
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["local_queue_hook", "local_queue_usage"]


class Engine(Protocol):
    world: World

    def now(self) -> float: ...


def local_queue_usage(world: World, cq: str) -> dict[str, dict[FR, int]]:
    """Per LocalQueue (``namespace/name``): what its workloads admitted in ``cq`` hold."""
    out: dict[str, dict[FR, int]] = {}
    for wl in world.workloads.values():
        if wl.admitted and wl.cluster_queue == cq:
            held = out.setdefault(wl.local_queue, {})
            for fr, v in wl.usage.items():
                held[fr] = held.get(fr, 0) + v
    return out


def local_queue_hook(engine: Engine, cq: ClusterQueueSnapshot) -> Callable[[WorkloadInfo], float] | None:
    """The ``usage_of`` hook for ``cq``'s pending queue when its policy is ``fair``, else None."""
    world = engine.world
    if policy_of(world.cluster_queues.get(cq.name)) != FAIR:
        return None
    capacity = capacity_of(cq.node)
    tick: list[float] = [float("nan")]
    usage: dict[str, dict[str, int]] = {}

    def share(wl: WorkloadInfo) -> float:
        now = engine.now()
        if now != tick[0]:
            tick[0] = now
            usage.clear()
            usage.update({lq: per_resource(held) for lq, held in local_queue_usage(world, cq.name).items()})
        lq = world.local_queues.get(wl.local_queue)
        weight = parse_weight(lq.spec.fair_sharing if lq is not None else None)
        return float(fair_share(usage.get(wl.local_queue, {}), capacity, weight=weight))
    return share
