"""Why a pending workload does not fit: the node of the tree that blocks it, with numbers.

Walks a request up the path exactly as a borrow request climbs (``actors/node.py``):
at each node the part the node's free local quota cannot cover is charged upward;
the first node where usage + charge would pass what the node may hold (its subtree
quota plus its borrowingLimit, or its subtree quota at a root) is the one that
blocks.  The sentence names it, e.g.
``cohort research: cpu 12 used + 4 requested > 10 quota + 2 borrowingLimit``.

Those numbers are Kueue's node balance: a Cohort's usage and quota count only what its members
lend to it, so where a lendingLimit keeps part of a member's quota (and the usage inside it) out
of the Cohort, they are smaller than the whole subtree's usage and nominal quota that
``simulate``'s Queues table shows; the sentence then says so.
"""

from __future__ import annotations

from kueued.model.quantity import format_milli
from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.snapshot import ClusterQueueSnapshot
from kueued.scheduling.workload import WorkloadInfo, WorkloadSpec

__all__ = ["blocking_node", "explain", "STRICT_FIFO_WAIT"]

STRICT_FIFO_WAIT = "waiting behind the head of its StrictFIFO queue"
"""The reason of a pending workload no cycle judged: a StrictFIFO queue tries its head only."""


def blocking_node(leaf: QuotaNode, fr: FR, value: int) -> tuple[QuotaNode, int, int, int | None] | None:
    """(node, usage there, charge arriving there, borrowingLimit or None) for the first node that refuses."""
    node: QuotaNode | None = leaf
    charge = value
    while node is not None:
        used = node.usage.get(fr, 0)
        limit = qn.allowed(node, fr, has_parent=node.parent is not None)
        if charge > 0 and limit is not None and used + charge > limit:
            bl = node.limit(fr).borrowing_limit if node.parent is not None else None
            return node, used, charge, bl
        charge = qn.parent_share(node, fr, used + charge) - qn.parent_share(node, fr, used)
        node = node.parent
    return None


def _pooled(node: QuotaNode, fr: FR) -> bool:
    """Whether a lendingLimit below ``node`` keeps quota out of it: its numbers then count the pool
    its members lend to it, not all they hold (what ``simulate``'s Queues table shows)."""
    stack = list(node.children)
    while stack:
        child = stack.pop()
        if qn.local_quota(child, fr):
            return True
        stack.extend(child.children)
    return False


def explain(cq: ClusterQueueSnapshot, wl: WorkloadSpec | WorkloadInfo) -> str:
    """One clause per flavor that was tried for the first resource that cannot fit."""
    parts: list[str] = []
    for ps in wl.pod_sets:
        for res, value in ps.requests.items():
            group = cq.group_of.get(res)
            if group is None:
                continue
            clauses = []
            for flavor in group.flavors:
                hit = blocking_node(cq.node, (flavor, res), value)
                if hit is None:
                    continue
                node, used, charge, bl = hit
                kind = "cohort" if node.is_cohort else "ClusterQueue"
                quota = format_milli(node.subtree.get((flavor, res), 0), resource=res)
                limit = f" + {format_milli(bl, resource=res)} borrowingLimit" if bl is not None else ""
                pooled = _pooled(node, (flavor, res))
                clauses.append(f"flavor {flavor}: {kind} {node.name}: {res} {format_milli(used, resource=res)} "
                               f"used + {format_milli(charge, resource=res)} requested > {quota} quota{limit}"
                               + (" (counted in its shared pool: members' lendingLimits keep the rest)"
                                  if pooled else ""))
            if clauses:
                parts.append("; ".join(clauses))
                return " | ".join(parts)
    return ""
