"""A small actor runtime on anyio memory streams.

An :class:`Actor` owns its state and a mailbox; ``run()`` only receives and
dispatches to ``handle`` (plain or async), so every state change is a method a test
can call without an event loop.  ``tell`` posts and forgets; ``ask`` posts with a
one-shot reply slot and waits (with a timeout): a handler's exception travels back
to the asker, not into the actor's grave.  Stopping closes the mailbox; messages still
in it are still answered, and an ``ask`` after that gets :class:`ActorStopped`; if the
actor is cancelled instead, what is left in its mailbox is failed the same way.

The reply slot is a :class:`Reply`: a value and an ``anyio.Event``, not a memory
stream (a stream pair per ask was a third of the coordinator's cost at a thousand
ClusterQueues).  ``post`` + ``Reply.result`` split an ask, so a coordinator can ask
every actor of a round first and then collect the answers in order (each actor still
handles its messages one at a time, in mailbox order).

Quiescence needs no sleeping: every interaction the coordinator starts is an ``ask``,
so when its round returns no message is in flight anywhere.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["Actor", "ActorStopped", "Reply", "Stats"]


class ActorStopped(RuntimeError):
    """The actor stopped before it could answer."""


class Reply:
    """The one answer to an ask: set once by the actor, awaited by the asker."""

    __slots__ = ("actor", "event", "ok", "value")

    def __init__(self, actor: str) -> None:
        self.actor = actor
        self.event = anyio.Event()
        self.ok = False
        self.value: Any = None

    def settle(self, ok: bool, value: Any) -> None:
        if not self.event.is_set():
            self.ok, self.value = ok, value
            self.event.set()

    async def result(self, timeout: float = math.inf) -> Any:
        if not self.event.is_set():  # an answer already there needs no timer (a round's later replies)
            with anyio.fail_after(timeout):
                await self.event.wait()
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


class Actor:
    ask_timeout: float = 60.0

    def __init__(self, name: str) -> None:
        self.name = name
        send, recv = anyio.create_memory_object_stream[_Envelope](math.inf)
        self._send: MemoryObjectSendStream[_Envelope] = send
        self._recv: MemoryObjectReceiveStream[_Envelope] = recv
        self.handled = 0

    # --- the shell ---------------------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            async for env in self._recv:
                await self._dispatch(env)
            # closed: nothing left to drain (the stream is empty once iteration ends)
        finally:
            self._fail_pending()
            self._recv.close()

    def _fail_pending(self) -> None:
        """Cancelled with messages still queued: their askers get ActorStopped, not a timeout."""
        while True:
            try:
                env = self._recv.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
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
        try:
            self._send.send_nowait(_Envelope(msg, None))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ActorStopped(self.name) from exc

    async def ask(self, msg: Any) -> Any:
        return await self.post(msg).result(self.ask_timeout)

    def post(self, msg: Any) -> Reply:
        """The first half of an ask: queue ``msg``; await ``.result(timeout)`` for the answer."""
        reply = Reply(self.name)
        try:
            self._send.send_nowait(_Envelope(msg, reply))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ActorStopped(self.name) from exc
        return reply

    def stop(self) -> None:
        self._send.close()

    def stats(self) -> Stats:
        return Stats(self.name, self.handled, self._recv.statistics().current_buffer_used)
