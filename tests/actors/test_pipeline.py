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


async def _until(coord: Coordinator, port: HeldPort, *, release_when: Any) -> None:
    async def release() -> None:
        with anyio.fail_after(5):
            while not release_when(port):
                await anyio.sleep(0.001)
        port.gate.set()
    async with anyio.create_task_group() as tg:
        tg.start_soon(release)
        with anyio.fail_after(10):
            await coord.run_to_quiescence()


async def test_a_round_that_admits_is_a_successful_attempt_though_its_write_lands_later() -> None:
    """Kueue counts a cycle that assumed a workload as a success (kueue_admission_attempts_total)."""
    world, port = World(), HeldPort()
    coord = Coordinator(world, port, preemptor=make_preemptor)
    async with anyio.create_task_group() as tg:
        await coord.sync_topology(tg)
        for m in _one_queue("w0"):
            await coord.apply(m, tg)
        await _until(coord, port, release_when=lambda p: bool(p.trace))
        coord.stop()
        tg.cancel_scope.cancel()
    assert "ns/w0" in world.placed and [ok for ok, _ in coord.attempts] == [True]


async def test_one_admission_a_round_still_keeps_the_writes_in_flight_bounded() -> None:
    """A one-queue backlog grants one head a round: each round's single write goes through the
    shared limiter too, so no more than COMMITS_IN_FLIGHT are ever outstanding."""
    from actors.commits import COMMITS_IN_FLIGHT
    n = COMMITS_IN_FLIGHT + 20
    world, port = World(), HeldPort()
    live, peak = [0], [0]
    admit = port.admit

    async def counted(workload: str, **kw: Any) -> bool:
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        try:
            return await admit(workload, **kw)
        finally:
            live[0] -= 1
    port.admit = counted  # type: ignore[method-assign]
    objects = [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu=str(n))),
               local_queue("lq", "ns", "cq"), *(workload(f"w{i}", "ns", "lq", created=i, cpu="1") for i in range(n))]
    coord = Coordinator(world, port, preemptor=make_preemptor)
    async with anyio.create_task_group() as tg:
        await coord.sync_topology(tg)
        for m in objects:
            await coord.apply(m, tg)
        await _until(coord, port, release_when=lambda p: len(p.trace) >= COMMITS_IN_FLIGHT)
        coord.stop()
        tg.cancel_scope.cancel()
    assert len(world.placed) == n and peak[0] == COMMITS_IN_FLIGHT


async def test_a_refusal_seen_at_a_round_s_start_ends_the_daemon_s_run_before_deciding_again() -> None:
    """With ``stop_on_refusal`` (the daemon) a refused write must be followed by the watch's newer
    version, not by a second write on the same stale one in the very round that saw the refusal."""
    world, port = World(), HeldPort(refuse={"ns/w0"})
    port.gate.set()
    coord = Coordinator(world, port, preemptor=make_preemptor)
    coord.stop_on_refusal = True
    async with anyio.create_task_group() as tg:
        await coord.sync_topology(tg)
        for m in _one_queue("w0"):
            await coord.apply(m, tg)
        await coord.round()  # w0 granted, its write in a task
        await anyio.sleep(0.01)  # the refusal lands
        assert await coord.round()  # settles it, and stops there
        in_flight = coord.commits_in_flight
        coord.stop()
        tg.cancel_scope.cancel()
    assert coord.refused_in_round and not in_flight
    assert port.trace == [("admit?", "ns/w0"), ("refused", "ns/w0")]  # not granted again on the stale version


async def test_a_queue_reaped_mid_run_never_queues_a_workload_being_written_again() -> None:
    """A deleted ClusterQueue whose last workload is drained (its first eviction refused, retried the
    next round) is reaped mid-run, rebuilding the tree while another queue's admission is written:
    that workload must not be routed into its queue again (it was written twice, charged twice)."""
    import copy

    class Port(HeldPort):
        evict_refusals = 1

        async def evict(self, workload: str, **kw: Any) -> bool:
            if self.evict_refusals:
                self.evict_refusals -= 1
                return False
            return await super().evict(workload, **kw)

    world, port = World(), Port()
    port.gate.set()
    old_cq, o1 = cluster_queue("old", quotas("default", cpu="1")), workload("o1", "ns", "lo", created=0, cpu="1")
    coord = Coordinator(world, port, preemptor=make_preemptor)
    async with anyio.create_task_group() as tg:
        await coord.sync_topology(tg)
        for m in [namespace("ns"), flavor("default"), old_cq, local_queue("lo", "ns", "old"), o1,
                  cluster_queue("cq", quotas("default", cpu="2")), local_queue("lq", "ns", "cq")]:
            await coord.apply(m, tg)
        await coord.run_to_quiescence()
        port.gate = anyio.Event()
        await coord.delete(old_cq, tg)  # terminating: o1 still holds quota there
        off = copy.deepcopy(o1)
        off["spec"]["active"] = False
        await coord.apply(off, tg)
        await coord.apply(workload("w0", "ns", "lq", created=1, cpu="1"), tg)
        await _until(coord, port, release_when=lambda p: ("admit?", "ns/w0") in p.trace)
        usage = dict(coord.cluster_queues["cq"].node.usage)
        coord.stop()
        tg.cancel_scope.cancel()
    assert "old" not in world.cluster_queues  # reaped
    assert port.trace.count(("admit?", "ns/w0")) == 1 and usage == {("default", "cpu"): 1000}


@pytest.mark.parametrize("afs", [False, True])
async def test_admission_fair_sharing_waits_for_each_round_s_writes(afs: bool) -> None:
    """AFS charges a LocalQueue's entry penalty once an admission is committed, and orders the next
    round by it: under it a round's writes land within the round, as they would on an instant port."""
    world, port = World(), HeldPort()
    port.gate.set()
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "admissionFairSharing": {"usageHalfLifeTime": "1h", "usageSamplingInterval": "5m"}}
    coord = Coordinator(world, port, preemptor=make_preemptor)
    async with anyio.create_task_group() as tg:
        await coord.sync_topology(tg)
        for m in [config] * afs + _one_queue("w0"):
            await coord.apply(m, tg)
        await coord.round()
        in_flight, placed = coord.commits_in_flight, "ns/w0" in world.placed
        await coord.settle_commits(wait=True)
        coord.stop()
        tg.cancel_scope.cancel()
    assert (in_flight, placed) == ((False, True) if afs else (True, False))
