"""ClusterSource against a scripted fake API: the sync barrier, dedup, 410 re-lists, dead streams, backoff.

The fake serves lists from a dict and hands each watch a stream the test feeds by hand,
so every path (a replayed event, a silent connection, a 404 kind, a 429) is exercised
without a server and without sleeping: the source's backoff sleep is injected and only
recorded.  The same behaviour against a real apiserver is in tests/integration/test_watch.py.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from structlog.testing import capture_logs

from kueued.kube.backoff import Backoff
from kueued.kube.client import KINDS, Kind, manifest_kind
from kueued.kube.errors import ApiError, ApiGone, ApiNotFound, ApiUnavailable
from kueued.kube.watch import ClusterSource
from kueued.kube.watch_state import Change
from kueued.model.api import object_key
from kueued.sources import Source

WAIT_S = 5.0  # an upper bound on anything the fake makes happen; never slept


def obj(kind: str, name: str, rv: int, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv), "labels": labels,
                            "managedFields": [{"manager": "kubectl"}]}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}  # as list items come: no apiVersion, no kind


class FakeStream:
    """One watch connection: the test pushes events, ends it, or fails it."""

    def __init__(self, kind: Kind, resource_version: str) -> None:
        self.kind = kind
        self.resource_version = resource_version
        self._items: deque[dict[str, Any] | BaseException | None] = deque()
        self._ready = anyio.Event()
        self.closed = False

    def send(self, type_: str, manifest: dict[str, Any]) -> None:
        manifest = {"apiVersion": self.kind.api_version, "kind": self.kind.kind, **manifest}
        self._put({"type": type_, "object": manifest})

    def bookmark(self, rv: int) -> None:
        self._put({"type": "BOOKMARK", "object": {"kind": self.kind.kind, "metadata": {"resourceVersion": str(rv)}}})

    def end(self) -> None:
        self._put(None)

    def fail(self, exc: BaseException) -> None:
        self._put(exc)

    def close(self) -> None:
        self.closed = True
        self._put(ApiUnavailable(None, "ConnectionClosed", "closed"))

    def _put(self, item: dict[str, Any] | BaseException | None) -> None:
        self._items.append(item)
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            while not self._items:
                self._ready = anyio.Event()
                await self._ready.wait()
            item = self._items.popleft()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


class FakeKube:
    """Lists from ``store``; ``list_errors``/``watch_errors`` are raised by the next calls, in order."""

    def __init__(self) -> None:
        self.store: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self.rv = 100
        self.list_errors: dict[str, deque[ApiError]] = {k: deque() for k in KINDS}
        self.watch_errors: dict[str, deque[ApiError]] = {k: deque() for k in KINDS}
        self.streams: dict[str, list[FakeStream]] = {k: [] for k in KINDS}
        self.lists: dict[str, int] = dict.fromkeys(KINDS, 0)
        self._opened = anyio.Event()

    def put(self, kind: str, manifest: dict[str, Any]) -> None:
        self.store[kind][object_key({"kind": kind, **manifest})] = manifest

    def remove(self, kind: str, manifest: dict[str, Any]) -> None:
        del self.store[kind][object_key({"kind": kind, **manifest})]

    async def list(self, kind: Kind | str, namespace: str | None = None, *,
                   page_size: int = 500) -> tuple[list[dict[str, Any]], str]:
        name = manifest_kind(kind).kind
        self.lists[name] += 1
        await anyio.lowlevel.checkpoint()
        if self.list_errors[name]:
            raise self.list_errors[name].popleft()
        return [_copy(m) for m in self.store[name].values()], str(self.rv)

    @asynccontextmanager
    async def watch(self, kind: Kind | str, resource_version: str, *, timeout_seconds: int,
                    allow_bookmarks: bool = True, read_timeout: float | None = None,
                    namespace: str | None = None) -> AsyncIterator[FakeStream]:
        k = manifest_kind(kind)
        assert allow_bookmarks and timeout_seconds > 0
        await anyio.lowlevel.checkpoint()
        if self.watch_errors[k.kind]:
            raise self.watch_errors[k.kind].popleft()
        stream = FakeStream(k, resource_version)
        self.streams[k.kind].append(stream)
        self._opened.set()
        yield stream

    async def watching(self, kind: str, count: int = 1) -> FakeStream:
        """The ``count``-th watch of ``kind``, once the source has opened it."""
        with anyio.fail_after(WAIT_S):
            while len(self.streams[kind]) < count:
                self._opened = anyio.Event()
                await self._opened.wait()
        return self.streams[kind][count - 1]


def _copy(manifest: dict[str, Any]) -> dict[str, Any]:
    return {**manifest, "metadata": dict(manifest["metadata"])}


class Sleeps:
    """The injected sleep: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.lowlevel.checkpoint()


