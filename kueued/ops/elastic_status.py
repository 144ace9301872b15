"""ElasticQuota trees in ``kueued status``: each quota's min and max, the runtime quota the
water-filling gives it and what its workloads request, what its admitted workloads use, and how
many wait and run, in tree order (each quota before its children, depth first, by name).

- ``runtime`` and ``request``: from files, the run's (``Report.quota_groups``); from a cluster,
  the ``quota.scheduling.koordinator.sh/runtime`` and ``/request`` annotations the daemon writes
  on each quota, as Koordinator's scheduler does (absent means zero, as Koordinator reads them);
- ``used``: the requests of the group's admitted workloads (Kubernetes' pod rule times count,
  :func:`~kueued.scheduling.elastic_inputs.workload_requests`), summed; a parent's includes its
  children's, as Koordinator's ``used`` does;
- ``pending`` and ``admitted``: the workloads that join the group (``World.elastic_quota_of``).

Amounts are Kubernetes quantities; a quota refused by Koordinator's webhook rules is not in force,
so it is not drawn (``rejected`` lists it).  The groups Koordinator makes for itself (its root,
system and default quotas) appear only where a manifest defines them or a workload joins them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import msgspec
from rich.text import Text
from rich.tree import Tree

from kueued.model import koordinator as k
from kueued.model.quantity import QuantityError, format_milli
from kueued.scheduling.elastic_inputs import workload_requests
from kueued.world import World

__all__ = ["QuotaGroupStatus", "quota_group_statuses", "render_groups"]

Amounts = Mapping[str, int]


class QuotaGroupStatus(msgspec.Struct, omit_defaults=True, rename="camel"):
    namespace: str
    parent: str | None = None      # None for a top-level quota (Koordinator's root is its parent)
    depth: int = 0
    pending: int = 0
    admitted: int = 0
    min: dict[str, str] = {}
    max: dict[str, str] = {}
    runtime: dict[str, str] = {}
    request: dict[str, str] = {}
    used: dict[str, str] = {}


def quota_group_statuses(world: World, *, admitted: Collection[str],
                         amounts: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
                         ) -> dict[str, QuotaGroupStatus]:
    """Every ElasticQuota in force, by name in tree order.  ``admitted``: the workloads holding
    quota (``namespace/name``); ``amounts``: each group's ``runtime`` and ``request`` as quantities
    (a run's ``Report.quota_groups``), or None to read them from the quotas' annotations (a cluster's)."""
    quotas = {k.name_of(q): q for q in world.elastic_quotas.values() if k.name_of(q)}
    own_used: dict[str, dict[str, int]] = {}
    waiting: dict[str, int] = {}
    running: dict[str, int] = {}
    for key in world.workloads:
        group = world.elastic_quota_of(key)
        if group is None:
            continue
        if key not in admitted:
            waiting[group] = waiting.get(group, 0) + 1
            continue
        running[group] = running.get(group, 0) + 1
        try:
            asks = workload_requests(world.raw.get(f"Workload/{key}") or {})
        except (QuantityError, TypeError, ValueError):
            continue  # (validation refused such a workload; never a crash of a read-only command)
        total = own_used.setdefault(group, {})
        for res, v in asks.items():
            total[res] = total.get(res, 0) + v
    for group in {*waiting, *running}:  # a group workloads join without a manifest (the default quota)
        quotas.setdefault(group, {"metadata": {"name": group}})
    parent_of = {name: _parent(q, quotas) for name, q in quotas.items()}
    children: dict[str | None, list[str]] = {}
    for name in sorted(quotas):
        children.setdefault(parent_of[name], []).append(name)
    out: dict[str, QuotaGroupStatus] = {}

    def visit(name: str, depth: int) -> dict[str, int]:
        """Fill ``name`` and its subtree; returns the subtree's used."""
        q = quotas[name]
        used = dict(own_used.get(name, {}))
        status = QuotaGroupStatus(namespace=k.namespace_of(q), parent=parent_of[name], depth=depth,
                                  pending=waiting.get(name, 0), admitted=running.get(name, 0),
                                  min=_spec(q, "min"), max=_spec(q, "max"))
        out[name] = status
        for child in children.get(name, []):
            if child not in out:  # (a cycle is refused by validation; never loop on one)
                for res, v in visit(child, depth + 1).items():
                    used[res] = used.get(res, 0) + v
        given = amounts.get(name, {}) if amounts is not None else {
            "runtime": _quantities(k.annotated_amounts(q, k.ANNOTATION_RUNTIME)),
            "request": _quantities(k.annotated_amounts(q, k.ANNOTATION_REQUEST))}
        status.runtime = dict(given.get("runtime", {}))
        status.request = dict(given.get("request", {}))
        status.used = _quantities(used)
        return used

    for root in children.get(None, []):
        visit(root, 0)
    for name in sorted(quotas):  # a parent chain that never reaches a root (refused before it got here)
        if name not in out:
            visit(name, 0)
    return out


def render_groups(groups: Mapping[str, QuotaGroupStatus]) -> list[Tree]:
    """One rich tree per top-level quota; names go in as Text, never as markup."""
    trees: dict[str, Tree] = {}
    roots: list[Tree] = []
    for name, g in groups.items():
        label = Text("ElasticQuota ", style="dim")
        label.append(name, style="bold")
        label.append(f"  pending {g.pending} · admitted {g.admitted}")
        node = Tree(label) if g.parent is None or g.parent not in trees else trees[g.parent].add(label)
        if g.parent is None or g.parent not in trees:
            roots.append(node)
        trees[name] = node
        for res in sorted({*g.min, *g.max, *g.runtime, *g.request, *g.used}):
            line = Text(f"{res}: ", style="dim")
            line.append(f"used {g.used.get(res, '0')} of runtime {g.runtime.get(res, '0')}")
            line.append(f" · request {g.request.get(res, '0')}")
            line.append(f" · min {g.min.get(res, '0')} · max {g.max.get(res, '-')}")
            node.add(line)
    return roots


def _parent(q: Mapping[str, Any], quotas: Mapping[str, Any]) -> str | None:
    parent = k.parent_name(q)
    return parent if parent and parent != k.name_of(q) and parent in quotas else None


def _spec(q: Mapping[str, Any], field: str) -> dict[str, str]:
    spec = q.get("spec")
    try:
        amounts = k.resource_list(spec.get(field) if isinstance(spec, Mapping) else None)
    except (QuantityError, TypeError, ValueError):
        return {}
    return _quantities(amounts)


def _quantities(amounts: Amounts) -> dict[str, str]:
    return {res: format_milli(v, resource=res) for res, v in sorted(amounts.items())}
