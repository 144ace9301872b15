"""``kueued explain NS/WORKLOAD``: where a Workload was admitted, or why it waits and what would admit it.

An admitted Workload: its ClusterQueue, the flavor each resource of each pod set got, and
what it holds.  A pending one: the reason the engine gave (from files: ``simulate``'s
reason; from a cluster: the ``QuotaReserved`` condition message the daemon wrote), and,
worked out again on the quota tree as it stands (:func:`kueued.ops.tree.settle`), per
flavor its ClusterQueue may use, the node that blocks each resource with its numbers
(:func:`kueued.scheduling.explain.blocking_node`, the walk a borrow request makes) and
what it would take: how much more quota, at which node.

What it would take.  The walk charges the request up the tree; at the first node where
usage + charge passes what the node may hold, the shortfall is ``usage + charge -
allowed``.  Raising that node's nominalQuota (or its borrowingLimit, where it has one) by
the shortfall lets it through, and lifts the quota of every node above by as much, so
the walk goes on with that credit and finds what else must grow.  A lendingLimit on the
way keeps a raise below it from reaching further up (its members' quota stays theirs),
so the credit stops there.  The numbers assume this Workload is the next to be admitted;
others queued before it may take the room first.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.drains import held_back
from kueued.errors import KueuedError
from kueued.model.quantity import format_milli
from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.cycle import namespace_refused
from kueued.scheduling.explain import blocking_node
from kueued.scheduling.flavors import flavor_mismatch
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadSpec
from kueued.world import World

__all__ = ["Blocked", "Option", "Explanation", "explain_workload", "render_text"]


class Blocked(msgspec.Struct, omit_defaults=True, rename="camel"):
    """One node of the tree refusing one resource in one flavor (quantities as strings)."""

    kind: str          # Cohort | ClusterQueue
    node: str
    flavor: str
    resource: str
    used: str
    requested: str     # the charge that reaches this node
    allowed: str       # its subtree quota (+ borrowingLimit below a parent)
    more: str          # the shortfall: used + requested - allowed
    nominal: str       # its own nominalQuota now
    borrowing_limit: str | None = None
    borrowing_limit_suffices: bool = False  # raising the borrowingLimit instead would do: the nodes above have room

    def sentence(self) -> str:
        kind = "cohort" if self.kind == "Cohort" else "ClusterQueue"
        return (f"{kind} {self.node}: {self.resource} in flavor {self.flavor} would reach {self.used} + "
                f"{self.requested}, above {self.allowed}")

    def remedy(self) -> str:
        kind = "Cohort" if self.kind == "Cohort" else "ClusterQueue"
        to = _plus(self.nominal, self.more, self.resource)
        text = f"{self.more} more {self.resource} in flavor {self.flavor} at {kind} {self.node}: its nominalQuota " \
               f"{self.nominal} -> {to}"
        if self.borrowing_limit is not None and self.borrowing_limit_suffices:
            text += f", or its borrowingLimit {self.borrowing_limit} -> " \
                    f"{_plus(self.borrowing_limit, self.more, self.resource)}"
        elif self.kind == "Cohort":
            text += ", or as much more nominalQuota in a member without a lendingLimit"
        return text


class Option(msgspec.Struct, rename="camel"):
    """One flavor the Workload could be admitted in, and every raise that would take."""

    flavor: str
    raises: list[Blocked]


class Explanation(msgspec.Struct, omit_defaults=True, rename="camel"):
    workload: str
    state: str                                       # admitted | pending | rejected
    cluster_queue: str | None = None                 # where it is admitted, or routed to
    elastic_quota: str | None = None                 # or the ElasticQuota group a Koordinator pod joins
    flavors: dict[str, dict[str, str]] | None = None  # pod set -> resource -> flavor
    usage: dict[str, dict[str, str]] | None = None    # flavor -> resource -> quantity held
    reason: str | None = None                         # the engine's (or the daemon's) words
    blocked: list[Blocked] = []                       # the first node refusing, per flavor and resource
    options: list[Option] = []                        # what would admit it, cheapest first
    fits_now: bool = False                            # pending, yet the tree has room for it now


def explain_workload(world: World, snapshot: Snapshot, key: str, *, reason: str | None = None,
                     state: str | None = None) -> Explanation:
    """``key`` is ``namespace/name``; ``reason`` and ``state``: the engine's verdict and the state it left
    the Workload in, if there is one (files; an ElasticQuota group's admissions are not the World's)."""
    wl = world.workloads.get(key)
    if wl is None:
        refused = world.rejected.get(f"Workload/{key}")
        if refused is not None:
            return Explanation(key, "rejected", reason=refused)
        raise KueuedError(f"no Workload {key} (or it has finished)")
    placed = world.placed.get(key)
    group = world.elastic_quota_of(key)
    if group is not None:  # a Koordinator pod: no flavors, no ClusterQueue
        if placed is None and state != "admitted":
            return Explanation(key, "pending", elastic_quota=group, reason=reason or _condition_message(world, key))
        amounts = {res: v for (_, res), v in placed.usage.items()} if placed is not None else wl.total_requests()
        return Explanation(key, "admitted", elastic_quota=group, reason=reason, usage={
            "": {res: format_milli(v, resource=res) for res, v in sorted(amounts.items())}})
    if placed is not None:
        usage: dict[str, dict[str, str]] = {}
        for (flavor, res), v in sorted(placed.usage.items()):
            usage.setdefault(flavor, {})[res] = format_milli(v, resource=res)
        return Explanation(key, "admitted", cluster_queue=placed.cluster_queue, flavors=placed.flavors,
                           usage=usage, reason=reason)
    routed, why = world.route(wl)
    out = Explanation(key, "pending", cluster_queue=routed, reason=reason or _condition_message(world, key))
    cq = snapshot.cluster_queues.get(routed or "")
    if cq is None:
        out.reason = out.reason or why or f"ClusterQueue {routed} doesn't exist"
        return out
    if not cq.active:
        out.reason = out.reason or cq.inactive_reason
        return out
    held = held_back(world, wl) or namespace_refused(world.namespaces, cq, wl.namespace)
    if held:  # waits for something no quota changes: no numbers, no "room now"
        out.reason = held if out.reason is None else out.reason
        return out
    requests = wl.total_requests()
    uncovered = sorted(r for r in requests if r not in cq.group_of)
    if uncovered:
        out.reason = out.reason or f"ClusterQueue {cq.name} has no quota for {', '.join(uncovered)}"
        return out
    barred = _barred(world, wl, {f for g in cq.groups for f in g.flavors})
    out.options, out.fits_now = options(cq, requests, barred=barred)
    if barred and not out.options and not out.fits_now:
        out.reason = out.reason or "; ".join(sorted(set(barred.values())))
    first: dict[tuple[str, str], Blocked] = {}
    for opt in out.options:
        for b in opt.raises:
            first.setdefault((b.flavor, b.resource), b)
    out.blocked = list(first.values())
    return out


def options(cq: ClusterQueueSnapshot, requests: dict[str, int], *,
            barred: dict[str, str] | None = None) -> tuple[list[Option], bool]:
    """Per flavor of each resource group asked of, what must grow (cheapest first), and whether
    every group has a flavor with room now.  ``barred``: flavors the pods may not go to (a taint,
    node labels), which no quota opens."""
    barred = barred or {}
    by_flavor: dict[str, list[Blocked]] = {}
    groups = {}
    for res, value in sorted(requests.items()):
        group = cq.group_of[res]
        groups[id(group)] = group
        for flavor in group.flavors:
            if flavor not in barred:
                by_flavor.setdefault(flavor, []).extend(_needs(cq.node, (flavor, res), value))
    found = [Option(f, raises) for f, raises in by_flavor.items()]
    found.sort(key=lambda o: (len(o.raises), sum(_milli(b) for b in o.raises)))
    fits = all(any(f in by_flavor and not by_flavor[f] for f in g.flavors) for g in groups.values())
    return [o for o in found if o.raises], fits


def _barred(world: World, wl: WorkloadSpec, used: set[str]) -> dict[str, str]:
    """Flavor -> why some pod set of ``wl`` may not go there (Kueue's words), for the flavors of ``used``
    (its ClusterQueue's) that exist."""
    out: dict[str, str] = {}
    for name in sorted(used):
        flavor = world.flavors.get(name)
        if flavor is None:
            continue
        why = next((w for ps in wl.pod_sets if (w := flavor_mismatch(flavor, ps.spec))), "")
        if why:
            out[name] = why
    return out


def _needs(leaf: QuotaNode, fr: FR, value: int) -> list[Blocked]:
    """Every node on the path that must grow for ``value`` more of ``fr`` to fit (module notes)."""
    out: list[Blocked] = []
    node: QuotaNode | None = leaf
    charge, credit = value, 0
    res = fr[1]
    while node is not None and charge > 0:
        used = node.usage.get(fr, 0)
        limit = qn.allowed(node, fr, has_parent=node.parent is not None)
        if limit is not None and used + charge > limit + credit:
            more = used + charge - limit - credit
            lim = node.limit(fr)
            bl = lim.borrowing_limit if node.parent is not None else None
            up = qn.parent_share(node, fr, used + charge) - qn.parent_share(node, fr, used)
            out.append(Blocked("Cohort" if node.is_cohort else "ClusterQueue", node.name, fr[0], res,
                               _q(used, res), _q(charge, res), _q(limit + credit, res), _q(more, res),
                               _q(lim.nominal, res), None if bl is None else _q(bl, res),
                               bl is not None and _room_above(node, fr, up)))
            credit += more
        if node.limit(fr).lending_limit is not None:
            credit = 0
        charge = qn.parent_share(node, fr, used + charge) - qn.parent_share(node, fr, used)
        node = node.parent
    return out


def _room_above(node: QuotaNode, fr: FR, charge: int) -> bool:
    """Whether ``charge`` more, arriving at ``node``'s parent, fits every node above as they are."""
    return node.parent is None or blocking_node(node.parent, fr, charge) is None


def _condition_message(world: World, key: str) -> str | None:
    """The daemon's words on a live Workload: its QuotaReserved=False (Pending) condition."""
    status = (world.raw.get(f"Workload/{key}") or {}).get("status")
    conditions: Any = status.get("conditions") if isinstance(status, dict) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, dict) and c.get("type") == "QuotaReserved" and c.get("status") == "False":
            return str(c.get("message") or "") or None
    return None


def render_text(e: Explanation) -> str:
    """The explanation for people, a few lines."""
    if e.elastic_quota is not None:
        held = (e.usage or {}).get("", {})
        lines = [f"{e.workload} is {e.state} in ElasticQuota {e.elastic_quota}"]
        if held:
            lines.append("  holds " + ", ".join(f"{res} {v}" for res, v in held.items()))
        if e.reason and e.state != "admitted":
            lines.append(f"  why: {e.reason}")
        return "\n".join(lines) + "\n"
    if e.state == "admitted":
        lines = [f"{e.workload} is admitted in ClusterQueue {e.cluster_queue}"]
        for ps, m in (e.flavors or {}).items():
            lines.append(f"  pod set {ps}: " + ", ".join(f"{res} in flavor {fl}" for res, fl in m.items()))
        for flavor, m in (e.usage or {}).items():
            lines.append(f"  holds in {flavor}: " + ", ".join(f"{res} {v}" for res, v in m.items()))
        return "\n".join(lines) + "\n"
    if e.state == "rejected":
        return f"{e.workload} was refused: {e.reason}\n"
    where = f" for ClusterQueue {e.cluster_queue}" if e.cluster_queue else ""
    lines = [f"{e.workload} is pending{where}"]
    if e.reason:
        lines.append(f"  why: {e.reason}")
    for b in e.blocked:
        lines.append(f"  blocked at {b.sentence()}")
    if e.fits_now:
        lines.append("  the tree has room for it now: the next scheduling round should admit it, unless "
                     "Workloads ahead of it take the room first")
    elif e.options:
        lines.append("  what would admit it (one flavor per resource group):")
        for opt in e.options:
            lines.append(f"    flavor {opt.flavor}: " + "; and ".join(b.remedy() for b in opt.raises))
    return "\n".join(lines) + "\n"


def _q(amount: int, resource: str) -> str:
    return format_milli(amount, resource=resource)


def _milli(b: Blocked) -> int:
    from kueued.model.quantity import parse
    return parse(b.more)


def _plus(a: str, b: str, resource: str) -> str:
    from kueued.model.quantity import parse
    return format_milli(parse(a) + parse(b), resource=resource)
