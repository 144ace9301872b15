"""What :class:`~kueued.kube.watch.ClusterSource` works with: the port it lists and watches
through, and one kind's list-then-watch state.

:class:`WatchClient` is what the source needs of :class:`~kueued.kube.client.KubeClient`
(a test gives a fake), :class:`WatchEvents` one open watch.  :class:`Follow` is one kind's
state between requests: the objects last listed or delivered (for the diff after a 410),
the resourceVersion a watch resumes from, and the highest numeric one delivered, against
which a replayed event is recognised (:meth:`Follow.advance` moves both).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from kueued.kube.client import Kind

__all__ = ["Change", "WatchClient", "WatchEvents", "Follow", "resource_version_of", "numeric"]

Change = tuple[str, dict[str, Any]]
"""``("apply" | "delete", manifest)``: what :class:`~kueued.sources.ManifestDirectory` yields too."""


class WatchEvents(Protocol):
    """One open watch: raw events until the server ends it; ``close()`` cuts it from outside."""

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class WatchClient(Protocol):
    """What the source needs of :class:`~kueued.kube.client.KubeClient` (a test gives a fake)."""

    async def list(self, kind: Kind | str, namespace: str | None = None, *,
                   page_size: int = 500) -> tuple[list[dict[str, Any]], str]: ...

    def watch(self, kind: Kind | str, resource_version: str, *, timeout_seconds: int,
              allow_bookmarks: bool = True, read_timeout: float | None = None,
              namespace: str | None = None) -> AbstractAsyncContextManager[WatchEvents]: ...


@dataclass
class Follow:
    """One kind's list-then-watch state."""

    kind: Kind
    objects: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # key -> (rv, last manifest)
    resource_version: str = ""  # where the watch resumes; "" lists first
    high_water: int | None = None  # the highest numeric resourceVersion delivered
    synced: bool = False
    attempts: int = 0  # consecutive failures, for the backoff
    stream: WatchEvents | None = None
    progressed: bool = False  # the current watch delivered something (a bookmark counts)
    cut: bool = False  # interrupted: end the current (or the next) watch at once
    resume_from: str | None = None  # a test's (or an operator's) override for the next watch


    def advance(self, rv: str) -> None:
        """Resume from ``rv`` (an event's or a bookmark's) and raise the high water to it."""
        if not rv:
            return
        self.resource_version = rv
        number = numeric(rv)
        if number is not None and (self.high_water is None or number > self.high_water):
            self.high_water = number


def resource_version_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def numeric(rv: str) -> int | None:
    return int(rv) if rv.isdigit() else None
