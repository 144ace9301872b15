"""The Kubernetes API, as kueued uses it: raw JSON dicts over kubernetes_asyncio's transport.

kubernetes_asyncio gives us what is hard to get right (kubeconfig and in-cluster
loading, client certificates, bearer tokens and their refresh, TLS); its generated
models we skip: every call asks for the raw response (``_preload_content=False``) and
decodes it with msgspec into plain dicts, which is what kueued's World takes and is an
order of magnitude faster than the client's model deserialisation.  List items come
without ``apiVersion``/``kind``; they are filled in here, so every object leaving this
module is a complete manifest.

:class:`KubeClient` is the small typed facade the daemon needs; every method raises
:mod:`kueued.kube.errors` types only.  ``KINDS`` names what kueued watches, in dependency
order (a Workload's LocalQueue before it, and so on).  A watch is read line by line from
the response body (one JSON event per line), never through ``watch.Watch``.

Security: nothing here logs (a token, a key and a header least of all); connecting, with
its TLS verification and credentials, is :mod:`kueued.kube.connect`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec
from kubernetes_asyncio.client import ApiClient

from kueued.kube.errors import ApiUnavailable, from_status, wrapped
from kueued.model.clock import rfc3339

__all__ = ["KINDS", "EVENT", "LEASE", "JOB", "PRIORITY_CLASS", "Kind", "KubeClient", "WatchStream",
           "manifest_kind"]

Query = list[tuple[str, str]]  # named out here: inside KubeClient, `list` is the method


class Kind(msgspec.Struct, frozen=True):
    """Where the API serves one kind: ``/apis/{group}/{version}[/namespaces/{ns}]/{plural}``."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection (all namespaces unless one is named), an object, or its subresource."""
        path = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{self.plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
            if subresource:
                path += f"/{subresource}"
        return path


_KUEUE = ("kueue.x-k8s.io", "v1beta2")

KINDS: dict[str, Kind] = {k.kind: k for k in (
    Kind("Namespace", "", "v1", "namespaces", False),
    Kind("Node", "", "v1", "nodes", False),
    Kind("LimitRange", "", "v1", "limitranges", True),
    Kind("ResourceFlavor", *_KUEUE, "resourceflavors", False),
    Kind("WorkloadPriorityClass", *_KUEUE, "workloadpriorityclasses", False),
    Kind("Cohort", *_KUEUE, "cohorts", False),
    Kind("ElasticQuota", "scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", True),
    Kind("ClusterQueue", *_KUEUE, "clusterqueues", False),
    Kind("LocalQueue", *_KUEUE, "localqueues", True),
    Kind("Workload", *_KUEUE, "workloads", True),
)}
"""What kueued watches, in the order the World needs them (``kueued.sources.KIND_ORDER``)."""

EVENT = Kind("Event", "", "v1", "events", True)
"""Written (``create_event``), never watched."""
LEASE = Kind("Lease", "coordination.k8s.io", "v1", "leases", True)
"""Read, created and updated by leader election (``kueued.kube.lease``), in kueued's namespace only."""

# The Job integration's kinds (kueued.kube.jobs): not in KINDS, so the scheduler's ClusterSource never
# follows them; the Job controller follows Jobs (and Workloads) with its own source.
JOB = Kind("Job", "batch", "v1", "jobs", True)
"""Followed, suspended, unsuspended and patched by the Job integration."""
PRIORITY_CLASS = Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False)
"""Read (get, list) for the priority of a Job's pods, never watched."""


def manifest_kind(kind: Kind | str) -> Kind:
    if isinstance(kind, Kind):
        return kind
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"kueued does not read {kind!r}; known kinds: {', '.join(KINDS)}") from None


