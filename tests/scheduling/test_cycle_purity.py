"""The pure cycle decides and writes nothing: a workload's scheduling state (whether it waits
for its evictions, whom it evicted, where it is admitted) belongs to the queue that holds it,
which records a round's outcome when the round's messages reach it (``actors.messages.Requeue``)."""

from __future__ import annotations

from actors.harness import LiveEngine
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.scheduling.cycle import run_cycle
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def _state(workloads: list[WorkloadInfo]) -> dict[str, tuple]:
    return {wl.key: (wl.preempting, frozenset(wl.victims), wl.cluster_queue, dict(wl.usage), wl.evictions)
            for wl in workloads}


def test_a_cycle_that_preempts_leaves_every_workload_as_it_found_it() -> None:
    world = World()
    for doc in (namespace("ns"), flavor("default"),
                cluster_queue("cq", quotas("default", cpu="2"), preemption={"withinClusterQueue": "LowerPriority"}),
                local_queue("lq", "ns", "cq"), workload("low", "ns", "lq", cpu="2", priority=1)):
        world.apply(doc)
    with LiveEngine(world) as engine:
        engine.run()
        final = engine.state
    world.apply(workload("high", "ns", "lq", cpu="2", priority=100))
    head = WorkloadInfo(world.workloads["ns/high"])  # as its queue would lend it to a round
    every = [head, *(wl for cq in final.cluster_queues.values() for wl in cq.workloads.values())]
    before = _state(every)
    decisions = []
    for _ in range(2):  # the same question twice: the same answer, as a pure function gives
        snap = final.clone()
        result = run_cycle(snap, [(head, "cq")], preemptor=make_preemptor(snap, world),
                           namespaces=world.namespaces, iterate=make_iterate(world))
        (entry,) = result.entries
        decisions.append((entry.status, [(t.workload.key, t.reason) for t, _ in result.evictions]))
    assert decisions == [("preempting", [("ns/low", "InClusterQueue")])] * 2
    assert _state(every) == before
    assert before["ns/low"][2] == "cq" and before["ns/high"][0] is False
