"""``kueued simulate --from-cluster [CHANGES.yaml ...]``: what a change would do to the live cluster.

The cluster's objects are read once (:mod:`.cluster_read`); the proposed changes (a new or
changed quota, a new queue, a burst of Workloads) are laid over them, a change with the
same kind, namespace and name replacing the live object; the engine runs the result to
quiescence in memory, exactly as ``kueued simulate`` runs files, and every Workload's
state after is set beside its state now.  Nothing is written to the cluster: the
snapshot is plain manifests, the run an in-memory one.

A new Workload in the changes without a ``creationTimestamp`` is stamped with the time of
the run, so it queues behind the live ones as it would if submitted now (an unstamped one
would sort first of all).  Live admitted Workloads keep their admission; the engine may
preempt them, as the daemon would, and the table says so (``evicted``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kueued.model.api import object_key
from kueued.ops.cluster_read import ordered, world_of
from kueued.ops.status import run_world
from kueued.simulate import Report, WorkloadReport
from kueued.world import World

__all__ = ["Row", "WhatIf", "what_if", "overlay", "render"]

Runner = Callable[[World], Report]


class Row(msgspec.Struct, omit_defaults=True, rename="camel"):
    workload: str
    now: str                 # admitted in CQ (flavors) | pending | absent (a new one)
    after: str
    change: str              # admitted | evicted | moved | still waiting | unchanged | new, waiting | gone
    reason: str | None = None  # why it waits after, if it does


class WhatIf(msgspec.Struct, rename="camel"):
    source: str
    rows: list[Row]
    evictions: list[dict[str, str]] = []
    rejected: dict[str, str] = {}          # objects of the changes the World refused


def overlay(live: list[dict[str, Any]], changes: list[dict[str, Any]], *,
            now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """``live`` with ``changes`` laid over it by key, in the World's kind order."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    merged = {object_key(m): m for m in live}
    for m in changes:
        meta = m.get("metadata")
        if m.get("kind") == "Workload" and isinstance(meta, dict) and not meta.get("creationTimestamp"):
            m = {**m, "metadata": {**meta, "creationTimestamp": stamp}}
        merged[object_key(m)] = m
    return ordered(list(merged.values()))


def what_if(live: list[dict[str, Any]], changes: list[dict[str, Any]], *, runner: Runner,
            source: str = "cluster", now: dt.datetime | None = None) -> WhatIf:
    before = world_of(live)
    world, report = run_world(overlay(live, changes, now=now), runner=runner)
    rows = []
    for key in sorted(before.workloads.keys() | report.workloads.keys()):
        old, held = before.workloads.get(key), before.placed.get(key)
        was = "absent" if old is None else _admitted(held.cluster_queue, held.flavors) if held is not None \
            else "pending"
        new = report.workloads.get(key)
        will = "gone" if new is None else _admitted(new.cluster_queue, new.flavors) \
            if new.state == "admitted" else new.state
        rows.append(Row(key, was, will, _change(was, will, new),
                        new.reason if new is not None and new.state == "pending" else None))
    changed = {object_key(m) for m in changes}
    rejected = {k: v for k, v in world.rejected.items() if k in changed}
    return WhatIf(source, rows, list(report.evictions), rejected)


def _admitted(cq: str | None, flavors: dict[str, dict[str, str]] | None) -> str:
    used = sorted({f for m in (flavors or {}).values() for f in m.values()})
    return f"admitted in {cq}" + (f" ({', '.join(used)})" if used else "")


def _change(was: str, will: str, new: WorkloadReport | None) -> str:
    if was == will:
        return "still waiting" if was == "pending" else "unchanged"
    if was == "absent":
        return "admitted" if will.startswith("admitted") else f"new, {'waiting' if will == 'pending' else will}"
    if will == "gone":
        return "gone"
    if was == "pending":
        return "admitted" if will.startswith("admitted") else will
    if will.startswith("admitted"):
        return "moved"
    return "evicted"


def render(result: WhatIf, console: Console | None = None) -> None:
    console = console or Console(width=160)
    table = Table(title=f"What the changes would do ({result.source}; nothing written)")
    for col in ("workload", "now", "after", "change", "why it waits after"):
        table.add_column(col, overflow="fold")
    styles = {"admitted": "green", "evicted": "red", "moved": "yellow", "still waiting": "yellow"}
    for r in result.rows:
        table.add_row(Text(r.workload), Text(r.now), Text(r.after), Text(r.change, style=styles.get(r.change, "")),
                      Text(r.reason or ""))
    console.print(table)
    if result.evictions:
        console.print(Text(f"{len(result.evictions)} eviction(s):", style="red"))
        for e in result.evictions:
            console.print(Text(f"  {e['workload']} by {e['by']} ({e['reason']})"))
    if result.rejected:
        console.print(Text(f"{len(result.rejected)} change(s) refused:", style="red"))
        for key, why in result.rejected.items():
            console.print(Text(f"  {key}: {why}"))
