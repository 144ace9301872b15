"""``kueued status``: the quota tree, from manifest files or a live cluster, as a rich tree or JSON.

From files the manifests are run to quiescence first (``kueued simulate``'s run, with the
engine the CLI hands in) and the tree shows where that leaves them; from a cluster the
Workloads' ``status.admission`` is what counts, and nothing is scheduled.  Either way
the numbers are :mod:`kueued.ops.tree`'s, read off the engine's quota forest.

The JSON is :class:`TreeReport`: ``nodes`` keyed ``Kind/name`` in tree order (roots
first, depth first), each with its parent, depth, pending and admitted counts and, per
flavor and resource, ``nominal``, ``quota``, ``used``, ``borrowed`` and ``lent`` as
Kubernetes quantities; ``unrouted`` lists pending Workloads that reach no ClusterQueue
and why; ``rejected`` the objects the World refused; ``quotaGroups`` the ElasticQuota trees
(:mod:`kueued.ops.elastic_status`: min, max, runtime, request, used; pending and admitted).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import msgspec
from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from kueued.ops.elastic_status import QuotaGroupStatus, quota_group_statuses, render_groups
from kueued.ops.tree import NodeStatus, node_statuses, settle
from kueued.simulate import Report
from kueued.world import World

__all__ = ["TreeReport", "status_of_world", "status_from_files", "render"]

Runner = Callable[[World], Report]


class TreeReport(msgspec.Struct, rename="camel"):
    source: str                    # "files" or the cluster's kubeconfig
    nodes: dict[str, NodeStatus]
    unrouted: dict[str, str] = {}  # pending Workload -> why it reaches no ClusterQueue
    rejected: dict[str, str] = {}
    quota_groups: dict[str, QuotaGroupStatus] = {}  # ElasticQuota name -> its numbers, in tree order


def status_of_world(world: World, *, source: str, admitted: Collection[str] = (),
                    group_amounts: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None) -> TreeReport:
    """The tree as ``world`` holds it now: admitted Workloads charged, nothing scheduled.  ``admitted``:
    Workloads a run admitted besides the World's placements (an ElasticQuota group's);
    ``group_amounts``: each ElasticQuota's runtime and request from a run (else its annotations)."""
    nodes = node_statuses(world, settle(world))
    unrouted = {}
    for key, wl in sorted(world.workloads.items()):
        if key not in world.placed and key not in admitted:
            routed, why = world.route(wl)
            if routed is None:
                group = world.elastic_quota_of(key)
                unrouted[key] = why if group is None else f"waits in ElasticQuota {group}"
    groups = quota_group_statuses(world, admitted={*world.placed, *admitted}, amounts=group_amounts) \
        if world.elastic_quotas else {}
    return TreeReport(source, nodes, unrouted, dict(world.rejected), groups)


def status_from_files(manifests: list[dict[str, Any]], *, runner: Runner) -> TreeReport:
    """Apply, run to quiescence with ``runner`` (``actors.simulation.run_actors``), and read the tree."""
    world, report = run_world(manifests, runner=runner)
    return status_of_world(world, source="files",
                           admitted={key for key, w in report.workloads.items() if w.state == "admitted"},
                           group_amounts=report.quota_groups)


def run_world(manifests: list[dict[str, Any]], *, runner: Runner) -> tuple[World, Report]:
    """``kueued simulate``'s run, keeping the World: its Workloads end admitted or pending as reported."""
    world = World()
    for m in manifests:
        world.apply(m)
    return world, runner(world)


def render(report: TreeReport, console: Console | None = None) -> None:
    """One rich tree per root; names and reasons go in as Text, never as markup."""
    console = console or Console(width=160)
    by_parent: dict[str | None, list[NodeStatus]] = {}
    for node in report.nodes.values():
        by_parent.setdefault(node.parent, []).append(node)
    if not report.nodes and not report.quota_groups:
        console.print(Text("no Cohorts, ClusterQueues or ElasticQuotas"))
    for root in by_parent.get(None, []):
        tree = Tree(_label(root))
        _grow(tree, root, by_parent)
        console.print(tree)
    for tree in render_groups(report.quota_groups):
        console.print(tree)
    if report.unrouted:
        console.print(Text(f"{len(report.unrouted)} pending Workload(s) reach no ClusterQueue:", style="yellow"))
        for key, why in report.unrouted.items():
            console.print(Text(f"  {key}: {why}"))
    if report.rejected:
        console.print(Text(f"{len(report.rejected)} object(s) refused:", style="red"))
        for key, why in report.rejected.items():
            console.print(Text(f"  {key}: {why}"))


def _grow(tree: Tree, node: NodeStatus, by_parent: dict[str | None, list[NodeStatus]]) -> None:
    for flavor, resources in node.resources.items():
        for res, a in resources.items():
            line = Text(f"{flavor} {res}: ", style="dim")
            line.append(f"used {a.used} of quota {a.quota}")
            if node.kind == "Cohort" and a.nominal != "0":
                line.append(f" (own nominal {a.nominal})")
            if a.borrowed != "0":
                line.append(f" · borrowed {a.borrowed}", style="yellow")
            if a.lent != "0":
                line.append(f" · lent {a.lent}", style="cyan")
            if a.borrowing_limit is not None:
                line.append(f" · borrowingLimit {a.borrowing_limit}")
            if a.lending_limit is not None:
                line.append(f" · lendingLimit {a.lending_limit}")
            tree.add(line)
    for child in by_parent.get(node.name if node.kind == "Cohort" else "\0", []):
        _grow(tree.add(_label(child)), child, by_parent)


def _label(node: NodeStatus) -> Text:
    text = Text(f"{node.kind} ", style="dim")
    text.append(node.name, style="bold")
    text.append(f"  pending {node.pending} · admitted {node.admitted}")
    if node.inactive:
        text.append(f"  inactive: {node.inactive}", style="red")
    return text
