"""Kueue's finalizer: put on ClusterQueues and ResourceFlavors, off deleted ones (and Workloads) once unused.

Kueue puts ``kueue.x-k8s.io/resource-in-use`` on every ClusterQueue and ResourceFlavor (its
webhooks, and its controllers as a fallback), so a queue deleted while workloads are admitted in
it stays, terminating, until they are gone, and a flavor deleted while a ClusterQueue names it
stays until none does; Kueue then takes the finalizer off and the API server completes the
deletion.  kueued reads the same objects (a cluster moving from Kueue has them everywhere) and
keeps the promise both ways:

* :func:`hold_finalizers` adds the finalizer to a ClusterQueue or ResourceFlavor that lacks it,
  once kueued sees it (there is no webhook in front of kueued, so one deleted before that is not
  held).  Without it a queue would vanish from the API server while its workloads still run:
  kueued keeps it terminating in memory (``World.forget_terminated``), but a restart would find
  the queue gone and its workloads' quota charged nowhere, free to be lent again.  A flavor
  would vanish from under the queues that name it, which turn inactive (``FlavorNotFound``).
* while a held queue has admitted workloads it is inactive and its quota still counts
  (``kueued.world``); a held flavor stays usable, as in Kueue's cache.  Once nothing is
  admitted in the queue, or no ClusterQueue names the flavor (terminating queues included),
  :func:`release_finalizers` removes the finalizer.  Without that nothing would ever delete it.
* Kueue's job integration puts the same finalizer on every Workload it creates, and takes it off
  a deleted one once its Job is done with it (Kueue's workload controller lets a Workload no Job
  owns go at once).  kueued's Job integration puts it on the Workloads it makes too (and takes it off
  once finished), and a cluster moved from Kueue has it on many: :func:`release_finalizers` takes it
  off a deleted Workload that has no owner or holds no quota.  One a Job owns, while admitted, is
  the Job integration's (``kueued.kube.jobs``): it stops the Job, then takes the finalizer off, as
  Kueue's reconciler does (until then its pods may run and its quota still counts); it also takes
  it off before deleting a Workload itself.
  The publisher hands the keeper every applied version (:meth:`FinalizerKeeper.observe`), so it
  knows which Workloads are being deleted without looking at all of them.

Both patches are JSON Patches that first ``test`` the finalizer list they were worked out on, so
another controller's finalizer added or removed meanwhile is never lost: the API server refuses
the patch (a 422), and it is worked out again on the version the watch brings.  They test that
list only, not the resourceVersion: kueued's own status writes move the version several times a
second under load, and a version-conditional patch is refused (409) whenever one lands between
the read and the patch.  (That was not what kept holds slow under load, measured: 54 of 1,000
ClusterQueues held in a minute of Kueue's large-scale run either way; passes that waited for a
publish were, see :data:`HOLDS_AT_LEAST`.)  Another refusal is tried
again on the next pass; a version already patched is never patched twice.

Who runs them: :class:`FinalizerKeeper`, a task of its own beside the status publisher.  Each
publish only pokes it; a pass runs at most once per ``min_interval``, its patches a few at a
time.  Holds spend from the status writes' budget, half of what is left and never less than a
trickle, so a first start on a thousand bare queues neither bursts nor starves the status writes.
Nothing waits for it: a patch stuck for a request timeout (an API server that stopped answering)
holds back later finalizer patches, never a status write or an admission.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from kueued.kube.errors import ApiConflict, ApiError, ApiForbidden, ApiInvalid, ApiNotFound
from kueued.model.api import IN_USE_FINALIZER, object_key
from kueued.world import World

__all__ = ["HELD_KINDS", "PATCHED_KINDS", "HOLDS_PER_PASS", "Patcher", "Budget", "FinalizerKeeper", "hold_finalizers",
           "release_finalizers"]

HOLDS_PER_PASS = 50
"""Finalizers added per pass at most (a pass runs at most once a second)."""

HELD_KINDS = ("ClusterQueue", "ResourceFlavor")
"""The kinds kueued puts Kueue's finalizer on."""

PATCHED_KINDS = (*HELD_KINDS, "Workload")
"""The kinds this module patches: a Workload's finalizer (Kueue's job integration puts it on every
Workload it creates) is only ever taken off."""

HOLDS_AT_LEAST = 5
"""Finalizers added per pass even when the status writes have spent the whole budget: under a
storm of status writes the holds still go out, a few a second (a pass that used its whole
allowance asks for the next at once, without waiting for a publish to poke it)."""

PATCHES_AT_ONCE = 4
"""Finalizer patches in flight at most."""

log = structlog.get_logger("kueued.kube.finalizers")


class Patcher(Protocol):
    async def patch_json(self, kind: str, namespace: str | None, name: str,
                         operations: list[dict[str, Any]]) -> dict[str, Any]: ...


class Budget(Protocol):
    """The status writes' token bucket (``kueued.kube.status_publisher.WriteBudget``)."""

    def available(self) -> int: ...
    def spend(self, n: int) -> None: ...


