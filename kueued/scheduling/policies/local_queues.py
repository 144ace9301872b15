"""A ClusterQueue's policy for its LocalQueues: ``fair`` and ``capacity`` (KEP-1093).

The hook plugs into :class:`~kueued.scheduling.queues.PendingQueue`'s ``usage_of``,
the same door admission fair sharing uses: the queue's head is the pending workload
whose LocalQueue has the lowest key, then Kueue's order (priority, creation time).
What a LocalQueue holds is what its workloads admitted in this ClusterQueue hold,
*current*, not decayed (KEP-1093's "the more a queue has consumed", not KEP-4136).

* ``fair``: the key is the fair share (:func:`~.shares.fair_share`) of what the
  LocalQueue holds, per mille of what the ClusterQueue could ever hold (its nominal
  quota plus what it may borrow), dominant resource, divided by the LocalQueue's
  ``spec.fairSharing.weight`` (default 1; 0 sends a consuming LocalQueue last).
* ``capacity``: each LocalQueue is guaranteed its weight's part of the ClusterQueue's
  nominal quota (per resource, summed over flavors: ``nominal * w / sum of the weights
  of every LocalQueue of the ClusterQueue``).  The key is its *guarantee in use*, per
  mille, the highest over resources; LocalQueues below their guarantee (< 1000) go
  first, the furthest below first; the rest share the key 1000, so Kueue's order
  decides among them (KEP-1093: "workloads of LocalQueues which have used more than
  their weight are delayed").  A resource held without a guarantee counts as above it.
* ``fifo`` (or no annotation): Kueue's order (no hook).

Neither policy knows borrowing: LocalQueues hold no quota of their own, so the
ClusterQueue's borrowing is the same whichever LocalQueue goes first.

When it is recomputed.  What the LocalQueues hold is gathered from the World's
workloads once per ``epoch``: the coordinator moves it at the start of every round
(:meth:`~kueued.scheduling.fairsharing.admission.AdmissionFairSharing.observe`), and a
ClusterQueue pops at most one head per round, so every pop sees the admissions,
evictions and finishes before it, also while one instant of a timed run settles.
Without an ``epoch`` the usage is gathered at every call (correct, slower).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from kueued.model.validation.policy import CAPACITY, FAIR
from kueued.quota.node import FR
from kueued.scheduling.policies.shares import capacity_of, fair_share, parse_weight, per_resource, policy_of
from kueued.scheduling.snapshot import ClusterQueueSnapshot
from kueued.scheduling.view import WorldView as World
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["local_queue_hook", "local_queue_usage", "local_queue_guarantees", "guarantee_key"]

FULL = 1000
"""Per mille: a LocalQueue at or above its guarantee."""


def local_queue_usage(world: World, cq: str) -> dict[str, dict[FR, int]]:
    """Per LocalQueue (``namespace/name``): what its workloads admitted in ``cq`` hold."""
    out: dict[str, dict[FR, int]] = {}
    for key, placed in world.placed.items():
        spec = world.workloads.get(key)
        if spec is not None and placed.cluster_queue == cq:
            held = out.setdefault(spec.local_queue, {})
            for fr, v in placed.usage.items():
                held[fr] = held.get(fr, 0) + v
    return out


def _weight(world: World, lq: str) -> Fraction:
    obj = world.local_queues.get(lq)
    return parse_weight(obj.spec.fair_sharing if obj is not None else None)


def local_queue_guarantees(world: World, cq: ClusterQueueSnapshot) -> dict[str, dict[str, Fraction]]:
    """Per LocalQueue of ``cq``, per resource: its weight's part of ``cq``'s nominal quota (milli)."""
    nominal: dict[str, int] = {}
    for (_, res), lim in cq.node.limits.items():
        nominal[res] = nominal.get(res, 0) + lim.nominal
    weights = {key: _weight(world, key) for key, lq in world.local_queues.items()
               if lq.spec.cluster_queue == cq.name}
    total = sum(weights.values(), Fraction(0))
    if total == 0:
        return {key: {} for key in weights}
    return {key: {res: q * w / total for res, q in nominal.items()} for key, w in weights.items()}


def guarantee_key(used: Mapping[str, int], guarantee: Mapping[str, Fraction]) -> Fraction:
    """``capacity``'s key: the highest per mille of the guarantee in use, capped at :data:`FULL`."""
    worst = Fraction(0)
    for res, v in used.items():
        if v <= 0:
            continue
        g = guarantee.get(res, 0)
        if g <= 0:
            return Fraction(FULL)
        worst = max(worst, Fraction(v * FULL) / g)
    return min(worst, Fraction(FULL))


def local_queue_hook(world: World, cq: ClusterQueueSnapshot, *,
                     epoch: Callable[[], object] | None = None) -> Callable[[WorkloadInfo], float] | None:
    """The ``usage_of`` hook for ``cq``'s pending queue under ``fair`` or ``capacity``, else None."""
    policy = policy_of(world.cluster_queues.get(cq.name))
    if policy not in (FAIR, CAPACITY):
        return None
    marker: list[object] = [object()]
    usage: dict[str, dict[str, int]] = {}
    guarantees: dict[str, dict[str, Fraction]] = {}

    def held(lq: str) -> dict[str, int]:
        now = epoch() if epoch is not None else object()
        if now != marker[0]:
            marker[0] = now
            usage.clear()
            usage.update({key: per_resource(h) for key, h in local_queue_usage(world, cq.name).items()})
            if policy == CAPACITY:  # LocalQueues and their weights may change between rounds too
                guarantees.clear()
                guarantees.update(local_queue_guarantees(world, cq))
        return usage.get(lq, {})

    if policy == FAIR:
        capacity = capacity_of(cq.node)

        def share(wl: WorkloadInfo) -> float:
            return float(fair_share(held(wl.local_queue), capacity, weight=_weight(world, wl.local_queue)))
        return share

    def in_use(wl: WorkloadInfo) -> float:
        used = held(wl.local_queue)
        return float(guarantee_key(used, guarantees.get(wl.local_queue, {})))
    return in_use
