"""Koordinator's multi-hierarchy elastic quota: request bottom up, runtime top down.

Why: an ElasticQuota group owns a guaranteed ``min`` and a ceiling ``max``; what it may
actually use right now, its *runtime*, depends on what every other group asks for.  This
module is the pure arithmetic of that, mirroring Koordinator's
``pkg/scheduler/plugins/elasticquota/core``:

1. **Request, bottom up** (GroupQuotaManager.recursiveUpdateGroupTreeWithDeltaRequest).
   A leaf's request is the sum of its workloads' requests (pending and admitted alike).
   An inner group's request is the sum of its children's *limited* requests.  A group
   that does not lend raises its request to its min (per min key).  What goes up is
   ``min(request, max)`` (QuotaInfo.getLimitRequestNoLock); keys missing from max pass
   uncapped.

2. **Runtime, top down** (GroupQuotaManager.RefreshRuntimeNoLock).  Each inner node P
   splits ``total(P)`` among its children, one resource at a time: the root's total is
   the cluster's (minus what the system and default groups use), an inner node's total
   is its own runtime.  Per resource (RuntimeQuotaCalculator / quotaTree):

   * min scaling (ScaleMinQuotaManager.getScaledMinQuota): where the children's original
     mins sum above the total, each min becomes ``floor(total * min / sum)``;
   * redistribution: a child asking more than its (scaled) min starts at that min and
     borrows; a lender gets its request, a non-lender its min; what is left is the pool;
   * iterationForRedistribution: the pool is split by shared weight with the largest
     remainder method (computeHamiltonDeltas, ties by name ascending), a child reaching
     its request is clipped and gives the excess back to the next round.

Units: the calculator works per resource in Koordinator's int64 values (cpu in millicores,
everything else in whole units rounded up) so that rounding matches Koordinator exactly;
inputs and outputs are kueued's milli-units (``model.koordinator.koord_value``).  The
scaled min is computed with exact integer floor division where Koordinator goes through
float64; the two agree unless ``total * min`` exceeds 2**53 and the quotient is within
one ulp of an integer.

The system and default groups sit outside the tree: their runtime is their max.

Every step is also callable one group at a time (:func:`limit_request` for what a group
passes up, :func:`divide_runtime` for how one parent splits its total), so the actor
engine (``actors/elastic/``), where each group only knows its own children, computes
exactly what :func:`compute_runtime` computes for the whole tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kueued.model.koordinator import (
    DEFAULT_QUOTA,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    from_koord_value,
    koord_value,
)

__all__ = [
    "Resources", "ElasticGroup", "GroupQuota", "Share", "OUTSIDE_TREE",
    "tree_children", "limit_request", "aggregate_requests", "hamilton_deltas", "redistribute", "scale_mins",
    "implicit_cluster_total", "calculator_keys", "divide_runtime", "masked_runtime", "compute_runtime", "sum_resources",
]

Resources = dict[str, int]
"""Resource name -> amount in milli-units."""

OUTSIDE_TREE = frozenset({SYSTEM_QUOTA, DEFAULT_QUOTA})


@dataclass(frozen=True, slots=True)
class ElasticGroup:
    """One quota group's configuration (amounts in milli-units)."""

    name: str
    parent: str = ROOT_QUOTA
    is_parent: bool = False
    min: Mapping[str, int] = field(default_factory=dict)
    max: Mapping[str, int] = field(default_factory=dict)
    shared_weight: Mapping[str, int] | None = None
    allow_lent_resource: bool = True

    def weight(self) -> Resources:
        """GetSharedWeight: the weight, or max when unset or all zero."""
        if self.shared_weight is None or not any(self.shared_weight.values()):
            return dict(self.max)
        return dict(self.shared_weight)


@dataclass(frozen=True, slots=True)
class GroupQuota:
    """Computed amounts of one group, all in milli-units."""

    name: str
    request: Resources
    limited_request: Resources
    min: Resources
    scaled_min: Resources
    max: Resources
    runtime: Resources


class Share(NamedTuple):
    """One child in one resource dimension of its parent's calculator (quotaNode)."""

    name: str
    min: int
    request: int
    weight: int
    lend: bool


def tree_children(groups: Mapping[str, ElasticGroup]) -> tuple[dict[str, list[str]], set[str]]:
    """Children lists keyed by parent (the root included) and the groups the root reaches.

    A group whose parent is unknown, or that sits on a parent cycle, is unreachable and
    gets no runtime (buildSubParGroupTopoNoLock hangs it under a detached node).
    """
    children: dict[str, list[str]] = {}
    for name in sorted(groups):
        if name in OUTSIDE_TREE or name == ROOT_QUOTA:
            continue
        children.setdefault(groups[name].parent or ROOT_QUOTA, []).append(name)
    reached: set[str] = set()
    stack = [ROOT_QUOTA]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in reached:
                reached.add(child)
                stack.append(child)
    return children, reached