Due = tuple[str, str, str, list[dict[str, Any]]]
"""A patch to make: kind, name (``namespace/name`` for a Workload), the resourceVersion it was
decided on, the JSON Patch operations."""


_FINAL = (ApiConflict, ApiForbidden, ApiInvalid)
"""Refusals that the same patch of the same version would meet again."""

_FIELDS = {"ClusterQueue": "cluster_queue", "ResourceFlavor": "resource_flavor", "Workload": "workload"}
"""The log field that names an object of each kind."""
_WHY = {"ClusterQueue": "nothing is admitted in it any more", "ResourceFlavor": "no ClusterQueue names it any more",
        "Workload": "deleted, and it holds no quota or has no owner"}


def _meta(world: World, kind: str, name: str) -> tuple[dict[str, Any], list[str], str]:
    meta = (world.raw.get(f"{kind}/{name}") or {}).get("metadata") or {}
    return meta, list(meta.get("finalizers") or []), str(meta.get("resourceVersion", ""))


def _flavors_in_use(world: World) -> set[str]:
    """Every ResourceFlavor a ClusterQueue names, terminating ones included (Kueue's
    ``ClusterQueuesUsingFlavor``: a queue stays in its cache until the API server deletes it)."""
    return {f.name for cq in world.cluster_queues.values() for rg in cq.spec.resource_groups for f in rg.flavors}


def _releases_due(world: World, sent: dict[str, str], deleting: Iterable[str] = ()) -> Iterator[Due]:
    """Terminating ClusterQueues with nothing admitted in them; the deleted Workloads of ``deleting``
    (object keys) that hold no quota or have no owner (Kueue's workload controller lets a bare one
    go at once; one a Job owns, while admitted, is let go by the Job integration once it has
    stopped the Job); deleted ResourceFlavors no ClusterQueue names."""
    going = [("ClusterQueue", name) for name in sorted(world.terminating)]
    for key in sorted(deleting):
        name = key.split("/", 1)[1]
        if not (name in world.placed and _meta(world, "Workload", name)[0].get("ownerReferences")):
            going.append(("Workload", name))
    deleted = [name for name in sorted(world.flavors)
               if _meta(world, "ResourceFlavor", name)[0].get("deletionTimestamp")]
    if deleted:
        in_use = _flavors_in_use(world)
        going += [("ResourceFlavor", name) for name in deleted if name not in in_use]
    for kind, name in going:
        _, finalizers, version = _meta(world, kind, name)
        if (IN_USE_FINALIZER not in finalizers or sent.get(f"{kind}/{name}") == version
                or (kind == "ClusterQueue" and world.holds_admitted(name))):
            continue
        yield kind, name, version, _set_finalizers(finalizers, [f for f in finalizers if f != IN_USE_FINALIZER])


def _holds_due(world: World, sent: dict[str, str]) -> Iterator[Due]:
    names: tuple[Iterable[str], ...] = (world.cluster_queues, world.flavors)
    for kind, named in zip(HELD_KINDS, names, strict=True):
        for name in named:
            meta, finalizers, version = _meta(world, kind, name)
            if (not version or meta.get("deletionTimestamp") or (kind == "ClusterQueue" and name in world.terminating)
                    or IN_USE_FINALIZER in finalizers or sent.get(f"{kind}/{name}") == version):
                continue  # no version: not from the API server (a file), nothing to patch
            yield kind, name, version, _set_finalizers(finalizers, [*finalizers, IN_USE_FINALIZER])


def _set_finalizers(read: list[str], wanted: list[str]) -> list[dict[str, Any]]:
    """The JSON Patch from the finalizer list as read to ``wanted``, refused unless the list is still
    as read (a ``null`` test matches a missing list on kube-apiserver, as evanphx/json-patch does)."""
    path = "/metadata/finalizers"
    return [{"op": "test", "path": path, "value": read or None}, {"op": "add", "path": path, "value": wanted}]


async def _patch_all(client: Patcher, due: list[Due], sent: dict[str, str], what: str) -> int:
    """Patch each due object, :data:`PATCHES_AT_ONCE` at a time; how many succeeded.  ``sent``
    (object key -> version) records a version as it is sent; a refusal worth retrying takes it
    back (tried again next pass); a 422 (the list changed, or finalizers may not be added to an
    object being deleted), a 403 (kueued's role lacks the grant) or a conflict waits for the next
    version the watch brings, so none is logged once a second."""
    done = [0]
    limiter = anyio.CapacityLimiter(PATCHES_AT_ONCE)

    async def one(kind: str, name: str, version: str, operations: list[dict[str, Any]]) -> None:
        key, field = f"{kind}/{name}", _FIELDS[kind]
        namespace, _, short = name.rpartition("/")
        async with limiter:
            try:
                await client.patch_json(kind, namespace or None, short, operations)
            except ApiNotFound:
                return  # gone meanwhile
            except ApiError as exc:
                log.info(f"finalizer_{what}_refused", kind=kind, **{field: name}, error=type(exc).__name__,
                         detail=str(exc))
                if not isinstance(exc, _FINAL) and sent.get(key) == version:
                    del sent[key]
                return
        done[0] += 1
        if what == "add":
            log.info(f"{field}_held", **{field: name}, finalizer=IN_USE_FINALIZER)
        else:
            log.info(f"{field}_released", **{field: name}, finalizer=IN_USE_FINALIZER, reason=_WHY[kind])

    async with anyio.create_task_group() as tg:
        for kind, name, version, operations in due:
            sent[f"{kind}/{name}"] = version
            tg.start_soon(one, kind, name, version, operations)
    return done[0]


