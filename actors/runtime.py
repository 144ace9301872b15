"""A small actor runtime on anyio: a mailbox per actor, one-shot replies.

An :class:`Actor` owns its state and a mailbox; ``run()`` only receives and
dispatches to ``handle`` (plain or async), so every state change is a method a test
can call without an event loop.  ``tell`` posts and forgets; ``ask`` posts with a
one-shot reply slot and waits (with a timeout): a handler's exception travels back
to the asker, not into the actor's grave.  Stopping closes the mailbox; messages still
in it are still answered, and an ``ask`` after that gets :class:`ActorStopped`; if the
actor is cancelled instead, what is left in its mailbox is failed the same way.

The reply slot is a :class:`Reply`: a value and an ``anyio.Event``, not a memory
stream (a stream pair per ask was a third of the coordinator's cost at a thousand
ClusterQueues).  The mailbox is a :class:`_Mailbox`: a deque, and an ``anyio.Event``
made only while the actor waits on an empty one (an anyio memory object stream did the
same with more bookkeeping per message).  ``post`` + ``Reply.result`` split an ask, so
a coordinator can ask every actor of a round first and then collect the answers in
order (each actor still handles its messages one at a time, in mailbox order).

Quiescence needs no sleeping: what the coordinator starts is an ``ask`` it awaits, a
``tell`` that sits ahead of its next ask to the same actor, or a posted ask it collects
before the next round reads a balance, so when a round returns no message is in flight.
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from typing import Any

import anyio
from anyio.abc import TaskStatus

__all__ = ["Actor", "ActorStopped", "Reply", "Stats"]


class ActorStopped(RuntimeError):
    """The actor stopped before it could answer."""


class Reply:
    """The one answer to an ask: set once by the actor, awaited by the asker.

    The ``anyio.Event`` is made only when the asker has to wait: a reply read after the
    actor answered (the later replies of a round) costs no event and no timer.
    """

    __slots__ = ("actor", "_event", "done", "ok", "value")

    def __init__(self, actor: str) -> None:
        self.actor = actor
        self._event: anyio.Event | None = None
        self.done = False
        self.ok = False
        self.value: Any = None

    def settle(self, ok: bool, value: Any) -> None:
        if not self.done:
            self.done, self.ok, self.value = True, ok, value
            if self._event is not None:
                self._event.set()

    async def result(self, timeout: float = math.inf) -> Any:
        if not self.done:
            self._event = anyio.Event()  # no await since the check: settle sees it
            with anyio.fail_after(timeout):
                await self._event.wait()
        if not self.ok:
            raise self.value
        return self.value


class _Envelope:
    __slots__ = ("msg", "reply")

    def __init__(self, msg: Any, reply: Reply | None) -> None:
        self.msg = msg
        self.reply = reply


class Stats:
    __slots__ = ("name", "handled", "mailbox")

    def __init__(self, name: str, handled: int, mailbox: int) -> None:
        self.name = name
        self.handled = handled
        self.mailbox = mailbox


class _Mailbox:
    """Envelopes in arrival order; ``get`` waits while it is empty and open."""

    __slots__ = ("_items", "_wakeup", "closed")

    def __init__(self) -> None:
        self._items: deque[_Envelope] = deque()
        self._wakeup: anyio.Event | None = None
        self.closed = False

    def put(self, env: _Envelope) -> None:
        self._items.append(env)
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None

    def close(self) -> None:
        self.closed = True
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None

    async def get(self) -> _Envelope | None:
        """The next envelope, or None once closed and drained."""
        while not self._items:
            if self.closed:
                return None
            self._wakeup = anyio.Event()
            await self._wakeup.wait()
        return self._items.popleft()

    def take_all(self) -> list[_Envelope]:
        items = list(self._items)
        self._items.clear()
        return items

    def __len__(self) -> int:
        return len(self._items)


class Actor:
    ask_timeout: float = 60.0

    def __init__(self, name: str) -> None:
        self.name = name
        self._mailbox = _Mailbox()
        self.handled = 0

    # --- the shell ---------------------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        mailbox = self._mailbox
        try:
            while (env := await mailbox.get()) is not None:
                await self._dispatch(env)
            # closed: nothing left to drain (get returns None only once the mailbox is empty)
        finally:
            mailbox.closed = True
            self._fail_pending()

    def _fail_pending(self) -> None:
        """Cancelled with messages still queued: their askers get ActorStopped, not a timeout."""
        for env in self._mailbox.take_all():
            if env.reply is not None:
                env.reply.settle(False, ActorStopped(self.name))

    async def _dispatch(self, env: _Envelope) -> None:
        self.handled += 1
        try:
            result = self.handle(env.msg)
            if inspect.isawaitable(result):
                result = await result
            ok, value = True, result
        except Exception as exc:  # the asker gets it; the actor lives on
            if env.reply is None:
                raise
            ok, value = False, exc
        if env.reply is not None:
            env.reply.settle(ok, value)

    def handle(self, msg: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- talking to it -----------------------------------------------------------------------
    def tell(self, msg: Any) -> None:
        if self._mailbox.closed:
            raise ActorStopped(self.name)
        self._mailbox.put(_Envelope(msg, None))

    async def ask(self, msg: Any) -> Any:
        return await self.post(msg).result(self.ask_timeout)

    def post(self, msg: Any) -> Reply:
        """The first half of an ask: queue ``msg``; await ``.result(timeout)`` for the answer."""
        if self._mailbox.closed:
            raise ActorStopped(self.name)
        reply = Reply(self.name)
        self._mailbox.put(_Envelope(msg, reply))
        return reply

    def stop(self) -> None:
        self._mailbox.close()

    def stats(self) -> Stats:
        return Stats(self.name, self.handled, len(self._mailbox))
