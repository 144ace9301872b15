"""The numbers the admission policies rank by: consumption, fair share, guarantee in use.

All exact (``Fraction``, milli-unit ints); per mille like Kueue's weighted share, so
the ``simulate`` table can print the same number a policy compared.

* *consumption* of a node: what the ClusterQueues of its subtree hold, summed.  Not
  the node's own ``usage``: with lending limits a Cohort is only charged what its
  children take beyond their local quota, and a policy asks what a whole team holds.
* *owned* quota of a node: the nominal quota of every node of its subtree, summed.  Not
  the ``subtree`` quota, which leaves out what lending limits keep local below; owned
  is what consumption is measured against (a ClusterQueue owns its nominal quota).
* *capacity* of a Cohort: per resource (summed over flavors), the most its subtree could
  ever hold: ``potential_available`` (its pool plus what it may borrow from above) plus
  the local quota kept below it (owned - subtree).
* *fair share* of a child of a ``fair`` Cohort: per resource, consumption per mille of
  the Cohort's capacity, the dominant resource's value, divided by the child's
  ``spec.fairSharing.weight`` (default 1).  Weight 0: 0 while it holds nothing, +Inf
  once it holds anything.
* *guarantee in use* of a child of a ``capacity`` Cohort: per (flavor, resource) it
  owns quota of, consumption per mille of that quota, the highest one; a resource it
  holds without owning any makes it +Inf.  ``None`` for a node that owns no quota at
  all (it has no guarantee to be below).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction

from kueued.model import api
from kueued.model.validation.policy import ADMISSION_POLICY, FIFO, POLICIES
from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.fairsharing.share import parse_weight

__all__ = ["Share", "policy_of", "leaves", "consumption", "owned", "per_resource", "capacity_of",
           "fair_share", "guarantee_in_use", "parse_weight"]

Share = Fraction | float  # a float only for math.inf


def policy_of(obj: api.Cohort | api.ClusterQueue | None) -> str:
    """The object's ``kueued.io/admission-policy``; ``fifo`` when absent (or not understood)."""
    if obj is None:
        return FIFO
    value = obj.metadata.annotations.get(ADMISSION_POLICY, FIFO)
    return value if value in POLICIES else FIFO


def leaves(node: QuotaNode) -> Iterator[QuotaNode]:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.is_cohort:
            stack.extend(n.children)
        else:
            yield n


def consumption(node: QuotaNode) -> dict[FR, int]:
    """Usage held by the ClusterQueues of ``node``'s subtree, per (flavor, resource)."""
    if not node.is_cohort:
        return dict(node.usage)
    total: dict[FR, int] = {}
    for leaf in leaves(node):
        for fr, v in leaf.usage.items():
            total[fr] = total.get(fr, 0) + v
    return total


def owned(node: QuotaNode) -> dict[FR, int]:
    """The nominal quota of every node in ``node``'s subtree, summed, per (flavor, resource)."""
    total: dict[FR, int] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        for fr, lim in n.limits.items():
            total[fr] = total.get(fr, 0) + lim.nominal
        stack.extend(n.children)
    return total


def per_resource(amounts: Mapping[FR, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_, res), v in amounts.items():
        out[res] = out.get(res, 0) + v
    return out


def capacity_of(node: QuotaNode) -> dict[str, int]:
    """Per resource, the most ``node``'s subtree could ever hold (module notes)."""
    kept_below = owned(node)
    out: dict[str, int] = {}
    for fr in node.root().subtree:
        local = kept_below.get(fr, 0) - node.subtree.get(fr, 0)
        out[fr[1]] = out.get(fr[1], 0) + qn.potential_available(node, fr) + local
    return out


def fair_share(used: Mapping[str, int], capacity: Mapping[str, int], *, weight: Fraction) -> Share:
    """Dominant resource share of ``used`` in ``capacity`` (per mille), divided by ``weight``."""
    ratio = Fraction(0)
    for res, v in used.items():
        cap = capacity.get(res, 0)
        if v > 0 and cap > 0:
            ratio = max(ratio, Fraction(v * 1000, cap))
    if weight == 0:
        return math.inf if any(v > 0 for v in used.values()) else Fraction(0)
    return ratio / weight


def guarantee_in_use(node: QuotaNode, used: Mapping[FR, int] | None = None) -> Share | None:
    """The highest per mille of ``node``'s owned quota its subtree uses; None without quota."""
    used = consumption(node) if used is None else used
    quota = {fr: q for fr, q in owned(node).items() if q > 0}
    if not quota:
        return None
    worst: Share = Fraction(0)
    for fr, v in used.items():
        if v <= 0:
            continue
        q = quota.get(fr)
        worst = max(worst, math.inf if q is None else Fraction(v * 1000, q))
    return worst