def _source(kube: FakeKube, *, kinds: tuple[str, ...] = ("ResourceFlavor", "Workload"), sleeps: Sleeps | None = None,
            seed: int = 0, **kwargs: Any) -> ClusterSource:
    return ClusterSource(kube, kinds=kinds, sleep=sleeps or Sleeps(), clock=lambda: 0.0,
                         backoff=Backoff(rng=random.Random(seed)), **kwargs)


async def _until(source: ClusterSource, count: int) -> list[Change]:
    out: list[Change] = []
    with anyio.fail_after(WAIT_S):
        while len(out) < count:
            out += await source.next_batch()
    return out


def _names(changes: list[Change]) -> list[tuple[str, str, str]]:
    return [(verb, m["kind"], m["metadata"]["name"]) for verb, m in changes]


async def _run(source: ClusterSource, body: Callable[[], Awaitable[None]]) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(source.run)
        await body()
        tg.cancel_scope.cancel()


async def test_the_initial_sync_waits_for_every_kind_and_is_in_dependency_order() -> None:
    kube = FakeKube()
    kube.put("Workload", obj("Workload", "w", 5, "ns"))
    kube.put("LocalQueue", obj("LocalQueue", "lq", 4, "ns"))
    kube.put("ClusterQueue", obj("ClusterQueue", "cq", 3))
    kube.put("ResourceFlavor", obj("ResourceFlavor", "rf", 2))
    kube.put("Namespace", obj("Namespace", "ns", 1))
    kube.list_errors["LocalQueue"].append(ApiUnavailable(503, "ServiceUnavailable"))  # the slowest kind
    source = _source(kube, kinds=tuple(reversed(KINDS)))

    async def body() -> None:
        initial = await source.initial_sync()
        assert _names(initial) == [("apply", "Namespace", "ns"), ("apply", "ResourceFlavor", "rf"),
                                   ("apply", "ClusterQueue", "cq"), ("apply", "LocalQueue", "lq"),
                                   ("apply", "Workload", "w")]
        assert all(m["apiVersion"] == KINDS[m["kind"]].api_version for _, m in initial)
        assert all("managedFields" not in m["metadata"] for _, m in initial)
        assert await source.initial_sync() == []  # handed over once
        assert source.drain() == []
        assert source.resource_version("Workload/ns/w") == "5"
        assert source.resource_version("Workload/ns/nope") is None

    await _run(source, body)
    assert kube.lists["LocalQueue"] == 2


async def test_events_after_the_sync_are_applies_and_deletes_and_replays_are_dropped() -> None:
    kube = FakeKube()
    kube.put("ResourceFlavor", obj("ResourceFlavor", "a", 90))
    source = _source(kube)

    async def body() -> None:
        await source.initial_sync()
        stream = await kube.watching("ResourceFlavor")
        assert stream.resource_version == "100"  # the list's
        stream.send("ADDED", obj("ResourceFlavor", "b", 101))
        stream.send("MODIFIED", obj("ResourceFlavor", "b", 102, tier="gold"))
        stream.send("MODIFIED", obj("ResourceFlavor", "b", 101))  # replayed: at or below what was seen
        stream.send("MODIFIED", obj("ResourceFlavor", "a", 99))   # replayed: older than the list
        stream.send("DELETED", obj("ResourceFlavor", "ghost", 103))  # never seen: nothing to delete
        stream.bookmark(104)
        stream.send("DELETED", obj("ResourceFlavor", "a", 105))
        changes = await _until(source, 3)
        assert _names(changes) == [("apply", "ResourceFlavor", "b"), ("apply", "ResourceFlavor", "b"),
                                   ("delete", "ResourceFlavor", "a")]
        assert changes[1][1]["metadata"]["labels"] == {"tier": "gold"}
        assert source.resource_version("ResourceFlavor/b") == "102"
        assert source.resource_version("ResourceFlavor/a") is None
        assert source.bookmarks["ResourceFlavor"] == 1
        stream.end()  # the server's timeout: resume from the last version seen, no restart, no wait
        again = await kube.watching("ResourceFlavor", 2)
        assert again.resource_version == "105"
        assert source.restarts["ResourceFlavor"] == 0 and source.drain() == []

    await _run(source, body)


