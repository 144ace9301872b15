"""The status of the quota tree, as Kueue writes it: ClusterQueues, LocalQueues, Cohorts.

Kueue's controllers keep each queue's status in step with its cache, so ``kubectl get
cq``, kueuectl and dashboards show counts, usage and why a queue is inactive:
``clusterqueue_controller.go`` from ``Cache.Usage`` (``getUsage``: every flavor of every
resource group in spec order, its covered resources sorted by name, ``borrowed`` only for
a queue with a parent), the LocalQueue controller from ``Cache.LocalQueueUsage`` and
``Active`` from its ClusterQueue, the Cohort controller from ``CohortStats`` (only its
fair share).  :func:`tree_status` computes the same from kueued's state and is pure: the
World (objects, settings), a Snapshot of the balances (``Coordinator.assemble()``: each
ClusterQueue's admitted set and usage, each Cohort's usage) and, under admission fair
sharing, each LocalQueue's consumed usage go in; the status each object should have comes
out, as :class:`Desired` (plain JSON fields in Kueue's v1beta2 shapes, which
:mod:`kueued.kube.shapes` also holds as Structs for the CRDs, plus conditions).
The
publisher (:mod:`kueued.kube.status_publisher`) decides what of it to write, and when.

What kueued counts.  A workload is *pending* in the ClusterQueue its LocalQueue routes
to (``World.route``; one routed to an ElasticQuota counts nowhere), *reserving* and
*admitted* in the one holding its admission: kueued has no admission checks, so the two
counts, and ``flavorsReservation`` and ``flavorsUsage``, are the same.  A LocalQueue
counts the workloads of its own ClusterQueue only (Kueue keeps them in that queue's cache); a
stopped LocalQueue's pending workloads count nowhere (Kueue's queue manager drops them from the
ClusterQueue while the LocalQueue is stopped, and its reconciler reports 0).

The Active condition.  True with reason ``Ready`` ("Can admit new workloads"); else
False with Kueue's reason for the first cause and every cause in the message, Kueue's
way ("Can't admit new workloads: is stopped, references missing ResourceFlavor(s): a,b."; a
terminating queue says only "Can't admit new workloads; clusterQueue is terminating"):
``Stopped``, ``FlavorNotFound``, ``AdmissionCheckNotFound`` (kueued runs no admission checks,
so a queue that names any cannot admit: Kueue's state when the checks do not exist); a Cohort
cycle and a tree deeper than kueued allows have no Kueue reason (Kueue has no cycle state on a
queue, nor a depth limit), so kueued names them ``CohortCycle`` and ``CohortTooDeep``, with the sentence its logs use.
A LocalQueue is Active unless stopped (``Stopped``), its ClusterQueue is missing
(``ClusterQueueDoesNotExist``) or inactive (``ClusterQueueIsInactive``), Kueue's words.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from kueued.kube.port import Condition
from kueued.model import api
from kueued.model.limits import MAX_TREE_DEPTH
from kueued.model.quantity import format_milli
from kueued.quota.node import FR
from kueued.quota.tree import Edges, cycle_words
from kueued.scheduling.fairsharing.share import Shares
from kueued.scheduling.forest import edges_of
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import holdings_by_local_queue
from kueued.world import World

__all__ = ["Desired", "tree_status", "ACTIVE", "STATUS_KINDS", "local_queue_holdings", "local_queue_active", "covered",
           "flavor_usage"]

ACTIVE = "Active"
STATUS_KINDS = frozenset({"ClusterQueue", "LocalQueue", "Cohort", "Workload"})
"""Kinds whose CRD has a status kueued may write conditions to (ResourceFlavor and
WorkloadPriorityClass have none in Kueue's CRDs, so kueued's carry no status schema)."""

ConsumedUsage = Mapping[str, Mapping[str, float]]  # LocalQueue "ns/name" -> resource -> amount in units


class Desired(msgspec.Struct, frozen=True):
    """What one object's status should say: ``fields`` are written as they are (a None value
    deletes the field), ``conditions`` are merged by type into the object's own."""

    kind: str
    namespace: str
    name: str
    fields: dict[str, Any]
    conditions: tuple[Condition, ...] = ()
    generation: int | None = None  # the spec the conditions judged (observedGeneration)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


