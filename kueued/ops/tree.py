"""The quota tree's numbers per node: nominal, quota, used, borrowed, lent; pending and admitted.

:func:`settle` builds the quota forest the engine builds (``kueued.scheduling.forest``)
from a World's objects and charges every admitted Workload to it, as the engine does on
a rebuild; it schedules nothing.  :func:`node_statuses` then reads, per Cohort and
ClusterQueue and per (flavor, resource) it has quota or usage for:

- ``nominal``: the node's own nominalQuota (0 for a Cohort without resourceGroups);
- ``quota``: every nominalQuota in its subtree, summed (a ClusterQueue: its nominal);
- ``used``: what the admitted Workloads of its subtree hold;
- ``borrowed``: what it takes from its parent beyond what it lends the parent:
  Kueue's ``borrowed`` (usage over nominal) for a ClusterQueue without lendingLimit;
- ``lent``: the part of its idle, lendable quota that its siblings' borrowing uses.
  The parent covers its children's borrowing with its own nominalQuota first, then with
  its children's idle quota, then from its own parent; when several children have idle
  quota, what they lend is shared in proportion to it (largest remainder, in whole units where
  every amount is whole, ties by name),
  so the lent amounts of a parent's children always add up to what it hands out.

Kueue's node balance (``quota/node.py``) is what ``borrowed`` and the idle quota are
computed on, so a lendingLimit counts as the engine counts it.
"""

from __future__ import annotations

import msgspec

from kueued.kube.tree_status import active_condition
from kueued.model.quantity import UNLIMITED, format_milli
from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.forest import Edges, build_forest, edges_of
from kueued.scheduling.policies import shares
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import World

__all__ = ["Amounts", "NodeStatus", "settle", "node_statuses", "pending_by_queue"]


class Amounts(msgspec.Struct, omit_defaults=True, rename="camel"):
    """One (flavor, resource) of one node, as quantity strings."""

    nominal: str
    quota: str
    used: str
    borrowed: str
    lent: str
    borrowing_limit: str | None = None
    lending_limit: str | None = None


class NodeStatus(msgspec.Struct, rename="camel"):
    kind: str                      # Cohort | ClusterQueue
    name: str
    parent: str | None = None
    depth: int = 0
    pending: int = 0               # routed here (a Cohort: anywhere below) and not admitted
    admitted: int = 0
    inactive: str | None = None    # why a ClusterQueue admits nothing
    resources: dict[str, dict[str, Amounts]] = {}  # flavor -> resource -> amounts


def settle(world: World) -> Snapshot:
    """The forest of ``world``'s Cohorts and ClusterQueues with every admitted Workload charged."""
    snap = build_forest(cluster_queues=world.cluster_queues, cohorts=world.cohorts, flavors=world.flavors,
                        fair_sharing=world.settings.fair_sharing, settings=world.settings)
    for key, placed in world.placed.items():
        spec = world.workloads.get(key)
        if spec is not None and placed.cluster_queue in snap.cluster_queues:
            snap.add_workload(WorkloadInfo(spec, placed))
    return snap


def pending_by_queue(world: World) -> dict[str, int]:
    """Pending Workloads per ClusterQueue they are routed to (``World.route``), counted as the daemon
    writes them in queue status (``World.queued``: unrouted, deactivated and held ones count nowhere,
    as Kueue queues none of them)."""
    out: dict[str, int] = {}
    for wl in world.workloads.values():
        if world.queued(wl):
            routed, _ = world.route(wl)
            if routed is not None:
                out[routed] = out.get(routed, 0) + 1
    return out


def _inactive(world: World, cq: ClusterQueueSnapshot, edges: Edges) -> str:
    """Why a ClusterQueue admits nothing, in the words of the Active condition the daemon writes."""
    obj = world.cluster_queues.get(cq.name)
    if obj is None:
        return cq.inactive_reason
    message = active_condition(world, cq, obj, edges).message
    return message.removeprefix("Can't admit new workloads: ").removesuffix(".") or cq.inactive_reason