async def test_a_silent_stream_is_cut_and_resumed_from_where_it_was() -> None:
    kube = FakeKube()
    source = _source(kube, kinds=("Workload",), dead_after=0.05)

    async def body() -> None:
        await source.initial_sync()
        first = await kube.watching("Workload")
        first.bookmark(150)
        second = await kube.watching("Workload", 2)  # nothing for 50 ms after the bookmark
        assert second.resource_version == "150"

    with capture_logs() as logs:
        await _run(source, body)
    assert source.restarts["Workload"] >= 1
    assert {"event": "watch_restarted", "kind": "Workload", "reason": "dead"}.items() <= next(
        e for e in logs if e["event"] == "watch_restarted").items()


async def test_410_lists_again_and_reports_only_what_changed_meanwhile() -> None:
    kube = FakeKube()
    kept, changed, gone = (obj("Workload", n, rv, "ns") for n, rv in (("kept", 10), ("changed", 11), ("gone", 12)))
    for m in (kept, changed, gone):
        kube.put("Workload", m)
    source = _source(kube)

    async def body() -> None:
        await source.initial_sync()
        stream = await kube.watching("Workload")
        kube.remove("Workload", gone)
        kube.put("Workload", obj("Workload", "changed", 130, "ns", v="2"))
        kube.put("Workload", obj("Workload", "new", 131, "ns"))
        kube.rv = 131
        stream.fail(ApiGone(410, "Expired", "too old resource version: 100 (120)"))
        changes = await _until(source, 3)
        assert sorted(_names(changes)) == [("apply", "Workload", "changed"), ("apply", "Workload", "new"),
                                           ("delete", "Workload", "gone")]
        assert changes[-1][0] == "delete" and changes[-1][1]["metadata"]["resourceVersion"] == "12"  # the last seen
        again = await kube.watching("Workload", 2)
        assert again.resource_version == "131"
        assert source.drain() == []

    with capture_logs() as logs:
        await _run(source, body)
    assert source.relists["Workload"] == 1
    relisted = next(e for e in logs if e["event"] == "watch_relisted")
    summary = (relisted["kind"], relisted["reason"], relisted["applies"], relisted["deletes"])
    assert summary == ("Workload", "gone", 2, 1)


async def test_a_kind_that_is_not_served_syncs_empty_and_arrives_when_its_crd_does() -> None:
    kube = FakeKube()
    kube.put("ResourceFlavor", obj("ResourceFlavor", "rf", 1))
    kube.list_errors["ElasticQuota"] += [ApiNotFound(404, "NotFound"), ApiNotFound(404, "NotFound")]
    sleeps = Sleeps()
    source = _source(kube, kinds=("ResourceFlavor", "ElasticQuota"), sleeps=sleeps)

    async def body() -> None:
        assert _names(await source.initial_sync()) == [("apply", "ResourceFlavor", "rf")]
        kube.put("ElasticQuota", obj("ElasticQuota", "eq", 7, "team"))
        assert _names(await _until(source, 1)) == [("apply", "ElasticQuota", "eq")]

    with capture_logs() as logs:
        await _run(source, body)
    assert [e["event"] for e in logs].count("watch_kind_missing") == 1
    assert len(sleeps.waits) == 2  # each 404 waited before asking again


async def test_failures_back_off_on_schedule_and_honour_retry_after() -> None:
    kube = FakeKube()
    kube.list_errors["Workload"] += [ApiUnavailable(None, "ConnectionError")] * 4
    kube.list_errors["Workload"].append(ApiUnavailable(429, "TooManyRequests", retry_after=30.0))
    sleeps = Sleeps()
    source = _source(kube, kinds=("Workload",), sleeps=sleeps, seed=42)

    async def body() -> None:
        await source.initial_sync()
        await kube.watching("Workload")

    await _run(source, body)
    expected = Backoff(rng=random.Random(42))
    schedule = [expected.delay(n) for n in range(4)] + [expected.delay(4, retry_after=30.0)]
    assert sleeps.waits == schedule
    assert all(w <= Backoff().ceiling(n) for n, w in enumerate(sleeps.waits[:4]))
    assert sleeps.waits[-1] >= 30.0
    assert source.restarts["Workload"] == 5