def _is_inner(group: ElasticGroup, children: Mapping[str, list[str]]) -> bool:
    return group.is_parent or bool(children.get(group.name))


def limit_request(group: ElasticGroup, asked: Mapping[str, int]) -> tuple[Resources, Resources]:
    """One group's (request, limited request) from what its children or workloads ask.

    Negative amounts count as zero; a group that does not lend raises its request to its
    min; what goes up to the parent is capped by max on max's keys only.
    """
    req = {r: max(v, 0) for r, v in asked.items()}
    if not group.allow_lent_resource:
        for r, m in group.min.items():
            req[r] = max(req.get(r, 0), m)
    return req, {r: min(v, group.max[r]) if r in group.max else v for r, v in req.items()}


def aggregate_requests(
    groups: Mapping[str, ElasticGroup],
    own_requests: Mapping[str, Mapping[str, int]],
) -> tuple[dict[str, Resources], dict[str, Resources]]:
    """(request, limited request) of every group, bottom up.

    ``own_requests`` are the summed workload requests of each leaf, already masked to the
    leaf's max keys.  Inner groups ignore own requests: only leaves hold workloads.
    """
    children, _ = tree_children(groups)
    request: dict[str, Resources] = {}
    limited: dict[str, Resources] = {}

    def visit(name: str, path: frozenset[str]) -> Resources:
        if name in limited:
            return limited[name]
        group = groups[name]
        if _is_inner(group, children):
            child_request: Resources = {}
            for child in children.get(name, []):
                if child in path:  # a parent cycle: the edge contributes nothing
                    continue
                for r, v in visit(child, path | {child}).items():
                    child_request[r] = child_request.get(r, 0) + v
        else:
            child_request = {r: v for r, v in (own_requests.get(name) or {}).items()}
        request[name], limited[name] = limit_request(group, child_request)
        return limited[name]

    for name in sorted(groups):
        if name in OUTSIDE_TREE:
            request[name] = {r: max(v, 0) for r, v in (own_requests.get(name) or {}).items()}
            limited[name] = dict(request[name])
        else:
            visit(name, frozenset({name}))
    return request, limited


def hamilton_deltas(pool: int, shares: Sequence[Share]) -> list[int]:
    """computeHamiltonDeltas: split ``pool`` by weight, residual to the largest remainders.

    ``base_i = w_i * pool // W``; the ``pool - sum(base)`` units left go one each to the
    largest remainders ``w_i * pool % W``, ties by name ascending.  Weight <= 0 gets 0.
    The deltas sum to ``pool`` exactly whenever some weight is positive.
    """
    deltas = [0] * len(shares)
    total_weight = sum(s.weight for s in shares if s.weight > 0)
    if pool <= 0 or total_weight <= 0:
        return deltas
    remainders: list[tuple[int, str, int]] = []
    for i, share in enumerate(shares):
        if share.weight <= 0:
            continue
        base, rem = divmod(share.weight * pool, total_weight)
        deltas[i] = base
        remainders.append((-rem, share.name, i))
    residual = pool - sum(deltas)
    for _, _, i in sorted(remainders)[:max(residual, 0)]:
        deltas[i] += 1
    return deltas


def redistribute(total: int, shares: Sequence[Share]) -> dict[str, int]:
    """quotaTree.redistribution + iterationForRedistribution for one resource.

    Nothing is taken back when the mins alone exceed ``total`` (the pool is then <= 0);
    a leftover pool that only weight-0 borrowers could use stays unassigned.
    """
    runtime: dict[str, int] = {}
    borrowers: list[Share] = []
    pool = total
    for share in shares:
        if share.request > share.min:
            borrowers.append(share)
            runtime[share.name] = share.min
        elif share.lend:
            runtime[share.name] = share.request
        else:
            runtime[share.name] = share.min
        pool -= runtime[share.name]
    while pool > 0 and borrowers:
        if sum(s.weight for s in borrowers) <= 0:
            break
        deltas = hamilton_deltas(pool, borrowers)
        pool, still = 0, []
        for share, delta in zip(borrowers, deltas, strict=True):
            runtime[share.name] += delta
            if runtime[share.name] < share.request:
                still.append(share)
            else:
                pool += runtime[share.name] - share.request
                runtime[share.name] = share.request
        borrowers = still
    return runtime


