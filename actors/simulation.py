"""``simulate`` on the actor engine: a World in, a Report out.

Kueue's coordinator and the ElasticQuota coordinator are siblings: their actors start in
one task group, both commit through one API port, and their rounds run side by side
(the two kinds of tree share no quota: a workload carrying the ElasticQuota label is
routed to the elastic tree and never queued in a ClusterQueue).  When both have
settled, the Kueue side's report is assembled and the elastic outcome merged into it,
exactly as the synchronous engine merges ``run_elastic``'s.
"""

from __future__ import annotations

import anyio

from actors.coordinator import Coordinator
from actors.elastic import ElasticCoordinator
from kueued.kube.port import InMemoryPort
from kueued.scheduling.elastic import ElasticOutcome, prepare
from kueued.scheduling.run import elastic_inputs, make_iterate, make_preemptor, merge_outcome
from kueued.simulate import Report, report_from
from kueued.world import World


def run_actors(world: World) -> Report:
    async def main() -> tuple[Coordinator, ElasticOutcome | None]:
        port = InMemoryPort()
        kueue = Coordinator(world, port, preemptor=make_preemptor, iterate=make_iterate(world))
        inputs = elastic_inputs(world)
        elastic = ElasticCoordinator(prepare(*inputs), port) if inputs is not None else None
        outcome = None
        async with anyio.create_task_group() as tg:
            try:
                await kueue.sync_topology(tg)
                if elastic is not None:
                    await elastic.start(tg)
                async with anyio.create_task_group() as rounds:
                    rounds.start_soon(kueue.run_to_quiescence)
                    if elastic is not None:
                        rounds.start_soon(elastic.run_to_quiescence)
                kueue.final = await kueue.assemble()
                if elastic is not None:
                    outcome = await elastic.outcome()
            finally:
                kueue.stop()
                if elastic is not None:
                    elastic.stop()
        return kueue, outcome
    coord, outcome = anyio.run(main)
    report = report_from(world, reasons=coord.reasons, unrouted=coord.unrouted, events=coord.events,
                         cycles=coord.rounds, snapshot=coord.final)
    if outcome is not None:
        merge_outcome(report, outcome)
    return report
