"""Writing the tree's status: only what changed, at most once a second per object, never blocking.

:func:`~kueued.kube.tree_status.tree_status` says what every ClusterQueue, LocalQueue and
Cohort should show; :class:`TreeStatusPublisher` keeps the API server in step with it.
After each batch the daemon calls :meth:`~TreeStatusPublisher.publish`:

1. if anything ran since the last call (the coordinator's round counter moved, or an
   admission fair sharing sample was taken), the desired statuses are computed afresh, paced by
   what that costs (:class:`~kueued.pace.Pace`: on 1,000 ClusterQueues about 36 ms, so at most
   every second and a half while rounds keep running; a few queues' at once, and an idle daemon
   wakes when the pace allows: :meth:`~TreeStatusPublisher.put_off`); otherwise only writes held
   back earlier are looked at (nothing is asked of the actors);
2. each desired status is compared with what the object says now: what kueued last
   wrote to it (the API server's answer), else its status as last seen (``World.raw``,
   so a restart rewrites nothing that is already right).  Conditions are merged by type
   into the object's own (``merge_conditions``: ``lastTransitionTime`` kept while the
   status stays), so a count that did not move and a condition that did not flip cost
   nothing;
3. what differs is written as a JSON merge patch on the status subresource, at most
   ``concurrency`` at a time, and at most once per ``min_interval`` seconds per object:
   a change inside the interval waits for the first publish after it (the daemon calls
   ``publish`` every ``--interval`` even when idle, so it is not stranded);
4. and all of them together within a budget (:class:`WriteBudget`: ``rate`` writes a second
   on average, bursts of ``burst``).  A cluster of a few hundred queues never meets it; under
   a storm of admissions, when every ClusterQueue's and LocalQueue's counts move every round,
   it keeps these writes (which the API server pays for as much as an admission) from
   crowding out the admissions themselves.  The objects unwritten longest go first (never
   written before all), so every object is written in turn and none is starved: each object
   then shows its status at most ``objects / rate`` seconds late.

A refused write (any :class:`~kueued.kube.errors.ApiError`) is logged once per object and written again
at each publish until one succeeds, even if the status wanted is back to the last one written (an error
may hide a write that landed); an object the API server no longer has (404) is forgotten until a new one.

Validation.  No webhook refuses a bad object in front of kueued, so the World does, and
the object says so: :meth:`~TreeStatusPublisher.validated` sets condition ``Accepted``
(False, reason ``ValidationFailed``, the field errors as message; True, reason ``Valid``,
once a later version passes) on a ClusterQueue, LocalQueue, Cohort or Workload, and
records a ``ValidationFailed`` warning Event (once per refused version) on those and on a
ResourceFlavor or WorkloadPriorityClass, whose CRDs have no status to hold a condition, and on an
ElasticQuota (whose Accepted condition the elastic tree writes: ``actors.elastic.status``).
A Workload's conditions are also written by the API port (``kueued.kube.commits``), which
builds on ``World.raw``: the publisher merges into that manifest's conditions and, once
written, leaves the server's list there, so neither writer drops the other's condition.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import TaskStatus

from kueued.config import Daemon
from kueued.kube.conditions import merge_conditions
from kueued.kube.errors import ApiError, ApiNotFound
from kueued.kube.events import EventRecorder
from kueued.kube.finalizers import FinalizerKeeper
from kueued.kube.in_force import wanted
from kueued.kube.in_force_writer import InForceWriter
from kueued.kube.port import Condition
from kueued.kube.priority_sync import PrioritySync
from kueued.kube.tree_status import STATUS_KINDS, Desired, tree_status
from kueued.model.api import object_key
from kueued.model.clock import rfc3339
from kueued.pace import Pace
from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
from kueued.scheduling.snapshot import Snapshot
from kueued.world import World

__all__ = ["TreeStatusPublisher", "StatusPatcher", "Coordinated", "ACCEPTED", "VALIDATED_KINDS"]

log = structlog.get_logger("kueued.kube.status")

WRITES_PER_PUBLISH = 256
"""Status writes one publish makes at most; the rest stay due for the next pass (a thousand
ClusterQueues' statuses at once held the daemon's loop, and so its rounds, for seconds)."""

STATUS_WRITES_PER_SECOND = Daemon().status_writes_per_second
"""The status publisher's average write rate under load (module notes, 4), unless the daemon's
``[daemon] status_writes_per_second`` says otherwise.  Without it, Kueue's large-scale config through
the API server (``bench/kueue_perf_api.py --scale 0.1``) had 4,174 queue status writes in 58 s."""

STATUS_WRITE_BURST = 200
"""Writes the publisher may make at once after a quiet spell: a few hundred queues' status in one go."""

