"""An in-memory API server for controller tests: objects, resourceVersions, merge patches, watches.

What the Job controller relies on behaves as kube-apiserver's does: a write carrying
``metadata.resourceVersion`` is refused (ApiConflict) when the object moved on; a create of
an existing name is ApiConflict; a merge patch is RFC 7386; ``patch`` leaves ``status``
alone and ``patch_status`` touches only ``status``; a Job's pod template may change only
while the *stored* Job is suspended and has no ``status.startTime`` (else ApiInvalid, as
the real server says "field is immutable"); every write is an event on the kind's watch.
Every write the system under test makes is logged in :attr:`FakeApi.writes`.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

from kueued.kube.client import JOB, KINDS, PRIORITY_CLASS, Kind
from kueued.kube.errors import ApiConflict, ApiInvalid, ApiNotFound, ApiUnavailable

_KINDS = {**KINDS, "Job": JOB, "PriorityClass": PRIORITY_CLASS}


def _kind(kind: Kind | str) -> str:
    return kind.kind if isinstance(kind, Kind) else kind


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class FakeStream:
    def __init__(self, api: FakeApi, kind: str, resource_version: str) -> None:
        self.api = api
        self.kind = kind
        self.position = int(resource_version or 0)
        self.closed = False

    def close(self) -> None:
        self.closed = True
        self.api._pulse()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._events()

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            if self.closed:
                raise ApiUnavailable(None, "ConnectionClosed", "closed")
            fresh = [(rv, e) for rv, e in self.api.history[self.kind] if rv > self.position]
            for rv, event in fresh:
                self.position = rv
                yield copy.deepcopy(event)
            if not fresh:
                await self.api._changed()


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in _KINDS}
        self.history: dict[str, list[tuple[int, dict[str, Any]]]] = {k: [] for k in _KINDS}
        self.writes: list[tuple[str, str, str]] = []  # (verb, kind, "ns/name") by the system under test
        self.fail_next: list[BaseException] = []       # raised by the next writes, in order
        self._rv = itertools.count(100)
        self._uids = itertools.count(1)
        self._pulse_event = anyio.Event()

    # -- the test's side -----------------------------------------------------------------------

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace ``obj`` as a user would (not logged as a write)."""
        kind = obj["kind"]
        meta = obj.setdefault("metadata", {})
        old = self.objects[kind].get((meta.get("namespace", ""), meta["name"]))
        meta.setdefault("uid", old["metadata"]["uid"] if old else f"uid-{next(self._uids)}")
        return self._store(kind, obj, "MODIFIED" if old else "ADDED")

    def remove(self, kind: str, namespace: str, name: str) -> None:
        obj = self.objects[kind].pop((namespace, name))
        self._event(kind, "DELETED", obj, next(self._rv))

    def obj(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects[kind].get((namespace, name))

    def all(self, kind: str) -> list[dict[str, Any]]:
        return list(self.objects[kind].values())

    async def until(self, predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Wait (on changes, never a sleep) until ``predicate()`` is truthy; return it."""
        with anyio.fail_after(timeout):
            while not (value := predicate()):
                await self._changed()
            return value

    # -- the client's side (KubeClient's signatures) ------------------------------------------------

    async def list(self, kind: Kind | str, namespace: str | None = None, *,
                   page_size: int = 500) -> tuple[list[dict[str, Any]], str]:
        await anyio.lowlevel.checkpoint()
        items = [copy.deepcopy(o) for (ns, _), o in self.objects[_kind(kind)].items() if namespace in (None, ns)]
        return items, str(self._current())

    @asynccontextmanager
    async def watch(self, kind: Kind | str, resource_version: str, *, timeout_seconds: int,
                    allow_bookmarks: bool = True, read_timeout: float | None = None,
                    namespace: str | None = None) -> AsyncIterator[FakeStream]:
        await anyio.lowlevel.checkpoint()
        stream = FakeStream(self, _kind(kind), resource_version)
        try:
            yield stream
        finally:
            stream.close()

    async def get(self, kind: Kind | str, namespace: str | None, name: str) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        self._pulse()  # a read is something happening too: a test may wait for the controller to ask
        obj = self.objects[_kind(kind)].get((namespace or "", name))
        if obj is None:
            raise ApiNotFound(404, "NotFound", f"{_kind(kind)} {name} not found")
        return copy.deepcopy(obj)

    async def create(self, kind: Kind | str, body: dict[str, Any]) -> dict[str, Any]:
        k = self._write("create", kind, body["metadata"].get("namespace", ""), body["metadata"]["name"])
        meta = body["metadata"]
        if (meta.get("namespace", ""), meta["name"]) in self.objects[k]:
            raise ApiConflict(409, "AlreadyExists", f"{k} {meta['name']} already exists")
        obj = copy.deepcopy(body)
        obj["metadata"]["uid"] = f"uid-{next(self._uids)}"
        return copy.deepcopy(self._store(k, obj, "ADDED"))

    async def delete(self, kind: Kind | str, namespace: str | None, name: str) -> None:
        k = self._write("delete", kind, namespace or "", name)
        if (namespace or "", name) not in self.objects[k]:
            raise ApiNotFound(404, "NotFound", f"{k} {name} not found")
        self.remove(k, namespace or "", name)

    async def patch(self, kind: Kind | str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._patch("patch", kind, namespace or "", name, body, status=False)

    async def patch_json(self, kind: Kind | str, namespace: str | None, name: str,
                         operations: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON Patch operations kueued sends (test, add, replace on object fields and an
        array's ``-``), with kube-apiserver's ``test`` (evanphx/json-patch): a ``null`` value
        matches a missing field; a failed test is a 422."""
        await anyio.lowlevel.checkpoint()
        k = self._write("patch_json", kind, namespace or "", name)
        old = self.objects[k].get((namespace or "", name))
        if old is None:
            raise ApiNotFound(404, "NotFound", f"{k} {name} not found")
        new = copy.deepcopy(old)
        for op in operations:
            *parents, last = op["path"].lstrip("/").split("/")
            container: Any = new
            for part in parents:
                container = container.setdefault(part, {}) if isinstance(container, dict) else container[int(part)]
            if op["op"] == "test":
                if (container.get(last) if isinstance(container, dict) else container[int(last)]) != op["value"]:
                    raise ApiInvalid(422, "Invalid", f"testing value {op['path']} failed")
            elif last == "-" and op["op"] == "add":
                container.append(copy.deepcopy(op["value"]))
            elif op["op"] in ("add", "replace"):
                container[last] = copy.deepcopy(op["value"])
            else:
                raise AssertionError(f"operation not faked: {op}")
        meta = new["metadata"]
        if (old["metadata"].get("deletionTimestamp")
                and set(meta.get("finalizers") or ()) - set(old["metadata"].get("finalizers") or ())):
            raise ApiInvalid(422, "Invalid", "metadata.finalizers: Forbidden: no new finalizers can be added "
                                             "if the object is being deleted")
        return copy.deepcopy(self._store(k, new, "MODIFIED"))

    async def patch_status(self, kind: Kind | str, namespace: str | None, name: str, body: dict[str, Any], *,
                           resource_version: str | None = None) -> dict[str, Any]:
        if resource_version is not None:
            body = {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": resource_version}}
        return await self._patch("patch_status", kind, namespace or "", name, body, status=True)

    # -- plumbing --------------------------------------------------------------------------------

    def _write(self, verb: str, kind: Kind | str, namespace: str, name: str) -> str:
        k = _kind(kind)
        self.writes.append((verb, k, f"{namespace}/{name}"))
        if self.fail_next:
            raise self.fail_next.pop(0)
        return k

    async def _patch(self, verb: str, kind: Kind | str, namespace: str, name: str, body: dict[str, Any], *,
                     status: bool) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        k = self._write(verb, kind, namespace, name)
        old = self.objects[k].get((namespace, name))
        if old is None:
            raise ApiNotFound(404, "NotFound", f"{k} {name} not found")
        body = copy.deepcopy(body)
        wanted = (body.get("metadata") or {}).pop("resourceVersion", None)
        if wanted is not None and wanted != old["metadata"]["resourceVersion"]:
            raise ApiConflict(409, "Conflict", "the object has been modified")
        if status:
            new = {**old, "status": merge_patch(old.get("status"), body.get("status") or {})}
        else:
            body.pop("status", None)
            new = merge_patch(old, body)
            new["status"] = old.get("status")
            if new.get("status") is None:
                new.pop("status", None)
            if k == "Job":
                self._check_job_update(old, new)
        return copy.deepcopy(self._store(k, new, "MODIFIED"))

    @staticmethod
    def _check_job_update(old: dict[str, Any], new: dict[str, Any]) -> None:
        """kube-apiserver's rule: a Job's template changes only while it is suspended and never started."""
        if old["spec"].get("template") == new["spec"].get("template"):
            return
        if old["spec"].get("suspend") is True and not (old.get("status") or {}).get("startTime"):
            return
        raise ApiInvalid(422, "Invalid", "spec.template: field is immutable")

    def _store(self, kind: str, obj: dict[str, Any], type_: str) -> dict[str, Any]:
        rv = next(self._rv)
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", _KINDS[kind].api_version)
        obj["metadata"]["resourceVersion"] = str(rv)
        self.objects[kind][(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
        self._event(kind, type_, obj, rv)
        return obj

    def _event(self, kind: str, type_: str, obj: dict[str, Any], rv: int) -> None:
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(rv)
        self.history[kind].append((rv, {"type": type_, "object": obj}))
        self._pulse()

    def _current(self) -> int:
        return max((rv for h in self.history.values() for rv, _ in h), default=99)

    def _pulse(self) -> None:
        self._pulse_event.set()
        self._pulse_event = anyio.Event()

    async def _changed(self) -> None:
        await self._pulse_event.wait()