def _decode_object(data: bytes) -> dict[str, Any]:
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ApiUnavailable(None, "DecodeError", f"the API server sent something that is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ApiUnavailable(None, "DecodeError", f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _complete(obj: dict[str, Any], kind: Kind) -> dict[str, Any]:
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    return obj


class KubeClient:
    """A connected client; use as ``async with await connect(...) as kube:`` or call :meth:`aclose`."""

    def __init__(self, api: ApiClient, *, request_timeout: float = 60.0, connect_timeout: float = 10.0) -> None:
        self.api = api
        self.server: str = api.configuration.host or ""
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout

    async def aclose(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    # -- reads ----------------------------------------------------------------------------

    async def list(self, kind: Kind | str, namespace: str | None = None, *,
                   page_size: int = 500) -> tuple[list[dict[str, Any]], str]:
        """Every object of ``kind`` (in ``namespace``, or everywhere) and the list's resourceVersion.

        Read in pages of ``page_size``; the pages are one consistent snapshot, whose
        resourceVersion is the one to watch from.  An expired continue token is ApiGone.
        """
        k = manifest_kind(kind)
        items: list[dict[str, Any]] = []
        cont = ""
        resource_version = ""
        while True:
            query = [("limit", str(page_size))] + ([("continue", cont)] if cont else [])
            page = await self._call("GET", k.path(namespace), query=query)
            meta = page.get("metadata") or {}
            resource_version = resource_version or str(meta.get("resourceVersion", ""))
            items.extend(_complete(item, k) for item in page.get("items") or ())
            cont = str(meta.get("continue") or "")
            if not cont:
                return items, resource_version

    async def get(self, kind: Kind | str, namespace: str | None, name: str) -> dict[str, Any]:
        k = manifest_kind(kind)
        return _complete(await self._call("GET", k.path(namespace, name)), k)

    def watch(self, kind: Kind | str, resource_version: str, *, timeout_seconds: int,
              allow_bookmarks: bool = True, read_timeout: float | None = None,
              namespace: str | None = None) -> WatchStream:
        """Changes to ``kind`` after ``resource_version``: ``async with kube.watch(...) as events:``.

        The server ends the stream after ``timeout_seconds``; ``read_timeout`` bounds the
        silence between two reads (a dead connection), raised as ApiUnavailable.
        """
        k = manifest_kind(kind)
        query = [("watch", "true"), ("timeoutSeconds", str(int(timeout_seconds)))]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout, sock_connect=self.connect_timeout,
                                        sock_read=read_timeout)
        return WatchStream(self, k, k.path(namespace), query, timeout)

    # -- writes ---------------------------------------------------------------------------

    async def create(self, kind: Kind | str, body: dict[str, Any]) -> dict[str, Any]:
        k = manifest_kind(kind)
        namespace = (body.get("metadata") or {}).get("namespace")
        return _complete(await self._call("POST", k.path(namespace), body=_complete(dict(body), k)), k)

    async def delete(self, kind: Kind | str, namespace: str | None, name: str, *,
                     propagation: str | None = None) -> None:
        """``propagation``: the dependents' fate (``Background``: deleted after the object), else the kind's default."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation} if propagation else None
        await self._call("DELETE", manifest_kind(kind).path(namespace, name), body=body)

    async def patch(self, kind: Kind | str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch on the object (labels, annotations, spec)."""
        k = manifest_kind(kind)
        return _complete(await self._call("PATCH", k.path(namespace, name), body=body,
                                          content_type="application/merge-patch+json"), k)

    async def patch_json(self, kind: Kind | str, namespace: str | None, name: str,
                         operations: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """A JSON Patch (RFC 6902) on the object.  A failed ``test`` operation is refused with 422
        (ApiInvalid): the object changed where the patch looked, whatever else changed."""
        k = manifest_kind(kind)
        return _complete(await self._call("PATCH", k.path(namespace, name), body=operations,
                                          content_type="application/json-patch+json"), k)

    async def patch_status(self, kind: Kind | str, namespace: str | None, name: str, body: dict[str, Any], *,
                           resource_version: str | None = None) -> dict[str, Any]:
        """A JSON merge patch on the status subresource.

        With ``resource_version`` the patch applies only to that version of the object
        (optimistic concurrency): if it changed meanwhile the server answers 409, raised
        as ApiConflict.
        """
        k = manifest_kind(kind)
        if resource_version is not None:
            body = {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": resource_version}}
        return _complete(await self._call("PATCH", k.path(namespace, name, "status"), body=body,
                                          content_type="application/merge-patch+json"), k)

    async def replace_status(self, kind: Kind | str, namespace: str | None, name: str,
                             body: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object to /status; its metadata.resourceVersion makes it conditional (409)."""
        k = manifest_kind(kind)
        return _complete(await self._call("PUT", k.path(namespace, name, "status"), body=_complete(dict(body), k)), k)

    async def create_event(self, regarding: dict[str, Any], *, reason: str, message: str, type: str = "Normal",
                           action: str = "", reporter: str = "kueued") -> dict[str, Any]:
        """A core/v1 Event about ``regarding`` (a manifest), as Kueue's recorder writes them.

        Events about cluster-scoped objects go to ``default``, where kubectl looks for them.
        """
        meta = regarding.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        name = str(meta.get("name", ""))
        now = rfc3339()
        involved = {"apiVersion": regarding.get("apiVersion", ""), "kind": regarding.get("kind", ""),
                    "name": name, "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", "")}
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": involved, "reason": reason, "message": message[:1024], "type": type,
            "action": action, "source": {"component": reporter}, "reportingComponent": reporter,
            "reportingInstance": reporter, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        return _complete(await self._call("POST", EVENT.path(namespace), body=body), EVENT)

    # -- the one place a request is made ------------------------------------------------------

    async def _call(self, method: str, path: str, *, query: Query | None = None,
                    body: Any = None, content_type: str = "application/json") -> dict[str, Any]:
        with wrapped():
            response = await self._open(method, path, query=query, body=body, content_type=content_type,
                                        timeout=aiohttp.ClientTimeout(total=self.request_timeout,
                                                                      connect=self.connect_timeout))
            async with response:
                data = await response.read()
        if not 200 <= response.status < 300:
            raise from_status(response.status, data, http_reason=response.reason or "", headers=response.headers)
        return _decode_object(data) if data else {}

    async def _open(self, method: str, path: str, *, query: Query | None, body: Any,
                    content_type: str, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """Send the request; the caller reads (and releases) the raw response."""
        response: aiohttp.ClientResponse = await self.api.call_api(
            path, method, query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body, auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout)
        return response


class WatchStream:
    """One watch request: an async context manager and an async iterator of raw events.

    Each event is ``{"type": "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK", "object": {...}}``
    with the object's apiVersion and kind set.  An ``ERROR`` event (410 Gone after a
    compaction, most often) is raised as its ApiError; the end of the stream (the
    server's timeout) ends the iteration.  :meth:`close` cuts the connection from outside.
    """

    def __init__(self, client: KubeClient, kind: Kind, path: str, query: list[tuple[str, str]],
                 timeout: aiohttp.ClientTimeout) -> None:
        self._client = client
        self.kind = kind
        self._path = path
        self._query = query
        self._timeout = timeout
        self._response: aiohttp.ClientResponse | None = None
        self._buffer = bytearray()
        self._closed = False

    async def __aenter__(self) -> WatchStream:
        with wrapped():
            response = await self._client._open("GET", self._path, query=self._query, body=None,
                                                content_type="application/json", timeout=self._timeout)
        if not 200 <= response.status < 300:
            async with response:
                with wrapped():
                    data = await response.read()
            raise from_status(response.status, data, http_reason=response.reason or "", headers=response.headers)
        self._response = response
        if self._closed:  # closed while connecting
            response.close()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Drop the connection (idempotent): a reader waiting on it sees the stream fail."""
        self._closed = True
        if self._response is not None:
            self._response.close()

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._response is None:
            raise RuntimeError("use `async with kube.watch(...) as events:` before iterating")
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                with wrapped():
                    chunk = await self._response.content.readany()
                if chunk:
                    self._buffer += chunk
                    continue
                if self._closed:
                    raise ApiUnavailable(None, "ConnectionClosed", "the watch connection was closed")
                if not self._buffer.strip():
                    raise StopAsyncIteration
                newline = len(self._buffer)  # a last event without its newline
            line = bytes(self._buffer[:newline])
            del self._buffer[:newline + 1]
            if line.strip():
                return self._event(line)

    def _event(self, line: bytes) -> dict[str, Any]:
        event = _decode_object(line)
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ApiUnavailable(None, "DecodeError", "a watch event without an object")
        if event.get("type") == "ERROR":
            raise from_status(None, obj)
        _complete(obj, self.kind)
        return event