ACCEPTED = "Accepted"
VALIDATED_KINDS = frozenset({"ClusterQueue", "LocalQueue", "Cohort", "ResourceFlavor", "Workload",
                             "WorkloadPriorityClass", "ElasticQuota"})
"""The kinds whose refusals the publisher reports: a warning Event for each, an Accepted condition
for those in ``STATUS_KINDS`` (an ElasticQuota's condition is written by ``actors.elastic.status``), and
the annotation of the version in force (``kueued.io/in-force``, :mod:`kueued.kube.in_force`)."""


class StatusPatcher(Protocol):
    async def patch_status(self, kind: str, namespace: str | None, name: str,
                           body: dict[str, Any]) -> dict[str, Any]: ...

    async def patch_json(self, kind: str, namespace: str | None, name: str,
                         operations: list[dict[str, Any]]) -> dict[str, Any]: ...


class Coordinated(Protocol):
    """What the publisher reads of the coordinator (``actors.coordinator.Coordinator``)."""

    world: World
    rounds: int
    afs: AdmissionFairSharing

    async def assemble(self) -> Snapshot: ...


def _version(manifest: Mapping[str, Any] | None) -> tuple[str, str]:
    meta = (manifest or {}).get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))


def _generation(manifest: Mapping[str, Any]) -> int | None:
    meta = manifest.get("metadata")
    gen = meta.get("generation") if isinstance(meta, Mapping) else None
    return gen if isinstance(gen, int) else None


