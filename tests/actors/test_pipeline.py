"""Admissions written while the next rounds run (``actors.pipeline``), on a port whose writes the
test holds back and lets land when it chooses."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from actors.coordinator import Coordinator
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.kube.port import InMemoryPort
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload

pytestmark = pytest.mark.anyio


class HeldPort(InMemoryPort):
    """A pipelined port whose admissions wait for ``gate``; ``refuse`` names workloads whose first
    admission is refused.  ``trace`` is every write, started and finished, in order."""

    instant = False
    pipelined = True

    def __init__(self, *, refuse: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        super().__init__()
        self.gate = anyio.Event()
        self.to_refuse = set(refuse)
        self.trace: list[tuple[str, str]] = []

    async def admit(self, workload: str, **kw: Any) -> bool:
        self.trace.append(("admit?", workload))
        await self.gate.wait()
        if workload in self.to_refuse:
            self.to_refuse.discard(workload)
            self.trace.append(("refused", workload))
            return False
        self.trace.append(("admitted", workload))
        return await super().admit(workload, **kw)

    async def evict(self, workload: str, **kw: Any) -> bool:
        self.trace.append(("evict", workload))
        return await super().evict(workload, **kw)


async def _run(world: World, port: HeldPort, objects: list[dict], *, release_when: Any) -> Coordinator:
    """Apply ``objects``, run to quiescence, and open the port's gate once ``release_when(port)``."""
    coord = Coordinator(world, port, preemptor=make_preemptor, iterate=make_iterate(world))
    async with anyio.create_task_group() as tg:
        await coord.sync_topology(tg)
        for m in objects:
            await coord.apply(m, tg)

        async def release() -> None:
            with anyio.fail_after(5):
                while not release_when(port):
                    await anyio.sleep(0.001)
            port.gate.set()
        tg.start_soon(release)
        with anyio.fail_after(10):
            await coord.run_to_quiescence()
        assert not coord.commits_in_flight  # nothing is left in flight between runs
        coord.stop()
        tg.cancel_scope.cancel()
    return coord


def _one_queue(*names: str) -> list[dict]:
    return [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
            local_queue("lq", "ns", "cq"), *(workload(n, "ns", "lq", created=i, cpu="1") for i, n in enumerate(names))]


async def test_the_next_round_runs_while_the_last_ones_admissions_are_written() -> None:
    world, port = World(), HeldPort()
    # a queue admits one head a round: w1 is decided in the second round, w0's write still held
    coord = await _run(world, port, _one_queue("w0", "w1"),
                       release_when=lambda p: [w for k, w in p.trace if k == "admit?"] == ["ns/w0", "ns/w1"])
    assert port.trace[:2] == [("admit?", "ns/w0"), ("admit?", "ns/w1")]
    assert set(world.placed) == {"ns/w0", "ns/w1"} and coord.admissions == 2


async def test_a_refused_write_gives_the_quota_back_and_the_workload_is_admitted_again() -> None:
    world, port = World(), HeldPort(refuse={"ns/w0"})
    coord = await _run(world, port, _one_queue("w0", "w1", "w2"),
                       release_when=lambda p: len([k for k, _ in p.trace if k == "admit?"]) >= 2)
    # w0's refusal reverted its reservation: room for two, and w0 (first in line) took it back
    assert set(world.placed) == {"ns/w0", "ns/w1"}
    assert ("refused", "ns/w0") in port.trace and port.trace.count(("admitted", "ns/w0")) == 1
    assert coord.admissions == 2
    usage = {name: dict(a.node.usage) for name, a in coord.cluster_queues.items()}
    assert usage["cq"] == {("default", "cpu"): 2000}


def _reclaim() -> list[dict]:
    """cq-a borrows cq-b's only cpu for ``low`` in round one (cq-b's first head, ``huge``, fits
    nowhere); in round two cq-b's ``mine`` takes it back: ``low``'s admission is still being written."""
    return [namespace("ns"), flavor("default"), cohort("co"),
            cluster_queue("cq-a", quotas("default", cpu="0"), cohort="co"),
            cluster_queue("cq-b", quotas("default", cpu="1"), cohort="co",
                          preemption={"reclaimWithinCohort": "Any"}),
            local_queue("a", "ns", "cq-a"), local_queue("b", "ns", "cq-b"),
            workload("huge", "ns", "b", created=0, cpu="5"), workload("low", "ns", "a", created=1, cpu="1"),
            workload("mine", "ns", "b", created=2, cpu="1")]


async def test_an_eviction_waits_until_its_victims_admission_is_written() -> None:
    world, port = World(), HeldPort()
    coord = await _run(world, port, _reclaim(), release_when=lambda p: ("admit?", "ns/low") in p.trace)
    assert port.trace.index(("admitted", "ns/low")) < port.trace.index(("evict", "ns/low"))
    assert "ns/mine" in world.placed and "ns/low" not in world.placed
    assert coord.evicted == {"ns/low": 1}


async def test_a_victim_whose_admission_was_refused_is_not_evicted() -> None:
    world, port = World(), HeldPort(refuse={"ns/low"})
    coord = await _run(world, port, _reclaim(), release_when=lambda p: ("admit?", "ns/low") in p.trace)
    assert ("evict", "ns/low") not in port.trace and not coord.evicted
    # the refused admission gave cq-b's cpu back: mine is admitted, low waits behind it
    assert "ns/mine" in world.placed and "ns/low" not in world.placed