def tree_status(world: World, snapshot: Snapshot, *, consumed: ConsumedUsage | None = None,
                consumed_at: str = "") -> dict[str, Desired]:
    """The status of every ClusterQueue, LocalQueue and (explicit) Cohort, keyed ``Kind/[ns/]name``.

    ``consumed`` (admission fair sharing's decayed usage per LocalQueue, sampled at
    ``consumed_at``, RFC 3339) adds ``fairSharing.admissionFairSharingStatus``; None
    leaves that field alone.
    """
    cq_pending: dict[str, int] = {}
    lq_pending: dict[str, int] = {}
    for wl in world.workloads.values():
        if not world.queued(wl):  # admitted, deactivated, a Koordinator pod, or its LocalQueue stopped
            continue
        routed, _ = world.route(wl)
        lq_pending[wl.local_queue] = lq_pending.get(wl.local_queue, 0) + 1
        if routed is not None:
            cq_pending[routed] = cq_pending.get(routed, 0) + 1
    shares = Shares(snapshot) if world.settings.fair_sharing else None
    holdings = local_queue_holdings(snapshot)
    edges = edges_of(world.cluster_queues, world.cohorts)
    out: dict[str, Desired] = {}
    for name, obj in world.cluster_queues.items():
        cq = snapshot.cluster_queues.get(name)
        if cq is not None:
            d = _cluster_queue(world, cq, obj, pending=cq_pending.get(name, 0), shares=shares, edges=edges)
            out[d.key] = d
    for key, lq in world.local_queues.items():
        d = _local_queue(world, snapshot, lq, pending=lq_pending.get(key, 0), holdings=holdings,
                         consumed=None if consumed is None else consumed.get(key, {}), consumed_at=consumed_at)
        out[d.key] = d
    for name in world.cohorts:
        co = snapshot.cohorts.get(name)
        if co is None:
            continue
        share = {"weightedShare": shares.of(co.node).rounded()} if shares is not None else None
        d = Desired("Cohort", "", name, {"fairSharing": share}, generation=_generation(world, f"Cohort/{name}"))
        out[d.key] = d
    return out


def _generation(world: World, key: str) -> int | None:
    meta = (world.raw.get(key) or {}).get("metadata")
    gen = meta.get("generation") if isinstance(meta, dict) else None
    return gen if isinstance(gen, int) else None


# --- ClusterQueue -------------------------------------------------------------------------------

def _cluster_queue(world: World, cq: ClusterQueueSnapshot, obj: api.ClusterQueue, *, pending: int,
                   shares: Shares | None, edges: Edges) -> Desired:
    usage = flavor_usage(cq.spec.resource_groups, cq.node.usage,
                         nominal={fr: lim.nominal for fr, lim in cq.node.limits.items()},
                         borrowing=cq.node.parent is not None)
    admitted = len(cq.workloads)
    fields: dict[str, Any] = {
        "pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted,
        "flavorsReservation": usage, "flavorsUsage": usage,
        "fairSharing": {"weightedShare": shares.of(cq.node).rounded()} if shares is not None else None,
    }
    return Desired("ClusterQueue", "", cq.name, fields, (active_condition(world, cq, obj, edges),),
                   _generation(world, f"ClusterQueue/{cq.name}"))


def _flavors(groups: list[api.ResourceGroup]) -> Iterator[tuple[str, list[str]]]:
    """Kueue's ``getUsage`` order: each flavor of each group in spec order (the first group naming
    it), with that group's covered resources sorted."""
    seen: set[str] = set()
    for rg in groups:
        resources = sorted(set(rg.covered_resources))
        for fq in rg.flavors:
            if fq.name not in seen:
                seen.add(fq.name)
                yield fq.name, resources


def covered(groups: list[api.ResourceGroup]) -> list[FR]:
    """Every (flavor, resource) a queue's resource groups cover, in :func:`flavor_usage`'s order."""
    return [(flavor, res) for flavor, resources in _flavors(groups) for res in resources]


def flavor_usage(groups: list[api.ResourceGroup], usage: Mapping[FR, int], *,
                 nominal: Mapping[FR, int] | None = None, borrowing: bool = False) -> list[dict[str, Any]]:
    """Kueue's ``getUsage``: each flavor of each group in spec order, its covered resources sorted;
    with ``nominal`` (a ClusterQueue) each resource also says what it ``borrowed``, which is
    what it uses over its nominal quota when it has a parent to borrow from, else 0."""
    out: list[dict[str, Any]] = []
    for flavor, resources in _flavors(groups):
        listed = []
        for res in resources:
            used = usage.get((flavor, res), 0)
            entry: dict[str, Any] = {"name": res, "total": format_milli(used, resource=res)}
            if nominal is not None:
                over = used - nominal.get((flavor, res), 0) if borrowing else 0
                entry["borrowed"] = format_milli(max(0, over), resource=res)
            listed.append(entry)
        out.append({"name": flavor, "resources": listed})
    return out


