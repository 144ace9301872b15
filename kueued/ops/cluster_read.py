"""One read of a live cluster: every object kueued schedules from, as manifests, and nothing written.

The operator's commands need the cluster as it stands, not a watch: each kind of
``kueued.kube.client.KINDS`` is listed once (paged, as ``kueued run`` lists before it
watches), in the order the World needs them.  A kind the cluster does not serve (its CRD
is not installed: Koordinator's ElasticQuota on a Kueue-only cluster) or that the
operator may not list (Nodes, often) and that only elastic quota needs is left out and
said so; a Kueue kind that cannot be read is an error, since the tree would be wrong.

:func:`world_of` applies the manifests through ``World.apply`` exactly as the daemon's
initial sync does, so a Workload with ``status.admission`` counts as admitted where it
says and a Finished one counts nowhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from kueued.kube.client import KINDS, KubeClient
from kueued.kube.connect import connect
from kueued.kube.errors import ApiForbidden, ApiNotFound
from kueued.logging import warn
from kueued.model.koordinator import parents_first
from kueued.sources import KIND_ORDER
from kueued.world import World

__all__ = ["OPTIONAL_KINDS", "read_cluster", "snapshot", "world_of", "ordered"]

OPTIONAL_KINDS = frozenset({"Node", "ElasticQuota"})
"""Kinds only Koordinator's elastic quota reads: a cluster without them still has a Kueue tree."""


async def read_cluster(client: KubeClient) -> list[dict[str, Any]]:
    """Every object of every kind kueued reads, managedFields dropped, in the World's order."""
    out: list[dict[str, Any]] = []
    for kind in KINDS.values():
        try:
            items, _ = await client.list(kind)
        except ApiNotFound:
            continue  # not served: no such CRD, hence no such objects
        except ApiForbidden as exc:
            if kind.kind not in OPTIONAL_KINDS:
                raise
            warn(f"cannot list {kind.plural}: left out ({exc.message or exc.reason})", event="cluster_kind_skipped",
                 kind=kind.kind)
            continue
        for item in items:
            meta = item.get("metadata")
            if isinstance(meta, dict):
                meta.pop("managedFields", None)
        out.extend(items)
    return ordered(out)


def snapshot(kubeconfig: Path | None = None, *, context: str | None = None,
             insecure_skip_tls_verify: bool = False) -> list[dict[str, Any]]:
    """Connect (as ``kueued run`` does: the file, ``$KUBECONFIG``, ``~/.kube/config``, in-cluster) and read once."""
    async def main() -> list[dict[str, Any]]:
        client = await connect(kubeconfig, context=context, insecure_skip_tls_verify=insecure_skip_tls_verify)
        async with client:
            return await read_cluster(client)
    return anyio.run(main)


def ordered(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stable, by kind in dependency order (a Workload after its LocalQueue, and so on), the
    ElasticQuotas among themselves in the order they were made, parents first, as the daemon's first
    list takes them (listed by name, a child came before its parent and was refused)."""
    def rank(m: dict[str, Any]) -> int:
        kind = m.get("kind")
        return KIND_ORDER.get(kind, 9) if isinstance(kind, str) else 9
    out = sorted(manifests, key=rank)
    slots = [i for i, m in enumerate(out) if m.get("kind") == "ElasticQuota"]
    for i, quota in zip(slots, parents_first([out[i] for i in slots]), strict=True):
        out[i] = dict(quota)
    return out


def world_of(manifests: list[dict[str, Any]]) -> World:
    """The World the daemon's first list makes of ``manifests``, applied in :func:`ordered`'s order
    (parents first: a refused ElasticQuota would find nothing new on a retry, unlike the daemon's)."""
    world = World()
    for m in ordered(manifests):
        world.apply(m)
    world.take_observed()  # no scheduler runs here: the Workloads hold quota where their status says
    return world
