"""``kueued simulate``: manifests in, decisions out, no cluster needed.

Reads conformance scenarios (a YAML mapping with ``objects``) or plain
multi-document manifests, applies every object through :class:`World` in order, runs
the engine to quiescence and reports per workload its state, ClusterQueue, flavors,
preemption count and (for a pending one) the reason; plus the refused objects and,
for ElasticQuota trees, each group's runtime quota.  The JSON shape is
``../shared/conformance/FORMAT.md``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kueued.errors import ManifestError
from kueued.model.quantity import format_milli
from kueued.scheduling.explain import explain
from kueued.scheduling.snapshot import Snapshot
from kueued.world import World

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster

__all__ = ["load_manifests", "Report", "WorkloadReport", "simulate"]


class WorkloadReport(msgspec.Struct, omit_defaults=True, rename="camel"):
    state: str
    cluster_queue: str | None = None
    flavors: dict[str, dict[str, str]] | None = None
    preemptions: int = 0
    reason: str | None = None


class Report(msgspec.Struct, rename="camel"):
    workloads: dict[str, WorkloadReport]
    rejected: dict[str, str]
    quota_groups: dict[str, dict[str, dict[str, str]]] = {}
    evictions: list[dict[str, str]] = []
    cycles: int = 0


def load_manifests(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in paths:
        try:
            docs = list(yaml.load_all(Path(path).read_text(), Loader=_LOADER))
        except (OSError, yaml.YAMLError) as exc:
            raise ManifestError(f"{path}: {exc}") from exc
        for doc in docs:
            if doc is None:
                continue
            if isinstance(doc, dict) and "objects" in doc and "kind" not in doc:
                out.extend(o for o in doc.get("objects") or [] if isinstance(o, dict))
            elif isinstance(doc, dict) and doc.get("kind") == "List":
                out.extend(doc.get("items") or [])
            elif isinstance(doc, dict):
                out.append(doc)
            else:
                raise ManifestError(f"{path}: a document is not a mapping")
    return out


Runner = Callable[[World], "Report"]


def simulate(manifests: list[dict[str, Any]], *, runner: Runner | None = None) -> Report:
    """Apply the manifests and run them to quiescence with ``runner`` (default: the pure core)."""
    world = World()
    for m in manifests:
        world.apply(m)
    if runner is None:
        from kueued.scheduling.run import run_sync
        runner = run_sync
    return runner(world)


def report_from(world: World, *, reasons: dict[str, str], unrouted: dict[str, str],
                events: list[tuple[str, str, str, str]], cycles: int, snapshot: Snapshot | None = None) -> Report:
    """The outcome of a run; with the final ``snapshot``, quota reasons name the blocking node."""
    workloads: dict[str, WorkloadReport] = {}
    for key, wl in sorted(world.workloads.items()):
        if wl.admitted:
            workloads[key] = WorkloadReport("admitted", wl.cluster_queue, wl.assigned_flavors, wl.evictions)
            continue
        why = unrouted.get(key) or reasons.get(key) or "waiting behind the head of its StrictFIFO queue"
        if snapshot is not None and key not in unrouted and "quota" in why:
            cq_name = world.route(wl)[0]
            cq = snapshot.cluster_queues.get(cq_name or "")
            detail = explain(cq, wl) if cq is not None else ""
            if detail:
                why = f"{why} ({detail})"
        workloads[key] = WorkloadReport("pending", preemptions=wl.evictions, reason=why)
    for key in world.rejected:
        if key.startswith("Workload/") and key.split("/", 1)[1] not in workloads:
            workloads[key.split("/", 1)[1]] = WorkloadReport("pending", reason="rejected: " + world.rejected[key])
    evictions = [{"workload": w, "by": by, "reason": why} for kind, w, by, why in events if kind == "evicted"]
    return Report(workloads=workloads, rejected=dict(world.rejected), evictions=evictions, cycles=cycles)


def quantity_map(amounts: dict[str, int]) -> dict[str, str]:
    return {r: format_milli(v, resource=r) for r, v in sorted(amounts.items())}