def _conditions(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    listed = status.get("conditions")
    return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []


def _status_of(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    status = manifest.get("status")
    return status if isinstance(status, Mapping) else {}


def _says_refused(manifest: Mapping[str, Any]) -> bool:
    return any(c.get("type") == ACCEPTED and c.get("status") == "False" for c in _conditions(_status_of(manifest)))


def _differs(current: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether writing ``status`` (None deletes a field) would change ``current``."""
    return any(current.get(k) != v for k, v in status.items())


def _from_key(key: str) -> Desired:
    """An object with no tree status of its own (a Workload, or one refused before it was ever accepted)."""
    kind, _, rest = key.partition("/")
    namespace, _, name = rest.rpartition("/")
    return Desired(kind, namespace, name, {})


class WriteBudget:
    """A token bucket: ``rate`` tokens a second, at most ``burst`` held (module notes, 4).  The
    rate may be a function, asked each time: the daemon's setting, which a reload changes."""

    def __init__(self, rate: float | Callable[[], float], burst: int, clock: Callable[[], float]) -> None:
        self.rate: Callable[[], float] = rate if callable(rate) else (lambda: rate)
        self.burst = burst
        self.clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def available(self) -> int:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate())
        self._at = now
        return int(self._tokens)

    def spend(self, n: int) -> None:
        self._tokens -= n


class TreeStatusPublisher:
    def __init__(self, client: StatusPatcher, *, recorder: EventRecorder | None = None, min_interval: float = 1.0,
                 concurrency: int = 16, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 rate: float | Callable[[], float] = STATUS_WRITES_PER_SECOND,
                 burst: int = STATUS_WRITE_BURST) -> None:
        self.client = client
        self.recorder = recorder
        self.min_interval = min_interval
        self.budget = WriteBudget(rate, burst, clock)
        self.concurrency = concurrency
        self.clock = clock                  # spacing of writes (monotonic seconds)
        self.wall = wall                    # condition timestamps (epoch seconds)
        self.counts: Counter[str] = Counter()  # written, failed, gone, deferred, over_budget
        self._desired: dict[str, Desired] = {}
        self._rounds: int | None = None     # the coordinator's round counter at the last computation
        self._sampled_at = ""               # and the admission fair sharing sample it showed
        self.pace = Pace(clock)             # of working the desired statuses out (module notes, 1)
        self._put_off = False               # the last publish left them unworked by its pace
        self._last: dict[str, dict[str, Any]] = {}  # key -> status the API server answered our last write with
        self._written_at: dict[str, float] = {}
        self._due: set[str] = set()         # held back (interval) or refused: looked at again next publish
        self._failing: dict[str, str] = {}  # key -> the error logged for it, until a write succeeds
        self._gone: dict[str, tuple[str, str]] = {}  # key -> (uid, resourceVersion) the API server said 404 for
        self._accepted: dict[str, tuple[Condition, int | None]] = {}  # key -> Accepted condition, its generation
        self._refused: dict[str, tuple[int | None, str]] = {}  # key -> (generation, errors) an Event was recorded for
        self._seen: dict[str, dict[str, Any]] = {}  # key -> the newest (refused) manifest: World.raw keeps the older
        self.finalizers = FinalizerKeeper(client, budget=self.budget, clock=clock)  # Kueue's, in a task of its own
        self.memory = InForceWriter()  # the version in force of a refused object, kept on it across restarts
        self.priorities = PrioritySync()  # a WorkloadPriorityClass's value in its Workloads' spec.priority

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The finalizer keeper and the recorder's writers, if there is a recorder
        (``await tg.start(publisher.run)``)."""
        async with anyio.create_task_group() as tg:
            await tg.start(self.finalizers.run)
            if self.recorder is not None:
                await tg.start(self.recorder.run)
            task_status.started()

    # --- validation ------------------------------------------------------------------------------
    def validated(self, manifest: Mapping[str, Any], reason: str | None) -> bool:
        """A Kueue object was applied: refused with ``reason`` (field errors) or accepted (None).

        Sets its Accepted condition for the next publish and records a warning Event for a
        refusal not reported before (a status write's echo re-applies a refused version:
        it is the same refusal).  Whether this was a new refusal.
        """
        self.finalizers.observe(manifest)  # a deleted Workload Kueue's finalizer holds
        kind = manifest.get("kind")
        if kind not in VALIDATED_KINDS:
            return False
        key = object_key(dict(manifest))
        generation = _generation(manifest)
        if reason is None:
            self._refused.pop(key, None)
            self._seen.pop(key, None)
            before = self._accepted.get(key)
            if kind in STATUS_KINDS and ((before is not None and before[0].status == "False")
                                         or (before is None and _says_refused(manifest))):
                self._accepted[key] = (Condition(ACCEPTED, "True", "Valid", "the current version passed validation"),
                                       generation)
                self._due.add(key)
            return False
        new = self._refused.get(key) != (generation, reason)
        self._refused[key] = (generation, reason)
        if kind in STATUS_KINDS:
            self._seen[key] = dict(manifest)
            condition = (Condition(ACCEPTED, "False", "ValidationFailed", reason), generation)
            if self._accepted.get(key) != condition:
                self._accepted[key] = condition
                self._due.add(key)
        if new and self.recorder is not None:
            self.recorder.validation_failed(manifest, reason)
        return new

    def in_force(self, manifest: Mapping[str, Any], held: Mapping[str, Any] | None, *, refused: bool) -> None:
        """``manifest`` was applied (refused or not) with ``held`` in force: keep the annotation that
        records the version in force right (:mod:`kueued.kube.in_force`), on the next publish."""
        if manifest.get("kind") in VALIDATED_KINDS:  # what kueued validates and may patch (RBAC)
            self.memory.note(manifest, wanted(manifest, held, refused=refused))

    def forget(self, key: str) -> None:
        """The object was deleted: nothing about it is kept (a new one of that name starts afresh)."""
        self._drop(key)
        self.finalizers.forget(key)
        self._gone.pop(key, None)
        self._accepted.pop(key, None)
        self._refused.pop(key, None)
        self._seen.pop(key, None)
        self._desired.pop(key, None)

    # --- publishing -----------------------------------------------------------------------------
    async def publish(self, coord: Coordinated) -> int:
        """Write what changed since the last publish (module notes); how many writes succeeded."""
        world = coord.world
        self.finalizers.poke(world)  # Kueue's finalizer on every queue, off deleted ones no longer in use
        if len(self.memory):
            await self.memory.flush(self.client)
        await self.priorities.sync(self.client, world, epoch=coord.rounds)
        tokens = self.budget.available()
        if tokens < 1:
            return 0  # nothing could be written now: not even worked out (module notes, 4)
        candidates = await self._candidates(coord)
        writes = self._writes(candidates, world, min(WRITES_PER_PUBLISH, tokens))
        if not writes:
            return 0
        self.budget.spend(len(writes))
        done = [0]
        limiter = anyio.CapacityLimiter(self.concurrency)

        async def write(key: str, desired: Desired, status: dict[str, Any]) -> None:
            async with limiter:
                if await self._write(key, desired, status, world):
                    done[0] += 1
        async with anyio.create_task_group() as tg:
            for item in writes:
                tg.start_soon(write, *item)
        return done[0]

    def put_off(self) -> float:
        """Seconds until statuses whose working out the pace put off may be worked out, inf if none
        is: how long an idle pass may wait for changes before it publishes again."""
        wait = self.pace.wait()
        return wait if self._put_off and wait > 0 else math.inf

    async def _candidates(self, coord: Coordinated) -> list[str]:
        """The objects to look at, the longest unwritten first: every object gets its turn.  After a
        round or an admission fair sharing sample (rounds or not), every object, once the pace of
        working them out allows (module notes, 1); else those put off."""
        consumed, at = self._consumed(coord)
        # a round, or an AFS sample taken since; worked out no more often than its cost allows
        moved = coord.rounds != self._rounds or at != self._sampled_at
        self._put_off = moved and not self.pace.ready()
        if moved and not self._put_off:
            with self.pace.run():
                snapshot = await coord.assemble()
                self._desired = tree_status(coord.world, snapshot, consumed=consumed, consumed_at=at)
            self._rounds, self._sampled_at = coord.rounds, at
            for key in [k for k in (*self._last, *self._gone) if k not in self._desired and k not in self._accepted]:
                self._drop(key)
                self._gone.pop(key, None)
            candidates = [*self._desired, *(k for k in self._accepted if k not in self._desired)]
        else:
            candidates = list(self._due)
        written_at = self._written_at
        candidates.sort(key=lambda k: written_at.get(k, -math.inf))
        return candidates

    def _writes(self, candidates: list[str], world: World, allowed: int) -> list[tuple[str, Desired, dict[str, Any]]]:
        """Up to ``allowed`` writes, in the candidates' order; the rest are looked at next time
        (module notes, 4)."""
        now = self.clock()
        writes: list[tuple[str, Desired, dict[str, Any]]] = []
        for i, key in enumerate(candidates):
            if len(writes) >= allowed:
                rest = candidates[i:]
                self._due.update(rest)
                self.counts["over_budget"] += len(rest)
                break
            desired = self._desired.get(key) or (_from_key(key) if key in self._accepted else None)
            manifest = self._seen.get(key) or world.raw.get(key)
            if desired is None or (manifest is None and key not in self._last):
                self._due.discard(key)
                continue
            if key in self._gone:
                if self._gone[key] == _version(manifest):
                    continue  # 404 for this very version: wait for a new one
                del self._gone[key]
            status = self._status(key, desired, world)
            if status is None:
                self._due.discard(key)
                continue
            last = self._written_at.get(key)
            if last is not None and now - last < self.min_interval:
                self._due.add(key)
                self.counts["deferred"] += 1
                continue
            writes.append((key, desired, status))
        return writes

    def _status(self, key: str, desired: Desired, world: World) -> dict[str, Any] | None:
        """The status to write for ``key``, or None when the object already says it."""
        current = self._current(key, desired.kind, world)
        status = dict(desired.fields)
        accepted = self._accepted.get(key)
        if desired.conditions or accepted is not None:
            merged = _conditions(current)
            stamp = rfc3339(self.wall())
            if desired.conditions:
                merged = merge_conditions(merged, list(desired.conditions), generation=desired.generation, now=stamp)
            if accepted is not None:
                merged = merge_conditions(merged, [accepted[0]], generation=accepted[1], now=stamp)
            status["conditions"] = merged
        return status if key in self._failing or _differs(current, status) else None  # failing: in doubt

    def _current(self, key: str, kind: str, world: World) -> Mapping[str, Any]:
        """What the object's status says now, as far as kueued knows (module notes)."""
        raw, seen = world.raw.get(key), self._seen.get(key)
        if kind == "Workload" and raw is not None:
            return _status_of(raw)  # the API port's writes and kueued's land here (module notes)
        if key in self._last:
            return self._last[key]
        manifest = seen if seen is not None else raw
        return _status_of(manifest) if manifest is not None else {}

    async def _write(self, key: str, desired: Desired, status: dict[str, Any], world: World) -> bool:
        try:
            answer = await self.client.patch_status(desired.kind, desired.namespace or None, desired.name,
                                                    {"status": status})
        except ApiNotFound:
            manifest = self._seen.get(key) or world.raw.get(key)
            self._drop(key)
            self._gone[key] = _version(manifest)
            self.counts["gone"] += 1
            log.info("status_object_gone", object=key)
            return False
        except ApiError as exc:  # it may have landed (an answer lost): what the object shows is unknown
            self._written_at[key] = self.clock()  # retried next publish, no sooner than the interval
            self._last.pop(key, None)
            self._due.add(key)
            self.counts["failed"] += 1
            error = type(exc).__name__
            if self._failing.get(key) != error:
                log.warning("status_write_failed", object=key, error=error, detail=str(exc)[:200])
                self._failing[key] = error
            return False
        written = answer.get("status") if isinstance(answer, dict) else None
        written = written if isinstance(written, dict) else status
        self._written_at[key] = self.clock()
        self._due.discard(key)
        self._failing.pop(key, None)
        self.counts["written"] += 1
        self._last[key] = written
        manifest = world.raw.get(key)
        if desired.kind == "Workload" and manifest is not None and "conditions" in written:
            # the API port builds its next write on World.raw: give it the list just written
            own = manifest.get("status")
            if not isinstance(own, dict):
                own = manifest["status"] = {}
            own["conditions"] = written["conditions"]
        return True

    def _drop(self, key: str) -> None:
        """Forget what was written to ``key`` (it left the tree, or the API server has no such object)."""
        self._last.pop(key, None)
        self._written_at.pop(key, None)
        self._failing.pop(key, None)
        self._due.discard(key)

    # --- admission fair sharing ------------------------------------------------------------------
    @staticmethod
    def _consumed(coord: Coordinated) -> tuple[dict[str, dict[str, float]] | None, str]:
        """Each LocalQueue's consumed usage (decayed, with entry penalties) and when it was sampled
        (``AdmissionFairSharing.consumed_usage``); None where no ClusterQueue uses AFS."""
        consumed = coord.afs.consumed_usage()
        if consumed is None:
            return None, ""
        return consumed[0], rfc3339(consumed[1])