def node_statuses(world: World, snapshot: Snapshot) -> dict[str, NodeStatus]:
    """Every node keyed ``Kind/name``, roots first, depth first, Cohorts before ClusterQueues."""
    pending = pending_by_queue(world)
    lent = _lent(snapshot)
    edges = edges_of(world.cluster_queues, world.cohorts)
    out: dict[str, NodeStatus] = {}
    stack = [(n, 0) for n in sorted((n for n in snapshot.nodes() if n.parent is None), key=_order, reverse=True)]
    while stack:
        node, depth = stack.pop()
        leaves = list(shares.leaves(node))
        status = NodeStatus("Cohort" if node.is_cohort else "ClusterQueue", node.name,
                            parent=node.parent.name if node.parent is not None else None, depth=depth,
                            pending=sum(pending.get(leaf.name, 0) for leaf in leaves),
                            admitted=sum(len(snapshot.cluster_queues[leaf.name].workloads) for leaf in leaves))
        if not node.is_cohort and not snapshot.cluster_queues[node.name].active:
            status.inactive = _inactive(world, snapshot.cluster_queues[node.name], edges)
        quota, used = shares.owned(node), shares.consumption(node)
        for fr in sorted({*quota, *used, *node.limits}):
            status.resources.setdefault(fr[0], {})[fr[1]] = _amounts(
                node, fr, quota=quota.get(fr, 0), used=used.get(fr, 0), lent=lent.get((id(node), fr), 0))
        out[f"{status.kind}/{node.name}"] = status
        stack.extend((c, depth + 1) for c in sorted(node.children, key=_order, reverse=True))
    return out


def _amounts(node: QuotaNode, fr: FR, *, quota: int, used: int, lent: int) -> Amounts:
    res = fr[1]
    lim = node.limit(fr)
    return Amounts(nominal=_q(lim.nominal, res), quota=_q(quota, res), used=_q(used, res),
                   borrowed=_q(borrowed(node, fr), res), lent=_q(lent, res),
                   borrowing_limit=None if lim.borrowing_limit is None else _q(lim.borrowing_limit, res),
                   lending_limit=None if lim.lending_limit is None else _q(lim.lending_limit, res))


def borrowed(node: QuotaNode, fr: FR) -> int:
    """What ``node`` holds in its parent beyond what it lends the parent (0 at a root)."""
    if node.parent is None:
        return 0
    return max(0, qn.parent_share(node, fr, node.usage.get(fr, 0)) - _lendable(node, fr))


def _idle(node: QuotaNode, fr: FR) -> int:
    """The part of what ``node`` lends its parent that it does not use itself."""
    return max(0, _lendable(node, fr) - qn.parent_share(node, fr, node.usage.get(fr, 0)))


def _lendable(node: QuotaNode, fr: FR) -> int:
    return node.subtree.get(fr, 0) - qn.local_quota(node, fr)


def _lent(snapshot: Snapshot) -> dict[tuple[int, FR], int]:
    """(id(node), fr) -> lent, for every child of every Cohort (module notes)."""
    out: dict[tuple[int, FR], int] = {}
    for co in snapshot.cohorts.values():
        parent = co.node
        children = sorted(parent.children, key=lambda n: n.name)
        frs = {fr for c in children for fr in (*c.subtree, *c.usage)}
        for fr in frs:
            idle = {id(c): _idle(c, fr) for c in children}
            supply = sum(idle.values())
            wanted = sum(borrowed(c, fr) for c in children) - parent.limit(fr).nominal
            total = min(supply, max(0, wanted))
            if total <= 0:
                continue
            # in whole units when every amount is whole (a GPU is not lent in thousandths), else in milli-units
            grain = 1000 if all(v % 1000 == 0 for v in (total, *idle.values())) else 1
            units = total // grain
            lent = {k: units * v // supply * grain for k, v in idle.items()}
            by_remainder = sorted(children, key=lambda c: -(units * idle[id(c)] % supply))
            for c in by_remainder[:units - sum(lent.values()) // grain]:
                lent[id(c)] += grain
            for k, v in lent.items():
                if v:
                    out[(k, fr)] = v
    return out


def _order(node: QuotaNode) -> tuple[bool, str]:
    return (not node.is_cohort, node.name)


def _q(amount: int, resource: str) -> str:
    return "unlimited" if amount >= UNLIMITED else format_milli(amount, resource=resource)
