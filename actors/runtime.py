"""A small actor runtime on anyio: a mailbox per actor, one-shot replies.

An :class:`Actor` owns its state and a mailbox; ``run()`` only receives and
dispatches to ``handle`` (plain or async), so every state change is a method a test
can call without an event loop.  ``tell`` posts and forgets; ``ask`` posts with a
one-shot reply slot and waits (with a timeout): a handler's exception travels back
to the asker, not into the actor's grave.  Stopping closes the mailbox; messages still
in it are still answered, and an ``ask`` after that gets :class:`ActorStopped`; if the
actor is cancelled instead, what is left in its mailbox is failed the same way.

The reply slot is a :class:`Reply`: a value and a one-shot :class:`_Signal`, not a memory
stream (a stream pair per ask was a third of the coordinator's cost at a thousand
ClusterQueues).  The mailbox is a :class:`_Mailbox`: a deque, and a signal
made only while the actor waits on an empty one (an anyio memory object stream did the
same with more bookkeeping per message).  ``post`` + ``Reply.result`` split an ask, so
a coordinator can ask every actor of a round first and then collect the answers in
order (each actor still handles its messages one at a time, in mailbox order).

``defer`` is a tell without a wake-up of its own: it rides on the next message posted
to the actor and is handled just before it, where a ``tell`` sent now would be.  The
coordinator's per-round requeues (one per queue) travel on the next round's ``Nominate``
instead of waking every queue twice a round.  ``drain`` waits until everything sent or
deferred so far is handled, for an owner about to read an actor's state directly.

*Handling at once.*  An actor class may set ``handles_at_once``: a message posted or told
to such an actor while it sits idle (waiting on an empty mailbox, not inside a handler)
is handled right there, in the sender's task, instead of waking the actor's task for it.
Nothing can tell the difference: the actor still handles one message at a time, in the
order sent (its mailbox was empty and nothing was deferred ahead of the message), and the
reply is settled before ``post`` returns, so the asker does not wait at all.  A handler
that has to wait (it returns a coroutine: a borrow request climbing the tree) is not run
there: the coroutine, not yet started, goes to the actor's task as the first message in
its mailbox, with whatever came with it.  At a thousand ClusterQueues a round asks every
queue and most are idle, so most of a round's messages become calls (one task wake-up
and one future fewer each).  An actor busy with a message, or whose task is suspended
in a handler, takes the next one through its mailbox as before, so a message that comes
back round (a parent telling the child that is telling it) never re-enters a handler.

Quiescence needs no sleeping: what the coordinator starts is an ``ask`` it awaits, a
``tell`` that sits ahead of its next ask to the same actor, or a posted ask it collects
before the next round reads a balance, so when a round returns no message is in flight.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections import deque
from types import GeneratorType
from typing import Any, ClassVar

import anyio
from anyio.abc import TaskStatus
from mypy_extensions import mypyc_attr

from actors.errors import ActorStopped

__all__ = ["Actor", "ActorStopped", "Reply", "Stats"]


class _Signal:
    """A one-shot wake-up for one waiter.

    On asyncio it is a bare future of the running loop (anyio's ``Event`` wraps an
    ``asyncio.Event``, which makes a future per waiter anyway: a third of the cost of a
    wake-up at a thousand actors); on any other anyio backend it is an ``anyio.Event``.
    """

    __slots__ = ("_future", "_event")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._future = loop.create_future() if loop is not None else None
        self._event = anyio.Event() if loop is None else None

    def set(self) -> None:
        f = self._future
        if f is None:
            self._event.set()  # type: ignore[union-attr]
        elif not f.done():  # a cancelled waiter leaves a cancelled future
            f.set_result(None)

    async def wait(self) -> None:
        if self._future is not None:
            await self._future
        else:
            await self._event.wait()  # type: ignore[union-attr]


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None on another anyio backend (no asyncio loop runs)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Reply:
    """The one answer to an ask: set once by the actor, awaited by the asker.

    The wake-up is made only when the asker has to wait: a reply read after the actor
    answered (the later replies of a round) costs no signal and no timer.  A finite
    timeout puts the wait in a cancel scope; an infinite one (a borrow request chained
    up the tree, inside an ask that has a timeout of its own) waits without one.
    """

    __slots__ = ("actor", "_signal", "_loop", "done", "ok", "value")

    def __init__(self, actor: str, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.actor = actor
        self._loop = loop
        self._signal: _Signal | None = None
        self.done = False
        self.ok = False
        self.value: Any = None

    def settle(self, ok: bool, value: Any) -> None:
        if not self.done:
            self.done, self.ok, self.value = True, ok, value
            if self._signal is not None:
                self._signal.set()

    async def result(self, timeout: float = math.inf) -> Any:
        if not self.done:
            self._signal = _Signal(self._loop)  # no await since the check: settle sees it
            if timeout == math.inf:
                await self._signal.wait()
            else:
                with anyio.fail_after(timeout):
                    await self._signal.wait()
        if not self.ok:
            raise self.value
        return self.value


class _Envelope:
    __slots__ = ("msg", "reply", "before", "started")

    def __init__(self, msg: Any, reply: Reply | None, before: list[Any] | None = None,
                 started: Any = None) -> None:
        self.msg = msg
        self.reply = reply
        self.before = before  # deferred tells, handled first (Actor.defer)
        # a handler's coroutine, made (not started) when the message was handled at once;
        # it is ``before[0]``'s when ``before`` is still to come, else ``msg``'s
        self.started = started


_FLUSH = object()
"""A message the runtime answers itself: it only carries deferred tells (``Actor.drain``)."""


class Stats:
    __slots__ = ("name", "handled", "mailbox")

    def __init__(self, name: str, handled: int, mailbox: int) -> None:
        self.name = name
        self.handled = handled
        self.mailbox = mailbox


class _Mailbox:
    """Envelopes in arrival order; ``get`` waits while it is empty and open."""

    __slots__ = ("_items", "_wakeup", "closed", "loop")

    def __init__(self) -> None:
        self._items: deque[_Envelope] = deque()
        self._wakeup: _Signal | None = None
        self.closed = False
        self.loop: asyncio.AbstractEventLoop | None = None  # set once the actor runs (asyncio only)

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
            self._wakeup = _Signal(self.loop)
            await self._wakeup.wait()
        return self._items.popleft()

    @property
    def idle(self) -> bool:
        """Is the owner waiting in :meth:`get` on an empty mailbox (not inside a handler)?"""
        return self._wakeup is not None

    def take_all(self) -> list[_Envelope]:
        items = list(self._items)
        self._items.clear()
        return items

    def __len__(self) -> int:
        return len(self._items)


# Subclassed outside the compiled modules (the elastic quota actors, tests): see kueued/native.py.
@mypyc_attr(allow_interpreted_subclasses=True)
class Actor:
    ask_timeout: ClassVar[float] = 60.0
    handles_at_once: ClassVar[bool] = False  # see the module docstring

    def __init__(self, name: str) -> None:
        self.name = name
        self._mailbox = _Mailbox()
        self._deferred: list[Any] | None = None
        self._busy = False  # inside a handler run at once
        self.handled = 0
        self.reads = 0  # of those, the ones a handler counted as only reading its state (unchanged_since)

    # --- the shell ---------------------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        mailbox = self._mailbox
        mailbox.loop = _asyncio_loop()
        task_status.started()
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
        started = env.started
        if env.before is not None:
            for msg in env.before:  # deferred tells: a failure is the actor's, as a tell's is
                if started is not None:  # this one was handled at once and has to wait
                    result, started = started, None
                else:
                    self.handled += 1
                    result = self.handle(msg)
                if _awaitable(result):
                    await result
        if env.msg is _FLUSH:
            if env.reply is not None:
                env.reply.settle(True, None)
            return
        try:
            if started is not None:
                result = started
            else:
                self.handled += 1
                result = self.handle(env.msg)
            if _awaitable(result):
                result = await result
            ok, value = True, result
        except Exception as exc:  # the asker gets it; the actor lives on
            if env.reply is None:
                raise
            ok, value = False, exc
        if env.reply is not None:
            env.reply.settle(ok, value)

    def _at_once(self, env: _Envelope) -> None:
        """Handle ``env`` in the sender's task (the actor is idle); a handler that returns a
        coroutine hands it, with what is left of the envelope, to the actor's task."""
        self._busy = True
        try:
            before = env.before
            if before is not None:
                for i, msg in enumerate(before):
                    self.handled += 1
                    result = self.handle(msg)
                    if _awaitable(result):
                        self._mailbox.put(_Envelope(env.msg, env.reply, before[i:], result))
                        return
            if env.msg is _FLUSH:
                if env.reply is not None:
                    env.reply.settle(True, None)
                return
            self.handled += 1
            try:
                result = self.handle(env.msg)
            except Exception as exc:
                if env.reply is None:
                    raise
                env.reply.settle(False, exc)
                return
            if _awaitable(result):
                self._mailbox.put(_Envelope(env.msg, env.reply, None, result))
            elif env.reply is not None:
                env.reply.settle(True, result)
        finally:
            self._busy = False

    def _deliver(self, env: _Envelope) -> None:
        mailbox = self._mailbox
        if self.handles_at_once and mailbox.idle and not self._busy:
            self._at_once(env)
        else:
            mailbox.put(env)

    def handle(self, msg: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- talking to it -----------------------------------------------------------------------
    def tell(self, msg: Any) -> None:
        if self._mailbox.closed:
            raise ActorStopped(self.name)
        before, self._deferred = self._deferred, None
        self._deliver(_Envelope(msg, None, before))

    def defer(self, msg: Any) -> None:
        """A tell that travels with the next message posted to this actor.

        It is handled before that message, exactly where a ``tell`` now would be, but
        costs no wake-up of its own: a round's requeues ride on the next round's ask.
        """
        if self._mailbox.closed:
            raise ActorStopped(self.name)
        if self._deferred is None:
            self._deferred = [msg]
        else:
            self._deferred.append(msg)

    @property
    def deferring(self) -> bool:
        """Are tells deferred to this actor still waiting for a message to ride on?"""
        return self._deferred is not None

    async def drain(self) -> None:
        """Wait until the actor has handled everything sent or deferred to it so far (before
        the owner reads its state directly, as a topology change does)."""
        await self.post(_FLUSH).result(self.ask_timeout)

    async def ask(self, msg: Any) -> Any:
        return await self.post(msg).result(self.ask_timeout)

    def post(self, msg: Any) -> Reply:
        """The first half of an ask: queue ``msg``; await ``.result(timeout)`` for the answer."""
        if self._mailbox.closed:
            raise ActorStopped(self.name)
        reply = Reply(self.name, self._mailbox.loop)
        before, self._deferred = self._deferred, None
        self._deliver(_Envelope(msg, reply, before))
        return reply

    def stop(self) -> None:
        if self._deferred is not None and not self._mailbox.closed:
            self.tell(_FLUSH)  # deferred tells are handled before the mailbox closes
        self._mailbox.close()

    def stats(self) -> Stats:
        return Stats(self.name, self.handled, len(self._mailbox))

    @property
    def changes(self) -> int:
        """The messages handled that may have changed its state: all but those its handler counted
        in ``reads`` (a balance report or a statistics sample, asked by whoever reads it)."""
        return self.handled - self.reads

    def unchanged_since(self, changes: int) -> bool:
        """Has the actor handled nothing that may change it since its :attr:`changes` read ``changes``,
        with nothing queued, deferred or half-handled (a handler's coroutine awaiting) for it?  Its
        state is only ever changed by handling a message, so an answer it gave then still holds."""
        return (self.changes == changes and self._deferred is None and self._mailbox.idle
                and not self._busy)


_AWAITABLE: dict[type, bool] = {}


def _awaitable(value: Any) -> bool:
    """``inspect.isawaitable``, answered once per type: a handler returns a plain value or a
    coroutine, and the ABC check, run on every message, was 3 % of a contended benchmark.
    (A generator is awaitable or not by its code's flags, so it is always asked.)"""
    kind = type(value)
    known = _AWAITABLE.get(kind)
    if known is None:
        known = inspect.isawaitable(value)
        if kind is not GeneratorType:
            _AWAITABLE[kind] = known
    return known
