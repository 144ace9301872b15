"""The tree's message counter: when no request or runtime is in flight, the tree is at rest."""

from __future__ import annotations

from typing import Any

import anyio

from actors.runtime import Actor, ActorStopped

__all__ = ["Flow"]


class Flow:
    """Counts the tree's messages from send to handled; :meth:`settled` waits for none.

    Requests and runtimes are told, never asked (a child asking its parent while the
    parent asks the child would deadlock), so the coordinator needs this to know when
    the tree is at rest.  ``deliver`` is the seam a test uses to reorder messages.
    """

    def __init__(self) -> None:
        self.in_flight = 0
        self._idle: anyio.Event | None = None

    def tell(self, actor: Actor, msg: Any) -> None:
        self.in_flight += 1
        try:
            self.deliver(actor, msg)
        except ActorStopped:
            self.done()
            raise

    def deliver(self, actor: Actor, msg: Any) -> None:
        actor.tell(msg)

    def done(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None

    async def settled(self) -> None:
        while self.in_flight:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()
