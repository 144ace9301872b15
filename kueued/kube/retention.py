"""Kueue's object retention for Workloads (KEP-1618, Configuration ``objectRetentionPolicies.workloads``).

Kueue keeps every Workload until someone deletes it; with a retention policy it deletes them:

- ``afterFinished``: a Workload whose ``Finished`` condition turned on that long ago is deleted
  (Kueue's workload controller; a Normal Event ``Deleted``, "Deleted finished workload due to
  elapsed retention");
- ``afterDeactivatedByKueue``: the Job behind a Workload that Kueue deactivated (``spec.active``
  false and evicted with a ``DeactivatedDueTo...`` reason, e.g. a maximum execution time run
  out, ``actors.deadlines``) that long ago is deleted, its dependents in the background (Kueue's
  job reconciler; Event ``Deleted``, "Deleted job: deactivation retention period expired").  A
  Workload deactivated by a user, or one no Job owns, is left alone, as in Kueue.

A zero duration deletes at once; no policy keeps everything (the default).  :class:`Retention`
runs as a task of its own beside the daemon, leader-only through the fenced client it writes
with, and reads the policies from the World's settings on every sweep, so a Configuration
applied or reloaded takes effect at the next one.  It sweeps what the World last saw
(``World.raw``), at the earliest due time or every ``every`` seconds; a refused deletion (the
object changed, gone already, a follower) is tried again at the next sweep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import structlog

from kueued.kube.client import JOB, KINDS, Kind
from kueued.kube.errors import ApiError, ApiNotFound
from kueued.kube.workload_state import condition, condition_true, deactivation_cause, owner_uid, transitioned_at

if TYPE_CHECKING:
    from kueued.world import World

__all__ = ["Retention", "due_deletions"]

log = structlog.get_logger("kueued.retention")


class DeleteClient(Protocol):
    async def delete(self, kind: Kind | str, namespace: str | None, name: str, *,
                     propagation: str | None = None) -> None: ...


class EventSink(Protocol):
    def record(self, obj_ref: Mapping[str, Any], type: str, reason: str, message: str) -> bool: ...


FINISHED = "Deleted finished workload due to elapsed retention"
DEACTIVATED = "Deleted job: deactivation retention period expired"


def due_deletions(world: World, now: float) -> tuple[list[tuple[str, dict[str, Any], str]], float | None]:
    """What the policies delete by ``now``: (kind, the object to delete, the Event's message), and
    when the next one falls due (None: nothing waits)."""
    after_finished = world.settings.retain_finished
    after_deactivated = world.settings.retain_deactivated
    due: list[tuple[str, dict[str, Any], str]] = []
    soonest: float | None = None
    if after_finished is None and after_deactivated is None:
        return due, None
    for key, manifest in list(world.raw.items()):
        if not key.startswith("Workload/"):
            continue
        deletion = _deletion(manifest, after_finished, after_deactivated)
        if deletion is None:
            continue
        at, kind, target, message = deletion
        if at <= now:
            due.append((kind, target, message))
        else:
            soonest = at if soonest is None else min(soonest, at)
    return due, soonest


def _deletion(workload: dict[str, Any], after_finished: float | None,
              after_deactivated: float | None) -> tuple[float, str, dict[str, Any], str] | None:
    if after_finished is not None and condition_true(workload, "Finished"):
        since = transitioned_at(workload, "Finished")
        return None if since is None else (since + after_finished, "Workload", workload, FINISHED)
    evicted = condition(workload, "Evicted")
    spec = workload.get("spec")
    if (after_deactivated is None or evicted is None or evicted.get("status") != "True"
            or not isinstance(spec, dict) or spec.get("active") is not False
            or not deactivation_cause(str(evicted.get("reason", "")))[1]):
        return None
    owner = owner_uid(workload)
    since = transitioned_at(workload, "Evicted")
    if owner is None or since is None:
        return None
    meta = workload.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": owner[0], "namespace": meta.get("namespace", ""), "uid": owner[1]}}
    return since + after_deactivated, "Job", job, DEACTIVATED


class Retention:
    """Deletes what the retention policies say is due (module notes)."""

    def __init__(self, client: DeleteClient, world: World, *, events: EventSink | None = None,
                 clock: Callable[[], float] = time.time, every: float = 10.0) -> None:
        self.client = client
        self.world = world
        self.events = events
        self.clock = clock
        self.every = every
        self.deleted = 0

    async def sweep(self) -> float | None:
        """Delete what is due now; when the next deletion falls due (None: nothing waits)."""
        due, soonest = due_deletions(self.world, self.clock())
        for what, target, message in due:
            meta = target["metadata"]
            kind = JOB if what == "Job" else KINDS["Workload"]
            try:
                await self.client.delete(kind, meta["namespace"], meta["name"],
                                         propagation="Background" if kind is JOB else None)
            except ApiNotFound:
                continue  # gone already: what the policy wanted
            except ApiError as exc:
                log.warning("retention_delete_refused", object=f"{what}/{meta['namespace']}/{meta['name']}",
                            error=type(exc).__name__, detail=str(exc)[:200])
                continue
            self.deleted += 1
            log.info("retention_deleted", object=f"{what}/{meta['namespace']}/{meta['name']}", why=message)
            if self.events is not None:
                self.events.record(target, "Normal", "Deleted", message)
        return soonest

    async def run(self) -> None:
        """Sweep until cancelled: at the next due time, and at least every ``every`` seconds (a policy
        applied, or a Workload finished, since the last sweep)."""
        while True:
            soonest = await self.sweep()
            wait = self.every if soonest is None else max(0.0, min(self.every, soonest - self.clock()))
            await anyio.sleep(wait)
