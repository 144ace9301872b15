"""The elastic tree while it runs: workloads, groups and Nodes come, change and go.

The coordinator is synced to a World after every change (as the daemon does) and run to
quiescence.  Whatever happened, the tree must hold exactly the World's elastic workloads,
never admit one twice, and show the requests and runtimes the pure computation gives for
the World as it is now; once forced recycling has had its delay, no leaf keeps more
admitted than its runtime (beyond what it may never evict).
"""

from __future__ import annotations

import copy
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.elastic import ElasticCoordinator
from kueued.engine.wiring import elastic_inputs
from kueued.kube.port import Committed, InMemoryPort
from kueued.model import koordinator as k
from kueued.quota.elastic import OUTSIDE_TREE, GroupQuota, compute_runtime, implicit_cluster_total, sum_resources
from kueued.scheduling.elastic import ElasticOutcome, prepare
from kueued.scheduling.elastic_victims import exceeded
from kueued.world import Change, World
from tests.actors.test_elastic_actors import elastic_inputs_st
from tests.elastic.builders import EQ, WL, configuration, node

DELAY = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def expected(world: World, outcome: ElasticOutcome) -> dict[str, GroupQuota]:
    """compute_runtime for the World as it is now (the outside groups' usage from ``outcome``)."""
    setup = prepare(*(elastic_inputs(world) or ([], [], list(world.nodes.values()))))
    states = setup.states()
    own = {n: s.own_request() for n, s in states.items() if not s.inner}
    requests = {w.key: w.request for w in setup.workloads}
    outside = sum_resources(requests[key] for key, r in outcome.workloads.items()
                            if r.state == "admitted" and r.cluster_queue in OUTSIDE_TREE)
    total = implicit_cluster_total(setup.groups) if setup.node_total is None else dict(setup.node_total)
    for r, v in outside.items():
        total[r] = total.get(r, 0) - v  # what the system and default groups use, Nodes or not
    return compute_runtime(setup.groups, own, total)


def check(world: World, outcome: ElasticOutcome, log: list[Committed], admitted_at_start: set[str]) -> None:
    # every elastic workload of the World is held exactly once, nothing else
    inputs = elastic_inputs(world)
    live = {f"{(w['metadata'].get('namespace') or 'default')}/{w['metadata']['name']}" for w in inputs[1]} \
        if inputs is not None else set()
    assert set(outcome.workloads) == live
    # admissions and evictions alternate per workload: never admitted twice
    state = {key: "admit" for key in admitted_at_start}
    for c in log:
        assert state.get(c.workload, "evict") != c.kind, (c, log)
        state[c.workload] = c.kind
    # the outcome lists every eviction committed so far, in order, across rebuilds
    assert [e.workload for e in outcome.evictions] == [c.workload for c in log if c.kind == "evict"]
    # the tree shows what the pure computation gives for the World as it is now
    want = expected(world, outcome)
    for name, g in outcome.quota_groups.items():
        assert (g.request, g.runtime) == (want[name].request, want[name].runtime), name


async def settle(coord: ElasticCoordinator, world: World) -> ElasticOutcome:
    await coord.sync_world(world)
    await coord.run_to_quiescence()
    return await coord.outcome()


# --- one story, step by step -----------------------------------------------------------------------
def test_groups_added_changed_reparented_and_removed_while_running() -> None:
    world = World()
    port = InMemoryPort()
    base = [EQ("cluster").cluster(cpu="14").build(),
            EQ("team-a").parent("cluster").min(cpu="4").max(cpu="14").build(),
            EQ("team-b").parent("cluster").min(cpu="6").max(cpu="14").build()]
    jobs = [WL("a1", "team-a").req(cpu="4").at(1).build(), WL("a2", "team-a").req(cpu="8").at(2).build(),
            WL("b1", "team-b").req(cpu="3").at(3).build()]

    async def main() -> list[Any]:
        coord = ElasticCoordinator(prepare([], [], []), port)
        seen: list[Any] = []

        async def step(*manifests: dict, delete: bool = False) -> ElasticOutcome:
            for m in manifests:
                change, _ = world.delete(m) if delete else world.apply(m)
                seen.append(change)
            out = await settle(coord, world)
            check(world, out, port.log, set())
            return out

        async with anyio.create_task_group() as tg:
            try:
                await coord.start(tg)
                out = await step(*base, *jobs)
                # b asks 3 and lends the rest of its 6: a gets 11 of 14; a1 fits, a2 not beside it
                assert out.quota_groups["team-a"].runtime == {"cpu": 11000}
                assert {key for key, r in out.workloads.items() if r.state == "admitted"} == {
                    "default/a1", "default/b1"}

                # a new group that does not lend takes its min out of what a could borrow
                out = await step(EQ("team-c").parent("cluster").min(cpu="2").max(cpu="4").no_lend().build())
                assert seen[-1] is Change.ELASTIC
                assert out.quota_groups["team-c"].runtime == {"cpu": 2000}
                assert out.quota_groups["team-a"].runtime == {"cpu": 9000}

                # a parent group appears, and team-c moves under it (safe: dept's min covers team-c's)
                dept = EQ("dept").parent("cluster").is_parent().min(cpu="2").max(cpu="14").build()
                out = await step(dept, EQ("team-c").parent("dept").min(cpu="2").max(cpu="4").no_lend().build())
                assert seen[-2:] == [Change.ELASTIC, Change.ELASTIC]
                assert out.quota_groups["team-c"].runtime == {"cpu": 2000}

                # an unsafe move is refused (dept's min cannot hold team-a's too): team-a stays where it was
                out = await step(EQ("team-a").parent("dept").min(cpu="4").max(cpu="14").build())
                assert seen[-1] is Change.REJECTED
                assert "dept" in world.rejected["ElasticQuota/kube-system/team-a"]
                assert {key for key, r in out.workloads.items() if r.state == "admitted"} == {
                    "default/a1", "default/b1"}

                # deleting a group with workloads is refused; an empty leaf, then its empty parent, go
                await step(base[1], delete=True)
                assert seen[-1] is Change.REJECTED
                out = await step(EQ("team-c").build(), delete=True)
                out = await step(dept, delete=True)
                assert seen[-2:] == [Change.ELASTIC, Change.ELASTIC]
                assert "team-c" not in out.quota_groups and "dept" not in out.quota_groups
                # with c gone, a borrows its 2 back: 11, and a2 still does not fit beside a1
                assert out.quota_groups["team-a"].runtime == {"cpu": 11000}

                # a finishes: a2 fits in what a1 leaves
                out = await step(jobs[0], delete=True)
                assert out.workloads["default/a2"].state == "admitted"
            finally:
                coord.stop()
        return seen

    anyio.run(main)
    assert [c.workload for c in port.log if c.kind == "admit"] == ["default/a1", "default/b1", "default/a2"]


