"""The ``simulate`` table: what happened to every workload, and why, for people.

One row per workload (state, ClusterQueue, flavors, preemptions, the reason a pending
one waits), then one row per eviction (who preempted whom, under which policy), then
the cohort tree (each Cohort, ClusterQueue and ranked LocalQueue: admission policy,
weight, usage against quota, and the share its parent ranked it by, which is why one
team went first), then ElasticQuota groups' runtime quota when there are any, then
refused objects with the field and reason.  Rendered with rich; plain text when stdout
is not a terminal.

Everything that comes from input (names, reasons, messages quoting a bad value) goes into
cells as :class:`rich.text.Text`, never as a markup string: ``queueName: "[/oops]"`` is a
name to show, not a tag to parse, and ``[a-z0-9]`` in a message must survive.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kueued.simulate import QueueReport, Report

_POLICY = {
    "InClusterQueue": "withinClusterQueue",
    "InCohortReclamation": "reclaimWithinCohort",
    "InCohortReclaimWhileBorrowing": "borrowWithinCohort",
    "InCohortFairSharing": "fair sharing",
}


def render(report: Report, console: Console | None = None) -> None:
    console = console or Console(width=160)
    wl = Table(title="Workloads", show_lines=False)
    for col in ("workload", "state", "cluster queue", "flavors", "preempted", "why"):
        wl.add_column(col, overflow="fold")
    for key, r in report.workloads.items():
        flavors = "; ".join(f"{ps}: " + ", ".join(f"{res}={fl}" for res, fl in m.items())
                            for ps, m in (r.flavors or {}).items())
        style = "green" if r.state == "admitted" else "yellow"
        wl.add_row(Text(key), Text(r.state, style=style), Text(r.cluster_queue or ""), Text(flavors),
                   str(r.preemptions or ""), Text(r.reason or ""))
    console.print(wl)
    if report.evictions:
        ev = Table(title="Evictions")
        for col in ("victim", "preempted by", "policy", "reason"):
            ev.add_column(col)
        for e in report.evictions:
            ev.add_row(Text(e["workload"]), Text(e["by"]), Text(_POLICY.get(e["reason"], e["reason"])),
                       Text(e["reason"]))
        console.print(ev)
    if report.queues:
        console.print(_queues(report))
    if report.quota_groups:
        qg = Table(title="Elastic quota groups")
        for col in ("group", "request", "runtime"):
            qg.add_column(col)
        for name, g in report.quota_groups.items():
            qg.add_row(Text(name), Text(_fmt(g.get("request", {}))), Text(_fmt(g.get("runtime", {}))))
        console.print(qg)
    if report.rejected:
        rj = Table(title="Rejected objects")
        rj.add_column("object")
        rj.add_column("field: reason", overflow="fold")
        for key, why in report.rejected.items():
            rj.add_row(Text(key), Text(why))
        console.print(rj)
    states = Counter(r.state for r in report.workloads.values())
    finished = f"{states['finished']} finished, " if states["finished"] else ""
    console.print(f"{states['admitted']} admitted, {states['pending']} pending, {finished}"
                  f"{len(report.evictions)} evictions, {len(report.rejected)} rejected, "
                  f"quiescent after {report.cycles} cycles")


def _fmt(amounts: dict[str, str]) -> str:
    return ", ".join(f"{r}={v}" for r, v in amounts.items())


_INFINITE = 2**63 - 1


def _queues(report: Report) -> Table:
    qt = Table(title="Queues (shares per mille)")
    for col in ("queue", "policy", "weight", "usage / quota (whole subtree)", "share", "ranked by"):
        qt.add_column(col, overflow="fold")
    for key, q in report.queues.items():
        name = "  " * q.depth + key.split("/", 1)[1]
        policy = q.policy or ""
        if policy and q.share_basis == "fairSharing":
            policy += " (ignored: fair sharing)"
        share = "" if q.share is None else "inf" if q.share == _INFINITE else str(q.share)
        if q.share is None and q.share_basis == "capacity":
            share = "no guarantee"
        qt.add_row(Text.assemble(name, " ", (q.kind, "dim")), Text(policy), Text(q.weight or ""), Text(_held(q)),
                   share, q.share_basis or "")
    return qt


def _held(q: QueueReport) -> str:
    parts = []
    for flavor in sorted({*q.usage, *q.quota}):
        used, quota = q.usage.get(flavor, {}), q.quota.get(flavor)
        amounts = ", ".join(f"{res} {used.get(res, '0')}" + (f"/{quota[res]}" if quota and res in quota else "")
                            for res in sorted({*used, *(quota or {})}))
        parts.append(f"{flavor}: {amounts}")
    return "; ".join(parts)
