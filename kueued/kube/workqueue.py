"""A keyed work queue, as client-go's ``workqueue`` keeps one: each key once, one worker per key.

A controller reacts to events by key (``namespace/name``), not by event: ten changes to a
Job while its reconcile runs are one more reconcile, not ten.  So:

- a key is queued at most once (adding it again while it waits changes nothing);
- a key is handled by one worker at a time: added while a worker has it, it is queued
  again when that worker calls :meth:`WorkQueue.done`, so the change is never lost and
  never handled twice at once;
- keys come out in the order they were first queued;
- :meth:`WorkQueue.join` waits until nothing is queued or handled, so a stop can let the
  requests in flight finish instead of cutting them (a request cancelled mid-flight can
  leave its connection behind).

Retries after a failure are the caller's (a sleeping task that adds the key again); the
queue itself never sleeps, so a test drives it without an event loop but for :meth:`get`.
"""

from __future__ import annotations

from collections import deque

import anyio

__all__ = ["WorkQueue"]


class WorkQueue:
    def __init__(self) -> None:
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._wakeup = anyio.Event()
        self._settled = anyio.Event()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def active(self) -> int:
        return len(self._active)

    def add(self, key: str) -> None:
        if key in self._queued:
            return
        if key in self._active:
            self._dirty.add(key)
            return
        self._queued.add(key)
        self._queue.append(key)
        self._wakeup.set()

    async def get(self) -> str:
        """The next key, once there is one; the caller owns it until :meth:`done`."""
        while not self._queue:
            if self._wakeup.is_set():
                self._wakeup = anyio.Event()
            await self._wakeup.wait()
        key = self._queue.popleft()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: str) -> None:
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)
        if not self._queue and not self._active:
            self._settled.set()

    async def join(self) -> None:
        """Wait until no key is queued or being handled."""
        while self._queue or self._active:
            if self._settled.is_set():
                self._settled = anyio.Event()
            await self._settled.wait()