# --- any sequence ------------------------------------------------------------------------------------
ops = st.one_of(
    st.tuples(st.just("arrive"), st.integers(0, 7), st.integers(0, 12), st.integers(0, 6), st.integers(0, 3),
              st.booleans()),
    st.tuples(st.just("finish"), st.integers(0, 63)),
    st.tuples(st.just("max"), st.integers(0, 7), st.integers(0, 16)),
    st.tuples(st.just("min"), st.integers(0, 7), st.integers(0, 8)),
    st.tuples(st.just("node"), st.integers(0, 24)),
    st.tuples(st.just("tick")),
)


def _resized(manifest: dict, field: str, cpu: int) -> dict:
    out = copy.deepcopy(manifest)
    out.setdefault("spec", {}).setdefault(field, {})["cpu"] = str(cpu)
    return out


@settings(max_examples=150, deadline=None)
@given(elastic_inputs_st(max_groups=5, max_workloads=8), st.lists(ops, max_size=10), st.booleans())
def test_any_sequence_of_changes_keeps_the_tree_consistent(case, steps, force) -> None:
    quotas, workloads, nodes, tree = case
    names = sorted(tree)
    if force:  # allow-force-update: the min sums are not checked, fewer changes are refused
        for q in quotas:
            q["metadata"]["labels"][k.LABEL_ALLOW_FORCE_UPDATE] = "true"
    world = World()
    port = InMemoryPort()
    clock = Clock()
    for m in [configuration(delay_evict_time=f"{DELAY:g}s"), *quotas, *nodes, *workloads]:
        world.apply(m)
    admitted_at_start = {f"default/{w['metadata']['name']}" for w in workloads if w.get("status")}
    arrived = iter(range(1_000))

    def apply(op: tuple) -> None:
        match op:
            case ("arrive", i, cpu, mem, prio, non_preemptible):
                wl = WL(f"late-{next(arrived)}", (names + ["elsewhere"] * 3)[i % (len(names) + 3)])
                wl.req(cpu=f"{cpu * 500}m", memory=str(mem)).priority(prio)
                if non_preemptible:
                    wl.non_preemptible()
                world.apply(wl.build())
            case ("finish", i):
                live = sorted(key for key in world.raw if key.startswith("Workload/"))
                if live:
                    world.delete(world.raw[live[i % len(live)]])
            case ("max" | "min" as field, i, cpu):
                current = {k.name_of(q): q for q in world.elastic_quotas.values()}
                name = names[i % len(names)]
                if name in current:
                    world.apply(_resized(current[name], field, cpu))  # refused when it breaks the tree
            case ("node", cpu):
                if cpu == 0:
                    for n in list(world.nodes.values()):
                        world.delete(n)
                else:
                    world.apply(node("n1", cpu=str(cpu), memory="24"))
            case ("tick",):
                clock.now += DELAY

    async def main() -> None:
        coord = ElasticCoordinator(prepare([], [], []), port, clock=clock)
        async with anyio.create_task_group() as tg:
            try:
                await coord.start(tg)
                check(world, await settle(coord, world), port.log, admitted_at_start)
                for op in steps:
                    clock.now += 1
                    apply(op)
                    check(world, await settle(coord, world), port.log, admitted_at_start)
                # let forced recycling have its delay wherever a group is over
                for _ in range(4 * len(world.raw) + 4):
                    due = coord.deadline()
                    if due is None:
                        break
                    clock.now = max(clock.now, due)
                    await coord.run_to_quiescence()
                assert coord.deadline() is None
                out = await coord.outcome()
                check(world, out, port.log, admitted_at_start)
                setup = prepare(*(elastic_inputs(world) or ([], [], [])))
                requests = {w.key: w for w in setup.workloads}
                for name, g in out.quota_groups.items():
                    if name in setup.inner or name == k.SYSTEM_QUOTA:
                        continue
                    held = [requests[key] for key, r in out.workloads.items()
                            if r.state == "admitted" and r.cluster_queue == name]
                    if exceeded(sum_resources(w.request for w in held), g.runtime):
                        assert all(w.non_preemptible for w in held), (name, g.runtime)
            finally:
                coord.stop()

    anyio.run(main)
