"""Letting go of ClusterQueues that Kueue's finalizer holds.

Kueue puts ``kueue.x-k8s.io/resource-in-use`` on every ClusterQueue, so a queue deleted while
workloads are admitted in it stays, terminating, until they are gone; Kueue then takes the
finalizer off and the API server completes the deletion.  kueued reads the same objects (a
cluster moving from Kueue has them everywhere) and keeps the promise: while such a queue holds
admitted workloads it is inactive and its quota still counts (``kueued.world``); once nothing
is admitted in it, :func:`release_finalizers` removes the finalizer with a merge patch that
names the version kueued decided on (a 409 if the queue changed meanwhile: tried again on the
next pass, with the version the watch brings).  Without the finalizer nothing would ever
delete it.  kueued does not add the finalizer to queues that lack it: one deleted while in use
is kept terminating inside kueued instead (``World.forget_terminated``).
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from kueued.kube.errors import ApiError, ApiNotFound
from kueued.model.api import IN_USE_FINALIZER
from kueued.world import World

__all__ = ["Patcher", "release_finalizers"]

log = structlog.get_logger("kueued.kube.finalizers")


class Patcher(Protocol):
    async def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


async def release_finalizers(client: Patcher, world: World, sent: dict[str, str]) -> int:
    """Take Kueue's finalizer off every terminating ClusterQueue with nothing admitted in it;
    ``sent`` (name -> resourceVersion patched) keeps a version from being patched twice.
    Returns how many were let go."""
    released = 0
    for name in sorted(world.terminating):
        meta = (world.raw.get(f"ClusterQueue/{name}") or {}).get("metadata") or {}
        finalizers = meta.get("finalizers") or []
        version = str(meta.get("resourceVersion", ""))
        if IN_USE_FINALIZER not in finalizers or sent.get(name) == version or world.holds_admitted(name):
            continue
        body: dict[str, Any] = {"metadata": {"finalizers": [f for f in finalizers if f != IN_USE_FINALIZER]}}
        if version:
            body["metadata"]["resourceVersion"] = version
        try:
            await client.patch("ClusterQueue", None, name, body)
        except ApiNotFound:
            pass  # gone already
        except ApiError as exc:
            log.info("finalizer_release_refused", cluster_queue=name, error=type(exc).__name__, detail=str(exc))
            continue
        sent[name] = version
        released += 1
        log.info("cluster_queue_released", cluster_queue=name, finalizer=IN_USE_FINALIZER,
                 reason="no workload is admitted in it any more")
    for name in [n for n in sent if n not in world.terminating]:
        del sent[name]
    return released
