"""Where objects come from in a cluster: list-then-watch every kind kueued reads.

:class:`ClusterSource` gives the daemon the same two events as
:class:`~kueued.sources.ManifestDirectory` (``("apply", manifest)``, ``("delete",
manifest)``; manifests are plain dicts with apiVersion and kind), so the coordinator
cannot tell a cluster from a directory.  Data flows like this::

    per kind, one task:  list ──► cache ──► watch from the list's resourceVersion ──┐
                          ▲                                                         │
                          └── 410 Gone: list again, diff against the cache ◄────────┘
    every task ──► one queue ──► initial_sync() once, then drain() / next_batch() / events()

It is a :class:`kueued.sources.Source` too (``initial()``, ``changes(wait)``), so
``run_daemon`` takes it as it takes a directory, once :meth:`~ClusterSource.run` runs
beside it in the caller's task group (``initial()`` waits for the sync).

- **Initial sync.** ``await tg.start(source.run)`` returns once every kind has listed;
  :meth:`~ClusterSource.initial_sync` hands over those lists as applies, in dependency
  order (Namespaces and Nodes, flavors and priority classes, Cohorts and ElasticQuotas,
  ClusterQueues, LocalQueues, Workloads; ``kueued.sources.KIND_ORDER``).  A kind that is
  not served (its CRD is not installed: 404) counts as listed and empty, and is listed
  again with backoff until it appears.
- **Afterwards** events queue in arrival order: one kind's events in the order the
  server sent them, kinds interleaved as they come (two watches have no common order;
  the World copes with a Workload whose queue is not there yet, as it must with any
  cluster).  The queue is unbounded: a slow consumer costs memory, never a watch.
- **Resuming.** Each watch asks for bookmarks and resumes from the last resourceVersion
  seen (an event's or a bookmark's).  A stream the server ends (its ``timeoutSeconds``)
  resumes at once; one that stays silent for ``dead_after`` seconds (no event, no
  bookmark) is cut and resumed.  By default that is the stream's own ``timeoutSeconds``
  plus a grace: an apiserver sends a bookmark only once its watch cache has moved past
  the watcher's resourceVersion (about every minute on a busy cluster, perhaps never on
  an idle one), so only a stream the server failed to end in time is known dead.
- **Ungranted.** A kind kueued may not list (403) holds the initial sync back, logged
  at every attempt: scheduling on a partial view of the cluster would be wrong.
  Errors back off (capped, full jitter, at least the server's Retry-After); the backoff
  resets once a stream has delivered something or lived ``healthy_after`` seconds.
- **410 Gone** (the resourceVersion was compacted away) lists again: objects whose
  resourceVersion changed are applied, objects that vanished meanwhile are deleted
  (with the last manifest seen), unchanged ones are not repeated.
- **No duplicates.** resourceVersions are etcd revisions, increasing across one kind's
  events: an event at or below the highest one already delivered for its kind is a
  replay (a watch resumed from an older version) and is dropped.  An opaque (non-numeric)
  resourceVersion falls back to comparing with the object's last one.

:meth:`~ClusterSource.resource_version` says which version of an object was seen last,
so the coordinator can recognise the echo of its own write.  Plain per-kind counters
for metrics: ``watches`` (requests opened), ``restarts`` (watches re-opened for any
reason but the server's timeout), ``relists`` (lists after the first), ``bookmarks``,
``replays`` (events dropped as delivered before), and ``last_event_at`` (on the
injected clock).  Logs are facts
(``watch_restarted kind=Workload reason=dead``, ``watch_relisted kind=Workload
reason=gone``), never contents.  The client port and one kind's state (where to resume, what
was delivered) are :mod:`kueued.kube.watch_state`'s.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from kueued.kube.backoff import Backoff
from kueued.kube.client import KINDS, Kind, manifest_kind
from kueued.kube.errors import ApiError, ApiGone, ApiNotFound, ApiUnavailable
from kueued.kube.watch_state import Change, Follow, WatchClient, numeric, resource_version_of
from kueued.manifests import Problem
from kueued.model.api import object_key
from kueued.sources import KIND_ORDER

__all__ = ["ClusterSource"]

log = structlog.get_logger("kueued.kube.watch")

DEAD_GRACE_S = 30.0
"""How long past its timeoutSeconds a silent watch is given before it is taken for dead."""


class _DeadStream(Exception):
    """No event and no bookmark for ``dead_after`` seconds."""


class ClusterSource:
    """List-then-watch every kind in ``kinds`` (all of ``KINDS`` by default); see the module docstring."""

    def __init__(self, client: WatchClient, *, kinds: Iterable[Kind | str] = KINDS.values(),
                 watch_timeout: int = 240, dead_after: float | None = None, healthy_after: float = 10.0,
                 backoff: Backoff | None = None, sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 clock: Callable[[], float] = time.monotonic, keep_managed_fields: bool = False,
                 name: str = "") -> None:
        self._client = client
        self.name: str = name or getattr(client, "server", "") or "cluster"
        self._follows = {k.kind: Follow(k) for k in map(manifest_kind, kinds)}
        self.watch_timeout = watch_timeout
        self.dead_after = dead_after
        self.healthy_after = healthy_after
        self.backoff = backoff or Backoff()
        self._sleep = sleep
        self._clock = clock
        self._keep_managed_fields = keep_managed_fields
        self._spread = random.Random()
        self._queue: deque[Change] = deque()
        self._wakeup = anyio.Event()
        self._synced = anyio.Event()
        self._initial: dict[str, list[dict[str, Any]]] | None = {}
        self._closed = False
        self.watches: dict[str, int] = dict.fromkeys(self._follows, 0)
        self.restarts: dict[str, int] = dict.fromkeys(self._follows, 0)
        self.relists: dict[str, int] = dict.fromkeys(self._follows, 0)
        self.bookmarks: dict[str, int] = dict.fromkeys(self._follows, 0)
        self.replays: dict[str, int] = dict.fromkeys(self._follows, 0)
        self.last_event_at: dict[str, float | None] = dict.fromkeys(self._follows)

    # -- what the daemon uses ---------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow every kind until cancelled; ``started()`` once every kind has listed."""
        try:
            async with anyio.create_task_group() as tg:
                for name, follow in self._follows.items():
                    tg.start_soon(self._follow, follow, name=f"watch {name}")
                await self._synced.wait()
                log.info("initial_sync_done", kinds=len(self._follows),
                         objects=sum(len(f.objects) for f in self._follows.values()))
                task_status.started()
        finally:
            self._closed = True
            self._wakeup.set()

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def initial_sync(self) -> list[Change]:
        """Every object listed at start, as applies in dependency order, once every kind has listed.

        Handed over once: a second call returns nothing (those objects are the World's now).
        """
        await self._synced.wait()
        initial, self._initial = self._initial or {}, None
        position = {name: i for i, name in enumerate(self._follows)}
        kinds = sorted(initial, key=lambda name: (KIND_ORDER.get(name, 9), position[name]))
        return [("apply", manifest) for name in kinds for manifest in initial[name]]

    # -- the daemon's Source protocol (kueued.sources.Source) ---------------------------------

    async def initial(self) -> list[Change]:
        """:meth:`initial_sync`, under the name the daemon's Source protocol uses."""
        return await self.initial_sync()

    async def changes(self, wait: float) -> list[Change]:
        """What arrived since the last call, after waiting up to ``wait`` seconds for something."""
        if wait > 0:
            with anyio.move_on_after(wait):
                return await self.next_batch()
        return self.drain()

    def problem_changes(self) -> tuple[list[Problem], list[str]]:
        """A cluster has no unreadable files: what cannot be read is logged by the watches."""
        return [], []

    def queued(self) -> int:
        return len(self._queue)

    def drain(self) -> list[Change]:
        """Everything queued now, without waiting."""
        batch = list(self._queue)
        self._queue.clear()
        return batch

    async def next_batch(self) -> list[Change]:
        """Wait for at least one change, then take everything queued; empty once :meth:`run` has ended."""
        while not self._queue and not self._closed:
            self._wakeup = anyio.Event()
            await self._wakeup.wait()
        return self.drain()

    async def events(self) -> AsyncIterator[Change]:
        """The changes one at a time, until :meth:`run` ends."""
        while batch := await self.next_batch():
            for change in batch:
                yield change

    def resource_version(self, key: str) -> str | None:
        """The resourceVersion of the version of ``key`` (``Kind/ns/name``) seen last; None if unknown."""
        follow = self._follows.get(key.split("/", 1)[0])
        seen = follow.objects.get(key) if follow is not None else None
        return seen[0] if seen is not None else None

    def interrupt(self, kind: Kind | str, *, resume_from: str | None = None) -> None:
        """Cut ``kind``'s watch connection, as a network failure would; it resumes by itself.

        ``resume_from`` makes the next watch start from that (older) resourceVersion, as a
        client that lost its place would: tests use it to check replays are dropped and a
        compacted version leads to a list.
        """
        follow = self._follows[manifest_kind(kind).kind]
        follow.resume_from = resume_from
        follow.cut = True  # a watch still connecting ends as soon as it is open
        if follow.stream is not None:
            follow.stream.close()

    # -- one kind ---------------------------------------------------------------------------

    async def _follow(self, follow: Follow) -> None:
        name = follow.kind.kind
        relist_reason = "start"
        while True:
            opened = self._clock()
            follow.progressed = False  # only a watch that delivers counts: list, 410, list... backs off
            retry_after: float | None = None
            message = ""
            try:
                if not follow.resource_version:
                    await self._relist(follow, relist_reason)
                await self._watch(follow)
                reason = "ended"
            except _DeadStream:
                reason = "dead"
            except ApiGone as exc:
                follow.resource_version = ""
                reason, relist_reason, message = "gone", "gone", exc.message
            except ApiNotFound as exc:
                reason, message = "not_found", exc.message
                follow.resource_version = ""
                relist_reason = "appeared"
                if not follow.synced:  # the kind is not served (no CRD): empty for now
                    log.warning("watch_kind_missing", kind=name, message=exc.message)
                    self._mark_synced(follow, [])
            except ApiError as exc:
                reason, message = exc.reason, exc.message
                if isinstance(exc, ApiUnavailable):
                    retry_after = exc.retry_after
            # The server ends an idle watch after its timeout: that long is healthy even when shorter.
            healthy = follow.progressed or self._clock() - opened >= min(self.healthy_after, self.watch_timeout)
            follow.attempts = 0 if healthy else follow.attempts + 1
            if reason == "ended" and healthy:
                log.debug("watch_resumed", kind=name, resource_version=follow.resource_version)
                continue
            self.restarts[name] += 1
            # A first 410 lists again at once; a second in a row, with nothing delivered between, waits.
            wait = follow.attempts > 0 and not (reason == "gone" and follow.attempts == 1)
            delay = self.backoff.delay(follow.attempts - 1, retry_after) if wait or retry_after else 0.0
            log_at = log.info if reason in ("dead", "gone") or follow.attempts <= 1 else log.warning
            log_at("watch_restarted", kind=name, reason=reason, message=message, attempt=follow.attempts,
                   delay=round(delay, 3), resource_version=follow.resource_version)
            if delay > 0:
                await self._sleep(delay)

    async def _relist(self, follow: Follow, reason: str) -> None:
        items, resource_version = await self._client.list(follow.kind)
        fresh: dict[str, tuple[str, dict[str, Any]]] = {}
        changes: list[Change] = []
        for manifest in items:
            self._prepare(manifest, follow.kind)
            key = object_key(manifest)
            rv = resource_version_of(manifest)
            fresh[key] = (rv, manifest)
            seen = follow.objects.get(key)
            if seen is None or seen[0] != rv:
                changes.append(("apply", manifest))
        changes += [("delete", manifest) for key, (_, manifest) in follow.objects.items() if key not in fresh]
        follow.objects = fresh
        follow.resource_version = resource_version
        follow.high_water = numeric(resource_version)
        if not follow.synced:
            self._mark_synced(follow, [m for _, m in changes])
            return
        self.relists[follow.kind.kind] += 1
        log.info("watch_relisted", kind=follow.kind.kind, reason=reason, objects=len(fresh),
                 applies=sum(verb == "apply" for verb, _ in changes),
                 deletes=sum(verb == "delete" for verb, _ in changes))
        self._push(changes)

    async def _watch(self, follow: Follow) -> None:
        """One watch request, until the server ends it."""
        if follow.resume_from is not None:
            follow.resource_version, follow.resume_from = follow.resume_from, None
        follow.cut = False
        self.watches[follow.kind.kind] += 1
        # Spread over [t, 1.5t) as client-go does, so watches that started together do not end together.
        timeout = self.watch_timeout + int(self._spread.random() * self.watch_timeout / 2)
        silence_limit = self.dead_after if self.dead_after is not None else timeout + DEAD_GRACE_S
        # The socket's own read timeout is a backstop; the silence is measured here first.
        async with self._client.watch(follow.kind, follow.resource_version, timeout_seconds=timeout,
                                      read_timeout=silence_limit + 5.0) as stream:
            follow.stream = stream
            try:
                if follow.cut:  # interrupted while connecting
                    raise ApiUnavailable(None, "ConnectionClosed", "interrupted")
                events = aiter(stream)
                while True:
                    with anyio.move_on_after(silence_limit) as silence:
                        event = await anext(events, None)
                    if silence.cancelled_caught:
                        raise _DeadStream
                    if event is None:
                        return
                    self._deliver(follow, event)
            finally:
                follow.stream = None

    def _deliver(self, follow: Follow, event: dict[str, Any]) -> None:
        name = follow.kind.kind
        follow.progressed = True
        self.last_event_at[name] = self._clock()
        obj = event["object"]
        rv = resource_version_of(obj)
        if event.get("type") == "BOOKMARK":
            self.bookmarks[name] += 1
            follow.advance(rv)
            return
        self._prepare(obj, follow.kind)
        key = object_key(obj)
        number = numeric(rv)
        if number is not None and follow.high_water is not None:
            replay = number <= follow.high_water
        else:
            replay = key in follow.objects and follow.objects[key][0] == rv
        if replay:  # delivered before (a watch resumed from an older version)
            self.replays[name] += 1
            return
        follow.advance(rv)
        if event.get("type") == "DELETED":
            if follow.objects.pop(key, None) is not None:
                self._push([("delete", obj)])
            return
        follow.objects[key] = (rv, obj)
        self._push([("apply", obj)])

    # -- plumbing -----------------------------------------------------------------------------

    def _prepare(self, manifest: dict[str, Any], kind: Kind) -> None:
        """A complete manifest (the client fills apiVersion and kind in; a fake may not), trimmed."""
        manifest.setdefault("apiVersion", kind.api_version)
        manifest.setdefault("kind", kind.kind)
        # managedFields are often the largest part of an object and kueued never reads them.
        meta = manifest.get("metadata")
        if not self._keep_managed_fields and isinstance(meta, dict):
            meta.pop("managedFields", None)

    def _mark_synced(self, follow: Follow, manifests: list[dict[str, Any]]) -> None:
        follow.synced = True
        assert self._initial is not None, "handed over only once every kind has synced"
        self._initial[follow.kind.kind] = manifests
        if all(f.synced for f in self._follows.values()):
            self._synced.set()

    def _push(self, changes: list[Change]) -> None:
        if changes:
            self._queue.extend(changes)
            self._wakeup.set()