async def test_a_stream_that_delivered_resets_the_backoff() -> None:
    kube = FakeKube()
    kube.watch_errors["Workload"] += [ApiUnavailable(503, "ServiceUnavailable")] * 3
    sleeps = Sleeps()
    source = _source(kube, kinds=("Workload",), sleeps=sleeps, seed=1)

    async def body() -> None:
        await source.initial_sync()
        stream = await kube.watching("Workload")  # after three failed attempts
        stream.send("ADDED", obj("Workload", "w", 101, "ns"))
        stream.fail(ApiUnavailable(None, "ConnectionError"))
        await kube.watching("Workload", 2)

    await _run(source, body)
    expected = Backoff(rng=random.Random(1))
    assert sleeps.waits == [expected.delay(0), expected.delay(1), expected.delay(2)]  # none after the healthy one


async def test_interrupt_cuts_the_connection_and_resume_from_replays_without_duplicates() -> None:
    kube = FakeKube()
    source = _source(kube, kinds=("Workload",))

    async def body() -> None:
        await source.initial_sync()
        stream = await kube.watching("Workload")
        stream.send("ADDED", obj("Workload", "w1", 101, "ns"))
        assert _names(await _until(source, 1)) == [("apply", "Workload", "w1")]
        source.interrupt("Workload", resume_from="100")
        assert stream.closed
        replay = await kube.watching("Workload", 2)
        assert replay.resource_version == "100"
        replay.send("ADDED", obj("Workload", "w1", 101, "ns"))  # seen already
        replay.send("ADDED", obj("Workload", "w2", 102, "ns"))
        assert _names(await _until(source, 1)) == [("apply", "Workload", "w2")]

    await _run(source, body)
    assert source.restarts["Workload"] == 1


async def test_events_and_next_batch_end_when_the_source_stops() -> None:
    kube = FakeKube()
    source = _source(kube, kinds=("Workload",))
    seen: list[Change] = []

    async def consume() -> None:
        async for change in source.events():
            seen.append(change)

    async with anyio.create_task_group() as tg:
        await tg.start(source.run)
        tg.start_soon(consume)
        stream = await kube.watching("Workload")
        stream.send("ADDED", obj("Workload", "w", 101, "ns"))
        with anyio.fail_after(WAIT_S):
            while not seen:
                await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    assert _names(seen) == [("apply", "Workload", "w")]
    assert await source.next_batch() == []


@pytest.mark.parametrize("kind", [pytest.param(k, id=k) for k in KINDS])
def test_every_kind_has_a_path_kubernetes_serves(kind: str) -> None:
    k = KINDS[kind]
    core = {"Namespace", "Node", "LimitRange"}
    assert k.path().startswith("/api/v1/" if kind in core else f"/apis/{k.group}/{k.version}/")
    if k.namespaced:
        assert k.path("ns", "x", "status") == f"{k.path().rsplit('/', 1)[0]}/namespaces/ns/{k.plural}/x/status"
    else:
        assert k.path("ignored", "x") == f"{k.path()}/x"


async def test_it_is_the_daemon_s_source_too() -> None:
    kube = FakeKube()
    kube.put("Workload", obj("Workload", "w0", 5, "ns"))
    cluster: Source = _source(kube, kinds=("Workload",), name="https://cluster.example")
    assert cluster.name == "https://cluster.example"
    source = cluster
    assert isinstance(source, ClusterSource)

    async def body() -> None:
        assert _names(await source.initial()) == [("apply", "Workload", "w0")]
        assert await source.changes(0) == []  # no waiting
        assert source.problem_changes() == ([], [])
        stream = await kube.watching("Workload")
        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tg:
                got: list[Change] = []

                async def ask() -> None:
                    got.extend(await source.changes(WAIT_S * 2))  # returns with the first change, not at the end

                tg.start_soon(ask)
                await anyio.lowlevel.checkpoint()
                stream.send("ADDED", obj("Workload", "w1", 101, "ns"))
        assert _names(got) == [("apply", "Workload", "w1")]

    await _run(source, body)
