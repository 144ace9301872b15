"""Build the quota forest (a :class:`Snapshot` with zero usage) from API objects.

Topology comes from ``kueued.quota.tree.Edges`` (implicit cohorts, cycles); amounts
from each object's resource groups.  Subtree quotas are computed bottom-up
(``subtree(cohort) = own + sum(subtree(child) - local_quota(child))``).  A
ClusterQueue is inactive when a flavor it names does not exist, when it sits on or
under a cohort cycle or past the tree's depth limit, or when it is stopped; its workloads are never scheduled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueued.model import api
from kueued.model.limits import MAX_TREE_DEPTH
from kueued.model.quantity import parse
from kueued.quota import node as qn
from kueued.quota.node import FR, Limits, QuotaNode
from kueued.quota.tree import Edges, cycle_words
from kueued.scheduling.snapshot import ClusterQueueSnapshot, CohortSnapshot, Snapshot

__all__ = ["build_forest", "limits_of", "edges_of"]


def limits_of(groups: list[api.ResourceGroup]) -> dict[FR, Limits]:
    out: dict[FR, Limits] = {}
    for rg in groups:
        for fq in rg.flavors:
            for rq in fq.resources:
                out[(fq.name, rq.name)] = Limits(
                    parse(rq.nominal_quota),
                    None if rq.borrowing_limit is None else parse(rq.borrowing_limit),
                    None if rq.lending_limit is None else parse(rq.lending_limit))
    return out


def edges_of(cluster_queues: Mapping[str, api.ClusterQueue], cohorts: Mapping[str, api.Cohort]) -> Edges:
    return Edges({n: c.spec.parent_name for n, c in cohorts.items()},
                 {n: c.spec.cohort_name for n, c in cluster_queues.items()})


def build_forest(*, cluster_queues: Mapping[str, api.ClusterQueue], cohorts: Mapping[str, api.Cohort],
                 flavors: dict[str, api.ResourceFlavor], fair_sharing: bool = False,
                 settings: Any = None) -> Snapshot:
    edges = edges_of(cluster_queues, cohorts)
    snap = Snapshot(flavors=flavors, fair_sharing=fair_sharing, settings=settings)
    for name in edges.cohorts:
        obj = cohorts.get(name)
        node = QuotaNode(name, is_cohort=True)
        node.limits = limits_of(obj.spec.resource_groups) if obj else {}
        snap.register(CohortSnapshot(name, obj.spec if obj else None, node))
    for name, co in snap.cohorts.items():
        parent = edges.parent_of_cohort(name)
        if parent and name not in edges.inactive:
            co.node.parent = snap.cohorts[parent].node
            co.node.parent.children.append(co.node)
    for name in sorted(cluster_queues):
        cq = cluster_queues[name]
        node = QuotaNode(name, is_cohort=False)
        node.limits = limits_of(cq.spec.resource_groups)
        reason = _inactive_reason(cq, flavors, edges)
        item = ClusterQueueSnapshot(name, cq.spec, node, active=not reason, inactive_reason=reason)
        if cq.spec.cohort_name and not edges.cq_cut_off(name):
            node.parent = snap.cohorts[cq.spec.cohort_name].node
            node.parent.children.append(node)
        snap.register(item)
    for root in [n for n in snap.nodes() if n.parent is None]:  # cut-off cohorts are roots too
        _fill_subtree(root)
    return snap


def _fill_subtree(root: QuotaNode) -> None:
    """Subtree quotas bottom up, iteratively (children before their parent)."""
    order: list[QuotaNode] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    for node in reversed(order):
        total = {fr: lim.nominal for fr, lim in node.limits.items()}
        for child in node.children:
            for fr, v in child.subtree.items():
                total[fr] = total.get(fr, 0) + v - qn.local_quota(child, fr)
        node.subtree = total


def _inactive_reason(cq: api.ClusterQueue, flavors: Mapping[str, api.ResourceFlavor], edges: Edges) -> str:
    if cq.metadata.deletion_timestamp:
        return (f"ClusterQueue {cq.metadata.name} is inactive: it is terminating (it goes once no workload "
                "is admitted in it)")
    missing = sorted({f.name for rg in cq.spec.resource_groups for f in rg.flavors if f.name not in flavors})
    if missing:
        return f"ClusterQueue {cq.metadata.name} is inactive: flavor(s) {', '.join(missing)} not found"
    if edges.cq_cut_off(cq.metadata.name):
        if cq.spec.cohort_name in edges.cyclic:
            return (f"ClusterQueue {cq.metadata.name} is inactive: cohort {cq.spec.cohort_name} "
                    f"{cycle_words(edges.cohort_parent, cq.spec.cohort_name)}")
        return (f"ClusterQueue {cq.metadata.name} is inactive: cohort {cq.spec.cohort_name} is at level "
                f"{edges.too_deep[cq.spec.cohort_name]} of its tree; kueued allows at most {MAX_TREE_DEPTH} levels")
    checks = cq.spec.admission_check_names()
    if checks:  # Kueue's AdmissionCheckNotFound: none exists for kueued, which runs no admission checks
        return (f"ClusterQueue {cq.metadata.name} is inactive: references missing AdmissionCheck(s): "
                f"{', '.join(checks)} (kueued runs no admission checks)")
    if cq.spec.stop_policy not in ("", "None"):
        return f"ClusterQueue {cq.metadata.name} is inactive: stopPolicy {cq.spec.stop_policy}"
    return ""
