"""The tree changes while the actors run: updates, shrinks, reparenting, deletions.

Each step applies one object to the running coordinator (as a watch event would),
runs to quiescence, and checks that nothing was admitted beyond what the tree allows
at the time of admission, that nothing crashed, and what the step should change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from actors.coordinator import Coordinator
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.kube.port import InMemoryPort
from kueued.quota import node as qn
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload

FR = ("default", "cpu")


def admitted(world: World) -> set[str]:
    return set(world.placed)


def test_tree_changes_while_running() -> None:
    world = World()

    async def main() -> None:
        coord = Coordinator(world, InMemoryPort(), preemptor=make_preemptor, iterate=make_iterate(world))
        async with anyio.create_task_group() as tg:
            async def step(*manifests, delete=False):
                for m in manifests:
                    await (coord.delete(m, tg) if delete else coord.apply(m, tg))
                await coord.run_to_quiescence()
                snap = await coord.assemble()
                return snap

            base = [namespace("ns"), flavor("default"), cohort("org", quotas("default", cpu="0")),
                    cohort("team-a", parent="org"), cohort("team-b", quotas("default", cpu="4"), parent="org"),
                    cluster_queue("cq-a", quotas("default", cpu="4"), cohort="team-a"),
                    cluster_queue("cq-b", quotas("default", cpu="0"), cohort="team-b"),
                    local_queue("a", "ns", "cq-a"), local_queue("b", "ns", "cq-b")]
            await coord.sync_topology(tg)
            jobs = [workload(f"w{i}", "ns", "a", created=i, cpu="2") for i in range(6)]
            snap = await step(*base, *jobs)
            # cq-a: 4 own + 4 lent by team-b through org = 8 cpu = four workloads
            assert admitted(world) == {"ns/w0", "ns/w1", "ns/w2", "ns/w3"}
            assert qn.violations(snap.nodes()) == []

            # shrink cq-a's quota below its usage: nothing new, nothing evicted, nothing crashes
            snap = await step(cluster_queue("cq-a", quotas("default", cpu="1"), cohort="team-a"))
            assert admitted(world) == {"ns/w0", "ns/w1", "ns/w2", "ns/w3"}
            assert snap.cluster_queues["cq-a"].usage(FR) == 8000

            # a workload finishes (is deleted): usage falls, but still above what cq-a may hold now
            snap = await step(jobs[0], delete=True)
            assert "ns/w0" not in world.workloads
            assert snap.cluster_queues["cq-a"].usage(FR) == 6000
            assert admitted(world) == {"ns/w1", "ns/w2", "ns/w3"}

            # reparent cq-a under team-b, and give team-b more: the tree admits again, within limits
            snap = await step(cohort("team-b", quotas("default", cpu="12"), parent="org"),
                              cluster_queue("cq-a", quotas("default", cpu="1"), cohort="team-b"))
            assert snap.cluster_queues["cq-a"].node.parent.name == "team-b"
            assert admitted(world) == {"ns/w1", "ns/w2", "ns/w3", "ns/w4", "ns/w5"}
            assert qn.violations(snap.nodes()) == []

            # delete a Cohort that cq-b still names: it lives on as an implicit cohort (no quota)
            snap = await step(cohort("team-b", parent="org"), delete=True)
            assert "team-b" in snap.cohorts and not snap.cohorts["team-b"].explicit
            assert snap.cohorts["team-b"].node.subtree.get(FR, 0) == 1000  # only cq-a's nominal
            extra = workload("late", "ns", "b", created=99, cpu="1")
            await step(extra)
            assert "ns/late" not in world.placed  # over quota now: waits, no crash

            # a cycle in the cohort graph: those queues go inactive, the rest keeps working
            snap = await step(cohort("team-b", parent="team-x"), cohort("team-x", parent="team-b"),
                              cluster_queue("cq-c", quotas("default", cpu="2"), cohort="team-a"),
                              local_queue("c", "ns", "cq-c"), workload("elsewhere", "ns", "c", created=100, cpu="2"))
            assert not snap.cluster_queues["cq-a"].active and not snap.cluster_queues["cq-b"].active
            assert snap.cluster_queues["cq-c"].active
            assert "ns/elsewhere" in world.placed
            coord.stop()

    anyio.run(main)


def live(body: Callable[[Coordinator, TaskGroup, World], Awaitable[None]]) -> World:
    """Run ``body`` against a started coordinator on an empty World; returns the World."""
    world = World()

    async def main() -> None:
        coord = Coordinator(world, InMemoryPort(), preemptor=make_preemptor, iterate=make_iterate(world))
        async with anyio.create_task_group() as tg:
            await coord.sync_topology(tg)
            await body(coord, tg, world)
            coord.stop()

    anyio.run(main)
    return world


async def settle(coord: Coordinator, tg: TaskGroup, *manifests: dict) -> None:
    for m in manifests:
        await coord.apply(m, tg)
    await coord.run_to_quiescence()


def test_a_release_still_climbing_lands_before_a_reconfiguration() -> None:
    """A finish releases up the tree as tells; a topology change right after it (no round
    between) leaves every Cohort with exactly what its children still hold: the release
    counted once, before the balances are rebuilt."""
    async def body(coord: Coordinator, tg: TaskGroup, world: World) -> None:
        await settle(coord, tg, namespace("ns"), flavor("default"), cohort("org", quotas("default", cpu="8")),
                     cohort("team", parent="org"), cluster_queue("cq", quotas("default", cpu="0"), cohort="team"),
                     local_queue("lq", "ns", "cq"),
                     *(workload(f"w{i}", "ns", "lq", created=i, cpu="2") for i in range(4)))
        assert admitted(world) == {"ns/w0", "ns/w1", "ns/w2", "ns/w3"}  # all borrowed from org
        await coord.finish("ns/w0")
        await coord.apply(cohort("org", quotas("default", cpu="10")), tg)  # reconfigures at once
        await coord.drain_cohorts()
        usage = {name: a.node.usage.get(FR, 0) for name, a in coord.cohorts.items()}
        assert usage == {"org": 6000, "team": 6000}
        await coord.run_to_quiescence()
        assert qn.violations((await coord.assemble()).nodes()) == []

    live(body)


def test_a_changed_workload_is_taken_out_of_its_own_queue_only() -> None:
    async def body(coord: Coordinator, tg: TaskGroup, world: World) -> None:
        setup = [namespace("ns"), flavor("default")]
        for q in ("a", "b", "c"):
            setup += [cluster_queue(f"cq-{q}", quotas("default", cpu="1")), local_queue(q, "ns", f"cq-{q}")]
        await settle(coord, tg, *setup, workload("big", "ns", "a", created=1, cpu="4"))
        assert admitted(world) == set()  # too big: it waits in cq-a
        handled = {name: a.stats().handled for name, a in coord.cluster_queues.items()}
        await coord.apply(workload("big", "ns", "a", created=1, cpu="1"), tg)  # it shrinks
        after = {name: a.stats().handled for name, a in coord.cluster_queues.items()}
        assert after["cq-b"] == handled["cq-b"] and after["cq-c"] == handled["cq-c"]
        assert after["cq-a"] > handled["cq-a"]
        await coord.run_to_quiescence()
        assert admitted(world) == {"ns/big"}  # the new version, queued once, got in

    live(body)


def test_a_routing_change_moves_pending_workloads_to_their_new_queue() -> None:
    async def body(coord: Coordinator, tg: TaskGroup, world: World) -> None:
        keys = {f"ns/w{i}" for i in range(5)}
        await settle(coord, tg, namespace("ns"), flavor("default"), cluster_queue("small", quotas("default", cpu="1")),
                     cluster_queue("large", quotas("default", cpu="8")), local_queue("lq", "ns", "small"),
                     *(workload(f"w{i}", "ns", "lq", created=i, cpu="4") for i in range(5)))
        assert admitted(world) == set()
        # clusterQueue is immutable: the LocalQueue is deleted and made again, pointing elsewhere
        handled = {name: a.stats().handled for name, a in coord.cluster_queues.items()}
        await coord.delete(local_queue("lq", "ns", "small"), tg)
        assert {wl.key for wl in coord.cluster_queues["small"].queue.pending()} == set()
        assert set(coord.unrouted) == keys
        # one message a queue for the whole pending set, not one per pending workload
        assert {n: a.stats().handled - handled[n] for n, a in coord.cluster_queues.items()} == {"small": 1, "large": 1}
        await coord.apply(local_queue("lq", "ns", "large"), tg)
        assert {wl.key for wl in coord.cluster_queues["large"].queue.pending()} == keys
        await coord.run_to_quiescence()
        assert admitted(world) == {"ns/w0", "ns/w1"}  # 8 cpu: two of the five
        assert {world.placed[k].cluster_queue for k in admitted(world)} == {"large"}

    live(body)


def test_a_new_workload_touches_only_its_own_queue() -> None:
    """Applying one workload places that workload: the others, admitted or waiting, are not
    walked again (a daemon with thousands of workloads would otherwise do that per event)."""
    async def body(coord: Coordinator, tg: TaskGroup, world: World) -> None:
        await settle(coord, tg, namespace("ns"), flavor("default"),
                     cluster_queue("cq-a", quotas("default", cpu="10")), local_queue("a", "ns", "cq-a"),
                     cluster_queue("cq-b", quotas("default", cpu="1")), local_queue("b", "ns", "cq-b"),
                     *(workload(f"a{i}", "ns", "a", created=i, cpu="1") for i in range(12)))
        assert len(admitted(world)) == 10
        handled = {name: a.stats().handled for name, a in coord.cluster_queues.items()}
        await coord.apply(workload("b0", "ns", "b", created=99, cpu="1"), tg)
        assert coord.cluster_queues["cq-a"].stats().handled == handled["cq-a"]
        assert coord.cluster_queues["cq-b"].stats().handled == handled["cq-b"] + 1  # its Enqueue
        await coord.run_to_quiescence()
        assert "ns/b0" in admitted(world) and len(admitted(world)) == 11

    live(body)


def test_an_edit_that_asks_for_nothing_new_keeps_the_admission() -> None:
    """A label (or priority) edit leaves an admitted workload admitted, as in Kueue; a new
    request releases it and queues it again."""
    port_log: list = []

    async def body(coord: Coordinator, tg: TaskGroup, world: World) -> None:
        await settle(coord, tg, namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
                     local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", created=1, cpu="2"),
                     workload("b", "ns", "lq", created=2, cpu="2"))
        assert admitted(world) == {"ns/a"}
        labelled = workload("a", "ns", "lq", created=1, cpu="2")
        labelled["metadata"]["labels"] = {"team": "x"}
        await settle(coord, tg, labelled)
        assert admitted(world) == {"ns/a"} and world.workloads["ns/a"].obj.metadata.labels == {"team": "x"}
        snap = await coord.assemble()
        assert snap.cluster_queues["cq"].usage(FR) == 2000
        assert snap.cluster_queues["cq"].workloads["ns/a"].spec is world.workloads["ns/a"]  # the new version is held
        port_log.extend(c.workload for c in coord.port.log if c.kind == "admit")
        await settle(coord, tg, workload("a", "ns", "lq", created=1, cpu="1"))  # asks for less: released
        assert admitted(world) == {"ns/a"}  # readmitted at once (older than b, which still waits)
        assert [c.workload for c in coord.port.log if c.kind == "admit"] == ["ns/a", "ns/a"]

    live(body)
    assert port_log == ["ns/a"]  # the label edit committed nothing
