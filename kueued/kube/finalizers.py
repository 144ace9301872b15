"""Kueue's finalizer on ClusterQueues: put on every queue, taken off once a deleted one is unused.

Kueue puts ``kueue.x-k8s.io/resource-in-use`` on every ClusterQueue (its mutating webhook), so a
queue deleted while workloads are admitted in it stays, terminating, until they are gone; Kueue
then takes the finalizer off and the API server completes the deletion.  kueued reads the same
objects (a cluster moving from Kueue has them everywhere) and keeps the promise both ways:

* :func:`hold_finalizers` adds the finalizer to a ClusterQueue that lacks it, as soon as kueued
  sees it (there is no webhook in front of kueued, so a queue deleted before that is not held).
  Without it the queue would vanish from the API server while its workloads still run: kueued
  keeps it terminating in memory (``World.forget_terminated``), but a restart would find the
  queue gone and its workloads' quota charged nowhere, free to be lent again.
* while a held queue has admitted workloads it is inactive and its quota still counts
  (``kueued.world``); once nothing is admitted in it, :func:`release_finalizers` removes the
  finalizer with a merge patch that names the version kueued decided on (a 409 if the queue
  changed meanwhile: tried again on the next pass, with the version the watch brings).  Without
  that nothing would ever delete it.

Both patches carry the whole finalizer list and the resourceVersion it was read at, so another
controller's finalizer added meanwhile is never dropped (the API server refuses the stale write).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from kueued.kube.errors import ApiConflict, ApiError, ApiNotFound
from kueued.model.api import IN_USE_FINALIZER
from kueued.world import World

__all__ = ["Holds", "Patcher", "hold_finalizers", "release_finalizers", "HOLDS_PER_PASS", "HOLD_EVERY"]

HOLDS_PER_PASS = 50
"""Finalizers added per publish at most: a first start on a cluster of a thousand queues Kueue
never ran on adds them over a few seconds instead of in one burst."""

HOLD_EVERY = 1.0
"""Seconds between two looks for queues without the finalizer: a look reads every ClusterQueue
(about 1 ms for a thousand), and the status publisher runs after every pass of a busy daemon."""

log = structlog.get_logger("kueued.kube.finalizers")


class Patcher(Protocol):
    async def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


async def release_finalizers(client: Patcher, world: World, sent: dict[str, str]) -> int:
    """Take Kueue's finalizer off every terminating ClusterQueue with nothing admitted in it;
    ``sent`` (name -> resourceVersion patched) keeps a version from being patched twice.
    Returns how many were let go."""
    released = 0
    for name in sorted(world.terminating):
        meta, finalizers, version = _metadata(world, name)
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


async def hold_finalizers(client: Patcher, world: World, sent: dict[str, str]) -> int:
    """Put Kueue's finalizer on ClusterQueues that lack it (not on one being deleted); ``sent``
    (name -> resourceVersion patched) keeps a version from being patched twice.  Returns how many
    were patched (at most :data:`HOLDS_PER_PASS`)."""
    held = 0
    for name in world.cluster_queues:
        if held >= HOLDS_PER_PASS:
            break
        meta, finalizers, version = _metadata(world, name)
        if (not version or meta.get("deletionTimestamp") or name in world.terminating
                or IN_USE_FINALIZER in finalizers or sent.get(name) == version):
            continue  # no version: not from the API server (a file), nothing to patch
        body = {"metadata": {"finalizers": [*finalizers, IN_USE_FINALIZER], "resourceVersion": version}}
        sent[name] = version
        try:
            await client.patch("ClusterQueue", None, name, body)
        except ApiNotFound:
            continue  # deleted meanwhile
        except ApiError as exc:
            log.info("finalizer_add_refused", cluster_queue=name, error=type(exc).__name__, detail=str(exc))
            if not isinstance(exc, ApiConflict):
                del sent[name]  # tried again next pass (a conflict: on the version the watch brings)
            continue
        held += 1
        log.info("cluster_queue_held", cluster_queue=name, finalizer=IN_USE_FINALIZER)
    for name in [n for n in sent if n not in world.cluster_queues]:
        del sent[name]
    return held


class Holds:
    """:func:`hold_finalizers` at most once every :data:`HOLD_EVERY` seconds of ``clock``, with the
    versions already patched."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.sent: dict[str, str] = {}  # ClusterQueue -> the version kueued put the finalizer on
        self._last = -math.inf

    async def hold(self, client: Patcher, world: World) -> int:
        now = self.clock()
        if now - self._last < HOLD_EVERY:
            return 0
        self._last = now
        return await hold_finalizers(client, world, self.sent)


def _metadata(world: World, name: str) -> tuple[dict[str, Any], list[str], str]:
    """A ClusterQueue's metadata as last seen, its finalizers and its resourceVersion ("" from a file)."""
    meta = (world.raw.get(f"ClusterQueue/{name}") or {}).get("metadata") or {}
    return meta, list(meta.get("finalizers") or []), str(meta.get("resourceVersion", ""))