def active_condition(world: World, cq: ClusterQueueSnapshot, obj: api.ClusterQueue, edges: Edges) -> Condition:
    """The ClusterQueue's ``Active`` condition (module notes); ``edges``: the World's cohort tree."""
    if obj.metadata.deletion_timestamp:  # a status of its own in Kueue's cache, whatever else holds
        return Condition(ACTIVE, "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    causes: list[tuple[str, str]] = []
    if obj.spec.stop_policy not in ("", "None"):
        causes.append(("Stopped", "is stopped"))
    missing = list(dict.fromkeys(f.name for rg in obj.spec.resource_groups for f in rg.flavors
                                 if f.name not in world.flavors))
    if missing:
        causes.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {','.join(missing)}"))
    checks = obj.spec.admission_check_names()
    if checks:  # kueued runs no admission checks: to it, every one is missing
        causes.append(("AdmissionCheckNotFound", f"references missing AdmissionCheck(s): {','.join(checks)}"))
    if edges.cq_cut_off(cq.name):
        cohort = obj.spec.cohort_name
        if cohort in edges.cyclic:
            causes.append(("CohortCycle", f"cohort {cohort} {cycle_words(edges.cohort_parent, cohort)}"))
        else:
            causes.append(("CohortTooDeep", f"cohort {cohort} is at level {edges.too_deep[cohort]} of its tree; "
                                             f"kueued allows at most {MAX_TREE_DEPTH} levels"))
    if cq.active and not causes:
        return Condition(ACTIVE, "True", "Ready", "Can admit new workloads")
    if not causes:  # inactive for a reason kueued's forest knows and this list does not
        prefix = f"ClusterQueue {cq.name} is inactive: "
        text = cq.inactive_reason.removeprefix(prefix)
        return Condition(ACTIVE, "False", "Unknown", f"Can't admit new workloads: {text}." if text
                         else "Can't admit new workloads.")
    return Condition(ACTIVE, "False", causes[0][0],
                     f"Can't admit new workloads: {', '.join(text for _, text in causes)}."[:32768])


# --- LocalQueue ---------------------------------------------------------------------------------

def local_queue_holdings(snapshot: Snapshot) -> dict[tuple[str, str], tuple[int, dict[FR, int]]]:
    """(LocalQueue ``ns/name``, ClusterQueue) -> how many workloads the LocalQueue has admitted in
    that ClusterQueue and their usage (milli-units), in one pass over every admitted workload
    (the snapshot must hold them: ``Coordinator.assemble()``).  A LocalQueue counts only those
    in its own ClusterQueue (module notes), which its caller picks."""
    return {(lq, cq_name): held for cq_name, cq in snapshot.cluster_queues.items()
            for lq, held in holdings_by_local_queue(cq.workloads.values()).items()}


def local_queue_active(world: World, snapshot: Snapshot, lq: api.LocalQueue) -> Condition:
    """The LocalQueue's ``Active`` condition (module notes)."""
    cq_name = lq.spec.cluster_queue
    cq = snapshot.cluster_queues.get(cq_name)
    if lq.spec.stop_policy not in ("", "None"):
        return Condition(ACTIVE, "False", "Stopped", "LocalQueue is stopped")
    if cq_name not in world.cluster_queues or cq is None:
        return Condition(ACTIVE, "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    if not cq.active:
        return Condition(ACTIVE, "False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
    return Condition(ACTIVE, "True", "Ready", "Can submit new workloads to localQueue")


def _local_queue(world: World, snapshot: Snapshot, lq: api.LocalQueue, *, pending: int,
                 holdings: Mapping[tuple[str, str], tuple[int, dict[FR, int]]],
                 consumed: Mapping[str, float] | None, consumed_at: str) -> Desired:
    key = f"{lq.metadata.namespace}/{lq.metadata.name}"
    cq = snapshot.cluster_queues.get(lq.spec.cluster_queue)
    held, usage = holdings.get((key, lq.spec.cluster_queue)) or (0, {})
    flavors = flavor_usage(cq.spec.resource_groups, usage) if cq is not None else []
    fields: dict[str, Any] = {"pendingWorkloads": pending, "reservingWorkloads": held, "admittedWorkloads": held,
                              "flavorsReservation": flavors, "flavorsUsage": flavors}
    if consumed is not None:
        fields["fairSharing"] = {"weightedShare": 0, "admissionFairSharingStatus": {
            "consumedResources": {r: format_milli(round(v * 1000), resource=r) for r, v in sorted(consumed.items())},
            "lastUpdate": consumed_at}}
    return Desired("LocalQueue", lq.metadata.namespace, lq.metadata.name, fields,
                   (local_queue_active(world, snapshot, lq),), _generation(world, f"LocalQueue/{key}"))
