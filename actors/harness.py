"""The actor engine held open for synchronous callers: tests, a REPL, a notebook.

``simulate`` runs the actors start to finish inside one ``anyio.run``.  A caller that wants
to step the engine (settle, change the World, settle again, look at the balances between)
cannot do that from synchronous code, because the actors live inside a task group.
:class:`LiveEngine` keeps that task group open in a blocking portal (an event loop on
a thread of its own, ``anyio.from_thread``) and forwards each call to the one
:class:`~actors.coordinator.Coordinator`.  It is the same orchestrator ``simulate``
and the daemon run, not a second engine: every decision still comes from the actors'
rounds.

    with LiveEngine(world) as engine:
        engine.run()
        world.apply(manifest)
        engine.rebuild()
        engine.run()
        engine.state.cluster_queues["a"].node.usage
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal

from actors.coordinator import Coordinator
from kueued.engine.wiring import PreemptorFactory, make_preemptor
from kueued.kube.port import ApiPort, InMemoryPort
from kueued.scheduling.cycle import Iterate
from kueued.scheduling.snapshot import Snapshot
from kueued.world import World

__all__ = ["LiveEngine"]


class LiveEngine:
    """One Coordinator and its actors, alive between synchronous calls (a context manager)."""

    def __init__(self, world: World, *, port: ApiPort | None = None,
                 preemptor: PreemptorFactory = make_preemptor, iterate: Iterate | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.world = world
        self.coordinator = Coordinator(world, port if port is not None else InMemoryPort(),
                                       preemptor=preemptor,
                                       iterate=iterate)
        self.coordinator.clock = clock
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._tg: TaskGroup | None = None
        self._done: anyio.Event | None = None
        self.final: Snapshot | None = None  # the balances when the block ended

    def __enter__(self) -> LiveEngine:
        self._portal = self._stack.enter_context(start_blocking_portal())
        self._tg = self._portal.start_task(self._hold)[1]
        self.rebuild()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._portal is not None and self._done is not None:
                self.final = self._portal.call(self.coordinator.assemble)
                self._portal.call(self._release)
        finally:
            self._stack.close()

    async def _hold(self, *, task_status: TaskStatus[TaskGroup]) -> None:
        self._done = anyio.Event()
        async with anyio.create_task_group() as tg:
            task_status.started(tg)
            await self._done.wait()
            self.coordinator.stop()

    async def _release(self) -> None:
        assert self._done is not None
        self._done.set()

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._portal is None or self.final is not None:
            raise RuntimeError("LiveEngine is used outside its 'with' block")
        return self._portal.call(lambda: fn(*args, **kwargs))

    # --- what a caller does ---------------------------------------------------------------
    def rebuild(self) -> None:
        """Take in the World as it is now: topology, routing, every workload not yet placed."""
        self._call(self.coordinator.sync_topology, self._tg)

    def apply(self, manifest: dict) -> None:
        """One object, as a watch event reaches the daemon."""
        self._call(self.coordinator.apply, manifest, self._tg)

    def delete(self, manifest: dict) -> None:
        self._call(self.coordinator.delete, manifest, self._tg)

    def finish(self, key: str) -> None:
        self._call(self.coordinator.finish, key)

    def run(self, *, max_cycles: int = 100_000) -> int:
        """Rounds until one changes nothing (at most ``max_cycles``); returns how many ran."""
        return int(self._call(self.coordinator.run_to_quiescence, max_rounds=max_cycles))

    # --- what a caller reads --------------------------------------------------------------
    @property
    def state(self) -> Snapshot:
        """The balances and admitted sets the actors hold now (assembled from their reports),
        or when the ``with`` block ended."""
        if self.final is not None:
            return self.final
        snap = self._call(self.coordinator.assemble)
        assert isinstance(snap, Snapshot)
        return snap

    @property
    def cycles(self) -> int:
        return self.coordinator.rounds

    @property
    def events(self) -> list[tuple[str, str, str, str]]:
        return list(self.coordinator.events)

    @property
    def reasons(self) -> dict[str, str]:
        return self.coordinator.reasons

    @property
    def unrouted(self) -> dict[str, str]:
        return self.coordinator.unrouted

    @property
    def afs(self) -> Any:
        return self.coordinator.afs

    def pending(self, cluster_queue: str) -> list[Any]:
        """The workloads a ClusterQueue holds pending, in Kueue's order (priority, then age),
        once every requeue sent to it has landed."""
        actor = self.coordinator.cluster_queues[cluster_queue]
        self._call(actor.drain)
        return sorted(actor.queue.pending(), key=lambda w: (-w.priority, w.created, w.uid))

    def usage_of(self, cluster_queue: str) -> Callable[..., float] | None:
        """The queue-order hook a ClusterQueue's heap ranks its LocalQueues by (None: FIFO)."""
        return self.coordinator.cluster_queues[cluster_queue].queue.usage_of