def _forget_gone(world: World, sent: dict[str, str], *, terminating: bool) -> None:
    for key in list(sent):
        kind, _, name = key.partition("/")
        meta = _meta(world, kind, name)[0]
        if not meta or (terminating and not meta.get("deletionTimestamp") and name not in world.terminating):
            del sent[key]


async def release_finalizers(client: Patcher, world: World, sent: dict[str, str], *,
                             deleting: Iterable[str] = ()) -> int:
    """Take Kueue's finalizer off every terminating ClusterQueue with nothing admitted in it, every
    deleted ResourceFlavor no ClusterQueue names and the deleted Workloads of ``deleting`` that may
    go (:func:`_releases_due`); ``sent`` (object key -> resourceVersion patched) keeps a version
    from being patched twice.  Returns how many were let go."""
    released = await _patch_all(client, list(_releases_due(world, sent, deleting)), sent, "release")
    _forget_gone(world, sent, terminating=True)
    return released


async def hold_finalizers(client: Patcher, world: World, sent: dict[str, str], *, limit: int = HOLDS_PER_PASS) -> int:
    """Put Kueue's finalizer on ClusterQueues and ResourceFlavors that lack it (not on one being
    deleted), at most ``limit``; ``sent`` (object key -> resourceVersion patched) keeps a version
    from being patched twice.  Returns how many were patched."""
    held = await _patch_all(client, list(itertools.islice(_holds_due(world, sent), limit)), sent, "add")
    _forget_gone(world, sent, terminating=False)
    return held


class FinalizerKeeper:
    """Runs :func:`hold_finalizers` and :func:`release_finalizers` in a task of its own (module
    notes): :meth:`poke` asks for a pass, :meth:`run` makes them, at most once per ``min_interval``."""

    def __init__(self, client: Patcher, *, budget: Budget | None = None, min_interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.budget = budget
        self.min_interval = min_interval
        self.clock = clock
        self.held: dict[str, str] = {}      # ClusterQueue -> the version kueued put the finalizer on
        self.released: dict[str, str] = {}  # terminating ClusterQueue -> the version it was taken off
        self.deleting: set[str] = set()    # Workloads deleted while Kueue's finalizer holds them
        self._world: World | None = None
        self._wake = anyio.Event()
        self._allowed = HOLDS_PER_PASS  # the last pass's allowance of holds

    def observe(self, manifest: Mapping[str, Any]) -> None:
        """A version of an object was applied: a deleted Workload that Kueue's finalizer holds is
        looked at by the next passes, until it goes."""
        if manifest.get("kind") != "Workload":
            return
        meta = manifest.get("metadata") or {}
        held = bool(meta.get("deletionTimestamp")) and IN_USE_FINALIZER in (meta.get("finalizers") or ())
        if not held and not self.deleting:
            return  # the usual Workload event: nothing to work out
        key = object_key(dict(manifest))
        if held:
            self.deleting.add(key)
        else:
            self.deleting.discard(key)

    def forget(self, key: str) -> None:
        self.deleting.discard(key)

    def poke(self, world: World) -> None:
        self._world = world
        self._wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            started = self.clock()
            if self._world is not None:
                held, _ = await self.keep(self._world)
                if held and held >= self._allowed:  # more may be due: the next pass comes anyway
                    self._wake.set()
            await anyio.sleep(max(0.0, self.min_interval - (self.clock() - started)))

    async def keep(self, world: World) -> tuple[int, int]:
        """One pass: (finalizers added, finalizers taken off).  Holds spend from the budget."""
        allowed = HOLDS_PER_PASS
        if self.budget is not None:  # half of what is there, and a trickle when nothing is (never starved)
            allowed = max(HOLDS_AT_LEAST, min(HOLDS_PER_PASS, self.budget.available() // 2))
        self._allowed = allowed
        counts = [0, 0]

        async def hold() -> None:
            counts[0] = await hold_finalizers(self.client, world, self.held, limit=allowed)
            if self.budget is not None:
                self.budget.spend(counts[0])

        async def release() -> None:
            counts[1] = await release_finalizers(self.client, world, self.released, deleting=self.deleting)

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            tg.start_soon(release)
        return counts[0], counts[1]
