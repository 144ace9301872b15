"""``simulate`` on the actor engine: a World in, a Report out."""

from __future__ import annotations

import anyio

from actors.coordinator import simulate_world
from kueued.kube.port import InMemoryPort
from kueued.scheduling.run import make_iterate, make_preemptor, merge_elastic
from kueued.simulate import Report, report_from
from kueued.world import World


def run_actors(world: World) -> Report:
    async def main():
        coord = await simulate_world(world, InMemoryPort(), preemptor=make_preemptor,
                                     iterate=make_iterate(world))
        return coord, coord.final
    coord, final = anyio.run(main)
    report = report_from(world, reasons=coord.reasons, unrouted=coord.unrouted, events=coord.events,
                         cycles=coord.rounds, snapshot=final)
    merge_elastic(world, report)
    return report