def scale_mins(total: Mapping[str, int], mins: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """getScaledMinQuota for all children of one parent (amounts in Koordinator values).

    For every resource of ``total`` where the children's mins (idle children included)
    sum above it, each child's min becomes ``floor(total * min / sum)``, 0 when the total
    is not positive.  Other resources keep the original min.
    """
    scaled = {child: dict(m) for child, m in mins.items()}
    for r, t in total.items():
        s = sum(m.get(r, 0) for m in mins.values())
        if t >= s:
            continue
        for child, m in mins.items():
            scaled[child][r] = t * m.get(r, 0) // s if t > 0 and s > 0 else 0
    return scaled


def implicit_cluster_total(groups: Mapping[str, ElasticGroup]) -> Resources:
    """The cluster total when no Node is modelled: the top-level groups' max, summed.

    Every top-level group then gets whatever it asks for, up to its max, so the
    simulator's own capacity never binds; the conformance scenarios model the cluster as
    a top-level group with min = max = total that does not lend.
    """
    total: Resources = {}
    children, _ = tree_children(groups)
    for name in children.get(ROOT_QUOTA, []):
        for r, v in groups[name].max.items():
            total[r] = total.get(r, 0) + v
    return total


def _koord(resources: Mapping[str, int]) -> dict[str, int]:
    return {r: koord_value(r, v) for r, v in resources.items()}


def _calculator_keys(groups: Mapping[str, ElasticGroup], parent: str) -> list[str]:
    return calculator_keys(None if parent == ROOT_QUOTA else groups[parent], groups.values())


def calculator_keys(parent: ElasticGroup | None, groups: Iterable[ElasticGroup] = ()) -> list[str]:
    """The resources a parent's calculator splits: its max keys; the root's are every group's."""
    if parent is None:
        return sorted({r for g in groups for r in g.max})
    return sorted(parent.max)


def divide_runtime(
    total: Mapping[str, int],
    children: Sequence[tuple[ElasticGroup, Mapping[str, int]]],
    *,
    keys: Iterable[str],
    scale_min: bool = True,
) -> tuple[dict[str, Resources], dict[str, Resources]]:
    """One parent's split of ``total`` among its children: (runtime, scaled min) per child.

    ``total`` and both results are in Koordinator values (the parent's own runtime as
    its parent gave it, or the cluster's for the root); ``children`` pairs each child's
    configuration with its limited request in milli-units.  This is all a parent needs
    to know, so a group actor can run it on what its children told it.
    """
    mins = {c.name: _koord(c.min) for c, _ in children}
    scaled = scale_mins(total, mins) if scale_min else mins
    weights = {c.name: _koord(c.weight()) for c, _ in children}
    runtime: dict[str, Resources] = {c.name: {} for c, _ in children}
    for r in keys:
        shares = [
            Share(c.name, scaled[c.name].get(r, 0), koord_value(r, asked.get(r, 0)),
                  weights[c.name].get(r, 0), c.allow_lent_resource)
            for c, asked in children
        ]
        for name, value in redistribute(total.get(r, 0), shares).items():
            runtime[name][r] = value
    return runtime, {c.name: scaled[c.name] for c, _ in children}


def masked_runtime(group: ElasticGroup, runtime: Mapping[str, int]) -> Resources:
    """getMaskedRuntimeNoLock: a runtime in Koordinator values, in milli-units on max's keys."""
    return {r: from_koord_value(r, runtime.get(r, 0)) for r in group.max}


def compute_runtime(
    groups: Mapping[str, ElasticGroup],
    own_requests: Mapping[str, Mapping[str, int]],
    cluster_total: Mapping[str, int],
    *,
    scale_min: bool = True,
) -> dict[str, GroupQuota]:
    """Request, scaled min and runtime of every group.

    ``cluster_total`` is what the root shares (already net of the system and default
    groups' usage).  Runtimes are reported for each group's max keys
    (getMaskedRuntimeNoLock); an unreachable group gets zero runtime.
    """
    request, limited = aggregate_requests(groups, own_requests)
    children, reached = tree_children(groups)
    runtime: dict[str, dict[str, int]] = {}
    scaled: dict[str, dict[str, int]] = {}
    totals: dict[str, dict[str, int]] = {ROOT_QUOTA: _koord(cluster_total)}
    frontier = [ROOT_QUOTA]
    while frontier:
        parent = frontier.pop(0)
        kids = [c for c in children.get(parent, []) if c in reached]
        if not kids:
            continue
        split, scaled_here = divide_runtime(
            totals[parent], [(groups[c], limited[c]) for c in kids],
            keys=_calculator_keys(groups, parent), scale_min=scale_min,
        )
        for child in kids:
            runtime[child] = split[child]
            scaled[child] = scaled_here[child]
            totals[child] = runtime[child]
            frontier.append(child)

    out: dict[str, GroupQuota] = {}
    for name, group in groups.items():
        if name in OUTSIDE_TREE:
            masked = dict(group.max)
            scaled_min = dict(group.min)
        else:
            masked = masked_runtime(group, runtime.get(name, {}))
            scaled_min = {r: from_koord_value(r, v) for r, v in scaled.get(name, _koord(group.min)).items()}
        out[name] = GroupQuota(
            name=name, request=request.get(name, {}), limited_request=limited.get(name, {}),
            min=dict(group.min), scaled_min=scaled_min, max=dict(group.max), runtime=masked,
        )
    return out


def sum_resources(items: Iterable[Mapping[str, int]]) -> Resources:
    """Add resource lists key by key."""
    total: Resources = {}
    for item in items:
        for r, v in item.items():
            total[r] = total.get(r, 0) + v
    return total
