"""``simulate`` on the actor engine: manifests or a World in, a Report out, with or without a clock.

This is the one engine: the CLI's ``simulate``, the benchmarks, the tests and the
daemon all run the same :class:`~actors.coordinator.Coordinator` over the same actors.
:func:`simulate` and :func:`simulate_timed` are ``kueued.simulate``'s with this engine
plugged in (that module sits below the actors and names no engine).

Kueue's coordinator and the ElasticQuota coordinator are siblings: their actors start in
one task group, both commit through one API port, and their rounds run side by side
(the two kinds of tree share no quota: a workload carrying the ElasticQuota label is
routed to the elastic tree and never queued in a ClusterQueue).  When both have
settled, the Kueue side's report is assembled and the elastic outcome merged into it.

Without a clock (:func:`run_actors`) the elastic tree runs to quiescence with the forced
recycling delay counted as elapsed.  On a timeline (:func:`run_actors_timed`) workloads
arrive and finish, the elastic coordinator runs on the timeline's clock, and a group over
its runtime is recycled only once ``Settings.delay_evict_time`` has passed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from actors.coordinator import Coordinator
from actors.elastic import ElasticCoordinator
from kueued.engine.wiring import elastic_inputs, make_preemptor
from kueued.kube.port import ApiPort, InMemoryPort
from kueued.scheduling.elastic import ElasticOutcome, prepare
from kueued.simulate import Report, TimedRun, merge_outcome, report_from
from kueued.simulate import simulate as _simulate
from kueued.simulate import simulate_timed as _simulate_timed
from kueued.world import World

__all__ = ["simulate", "simulate_timed", "run_actors", "run_actors_timed", "simulate_world"]


def simulate(manifests: list[dict[str, Any]]) -> Report:
    """Apply the manifests and run them to quiescence on the actors."""
    return _simulate(manifests, runner=run_actors)


def simulate_timed(manifests: list[dict[str, Any]] | Any, *, real: bool = False,
                   progress: Callable[[int, int], None] | None = None, per_workload: bool = True) -> TimedRun:
    """Play a trace (manifests with arrivals and run times, or a ``Trace``) on the actors."""
    return _simulate_timed(manifests, runner=run_actors_timed, real=real, progress=progress,
                           per_workload=per_workload)


def run_actors(world: World) -> Report:
    async def main() -> tuple[Coordinator, ElasticOutcome | None]:
        port = InMemoryPort()
        kueue = Coordinator(world, port, preemptor=make_preemptor)
        inputs = elastic_inputs(world)
        elastic = (ElasticCoordinator(prepare(*inputs), port, recycle=world.settings.monitor_all_quotas is not False)
                   if inputs is not None else None)

        async def settle() -> None:
            async with anyio.create_task_group() as rounds:
                rounds.start_soon(kueue.run_to_quiescence)
                if elastic is not None:
                    rounds.start_soon(elastic.run_to_quiescence)
        return kueue, await _run(kueue, elastic, settle)
    return _report(world, *anyio.run(main))


def run_actors_timed(world: World, timeline: Any, *, real: bool = False,
                     progress: Callable[[int, int], None] | None = None) -> Report:
    """A timed run on the actor engine: both coordinators commit through a TimelinePort."""
    from kueued.timeline import US, CoordinatorDriver, Driver, ElasticDriver, TimelinePort, play

    async def main() -> tuple[Coordinator, ElasticOutcome | None]:
        port: ApiPort = TimelinePort(timeline)
        coord = Coordinator(world, port, preemptor=make_preemptor)
        driver: Driver = CoordinatorDriver(coord, timeline)
        inputs = elastic_inputs(world)
        elastic = None
        if inputs is not None:
            elastic = ElasticCoordinator(prepare(*inputs), port, clock=timeline.clock,
                                         delay=round(world.settings.delay_evict_time * US),
                                         recycle=world.settings.monitor_all_quotas is not False)
            driver = ElasticDriver(driver, elastic)
        return coord, await _run(coord, elastic, lambda: play(driver, real=real, progress=progress))
    return _report(world, *anyio.run(main))


async def _run(kueue: Coordinator, elastic: ElasticCoordinator | None,
               body: Callable[[], Awaitable[None]]) -> ElasticOutcome | None:
    """Start both coordinators' actors in one task group, run ``body``, take the final state,
    stop every actor (structured concurrency: nothing outlives the run)."""
    async with anyio.create_task_group() as tg:
        try:
            await kueue.sync_topology(tg)
            if elastic is not None:
                await elastic.start(tg)
            await body()
            kueue.final = await kueue.assemble()
            outcome = await elastic.outcome() if elastic is not None else None
        finally:
            kueue.stop()
            if elastic is not None:
                elastic.stop()
    return outcome


def _report(world: World, coord: Coordinator, outcome: ElasticOutcome | None) -> Report:
    report = report_from(world, reasons=coord.reasons, unrouted=coord.unrouted, events=list(coord.events),
                         cycles=coord.rounds, snapshot=coord.final, evicted=coord.evicted)
    if outcome is not None:
        merge_outcome(report, outcome)
    return report


async def simulate_world(world: World, port: ApiPort, *, preemptor, iterate=None) -> Coordinator:
    """Start every actor, schedule to quiescence, stop them all (structured concurrency)."""
    coord = Coordinator(world, port, preemptor=preemptor, iterate=iterate)
    async with anyio.create_task_group() as tg:
        await coord.sync_topology(tg)
        await coord.run_to_quiescence()
        coord.final = await coord.assemble()
        coord.stop()
    return coord
