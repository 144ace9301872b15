"""A small actor runtime on anyio memory streams.

An :class:`Actor` owns its state and a mailbox; ``run()`` only receives and
dispatches to ``handle`` (plain or async), so every state change is a method a test
can call without an event loop.  ``tell`` posts and forgets; ``ask`` posts with a
one-shot reply stream and waits (with a timeout): a handler's exception travels back
to the asker, not into the actor's grave.  Stopping closes the mailbox; messages still
in it are still answered, and an ``ask`` after that gets :class:`ActorStopped`.

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

__all__ = ["Actor", "ActorStopped", "Stats"]


class ActorStopped(RuntimeError):
    """The actor stopped before it could answer."""


class _Envelope:
    __slots__ = ("msg", "reply")

    def __init__(self, msg: Any, reply: MemoryObjectSendStream[tuple[bool, Any]] | None) -> None:
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
        async with self._recv:
            async for env in self._recv:
                await self._dispatch(env)
        # closed: nothing left to drain (the stream is empty once iteration ends)

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
            with env.reply:
                try:
                    env.reply.send_nowait((ok, value))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass

    def handle(self, msg: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- talking to it -----------------------------------------------------------------------
    def tell(self, msg: Any) -> None:
        try:
            self._send.send_nowait(_Envelope(msg, None))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ActorStopped(self.name) from exc

    async def ask(self, msg: Any) -> Any:
        send, recv = anyio.create_memory_object_stream[tuple[bool, Any]](1)
        try:
            self._send.send_nowait(_Envelope(msg, send))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            send.close()
            recv.close()
            raise ActorStopped(self.name) from exc
        with anyio.fail_after(self.ask_timeout):
            async with recv:
                try:
                    ok, value = await recv.receive()
                except anyio.EndOfStream as exc:
                    raise ActorStopped(self.name) from exc
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        self._send.close()

    def stats(self) -> Stats:
        return Stats(self.name, self.handled, self._recv.statistics().current_buffer_used)
