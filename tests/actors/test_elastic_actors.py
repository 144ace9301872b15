"""ElasticQuota trees on actors: the same decisions as ``run_elastic``, under any interleaving."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.elastic import ElasticCoordinator, Flow, simulate_elastic
from actors.elastic.messages import Hold, Stats
from actors.runtime import Actor
from actors.simulation import simulate
from kueued.engine.wiring import elastic_inputs
from kueued.kube.port import InMemoryPort
from kueued.manifests import load_manifests
from kueued.model import koordinator as k
from kueued.model.koordinator import from_koord_value, koord_value
from kueued.quota.elastic import OUTSIDE_TREE, compute_runtime, implicit_cluster_total, sum_resources
from kueued.scheduling.elastic import PREEMPTED, REVOKED, ElasticOutcome, prepare, run_elastic
from kueued.scheduling.elastic_victims import exceeded
from kueued.world import World
from tests.elastic.builders import EQ, WL, node

SCENARIOS = sorted((Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "scenarios"
                    / "elastic").glob("*.yaml"))


def _actors(quotas, workloads, nodes, port=None) -> ElasticOutcome:
    return anyio.run(lambda: simulate_elastic(quotas, workloads, nodes, port or InMemoryPort()))


def _shuffled_actors(quotas, workloads, nodes, seed: int) -> ElasticOutcome:
    """The actor engine with every tree message delivered in a random order, at random moments."""
    flow = ShuffledFlow(random.Random(seed))

    async def main():
        coord = ElasticCoordinator(prepare(quotas, workloads, nodes), InMemoryPort(), flow=flow)
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(flow.pump)
                await coord.start(tg)
                await coord.run_to_quiescence()
                return await coord.outcome()
            finally:
                coord.stop()
                tg.cancel_scope.cancel()
    return anyio.run(main)


# --- (1) every elastic scenario ----------------------------------------------------------------
@pytest.mark.skipif(not SCENARIOS, reason="../shared/conformance is not beside this checkout")
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_outcome_matches_run_elastic(path: Path) -> None:
    manifests = load_manifests([path])
    world = World()
    for m in manifests:
        world.apply(m)
    inputs = elastic_inputs(world)
    assert inputs is not None
    assert _actors(*inputs) == run_elastic(*inputs)
    # and through `simulate`: the whole report agrees with run_elastic's outcome
    live = simulate(manifests)
    outcome = run_elastic(*inputs)
    assert {k: w.state for k, w in live.workloads.items() if k in outcome.workloads} == {
        k: w.state for k, w in outcome.workloads.items()}
    assert [e["workload"] for e in live.evictions] == [e.workload for e in outcome.evictions]


# --- random trees ------------------------------------------------------------------------------
@st.composite
def elastic_inputs_st(draw, *, max_groups: int = 6, max_workloads: int = 12):
    """A random group tree (every group has cpu and memory in min and max), workloads, maybe Nodes.

    Every workload requests both resources, so forced recycling's running total (masked
    to the taken workload's resources) always covers every resource a group has.
    """
    n = draw(st.integers(1, max_groups))
    names = [f"g{i}" for i in range(n)]
    parents = [draw(st.sampled_from([None, *names[:i]])) for i in range(n)]
    inner = {p for p in parents if p is not None}
    quotas = []
    for name, parent in zip(names, parents, strict=True):
        lo = {r: draw(st.integers(0, 8)) for r in ("cpu", "memory")}
        hi = {r: lo[r] + draw(st.integers(0, 8)) for r in ("cpu", "memory")}
        eq = EQ(name).min(**{r: str(v) for r, v in lo.items()}).max(**{r: str(v) for r, v in hi.items()})
        if parent is not None:
            eq.parent(parent)
        if name in inner:
            eq.is_parent()
        if draw(st.integers(0, 3)) == 0:
            eq.no_lend()
        if draw(st.booleans()):
            eq.weight(cpu=str(draw(st.integers(0, 4))), memory=str(draw(st.integers(0, 4))))
        quotas.append(eq.build())
    leaves = [g for g in names if g not in inner] + ["elsewhere"] * 2  # an unknown quota: the default group
    workloads = []
    for i in range(draw(st.integers(0, max_workloads))):
        wl = WL(f"w{i}", draw(st.sampled_from(leaves))).at(draw(st.integers(0, 5)))
        wl.req(cpu=f"{draw(st.integers(0, 12)) * 500}m", memory=str(draw(st.integers(0, 6))))
        wl.priority(draw(st.integers(0, 3)))
        if draw(st.integers(0, 3)) == 0:
            wl.non_preemptible()
        if draw(st.integers(0, 2)) == 0:
            wl.admitted()
        workloads.append(wl.build())
    nodes = []
    if draw(st.booleans()):  # the default group's admissions then shrink what the tree shares
        nodes = [node("n1", cpu=str(draw(st.integers(2, 24))), memory=str(draw(st.integers(2, 24))))]
    return quotas, workloads, nodes, dict(zip(names, parents, strict=True))


def _parents(tree: dict[str, str | None]) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for child, parent in tree.items():
        kids.setdefault(parent or k.ROOT_QUOTA, []).append(child)
    return kids


# --- (2) the engines agree, and the tree holds ---------------------------------------------------
@settings(max_examples=120, deadline=None)
@given(elastic_inputs_st(), st.integers(0, 2**32))
def test_actor_engine_agrees_with_run_elastic_and_respects_the_tree(case, seed) -> None:
    quotas, workloads, nodes, tree = case
    pure = run_elastic(quotas, workloads, nodes)
    live = _actors(quotas, workloads, nodes)
    assert live == pure
    assert _shuffled_actors(quotas, workloads, nodes, seed) == pure

    setup = prepare(quotas, workloads, nodes)
    requests = {w.key: w for w in setup.workloads}
    groups = live.quota_groups
    # every eviction is listed once; a preemptor is of the victim's group and more important
    assert Counter(e.workload for e in live.evictions) == {
        key: r.preemptions for key, r in live.workloads.items() if r.preemptions}
    for e in live.evictions:
        victim = requests[e.workload]
        if e.by:
            assert e.reason == PREEMPTED, e
            preemptor = requests[e.by]
            assert (preemptor.group, preemptor.priority > victim.priority) == (victim.group, True), e
        else:
            assert e.reason == REVOKED, e
    # at quiescence a leaf is over its runtime only by what recycling cannot remove
    for name, g in groups.items():
        if name in setup.inner or name == k.SYSTEM_QUOTA:
            continue
        admitted = [requests[key] for key, r in live.workloads.items()
                    if r.state == "admitted" and r.cluster_queue == name]
        used = sum_resources(w.request for w in admitted)
        if exceeded(used, g.runtime):
            assert all(w.non_preemptible for w in admitted), (name, used, g.runtime)
    # siblings never share more than their parent has
    if nodes:
        total = sum_resources(k.resource_list(n["status"]["allocatable"]) for n in nodes)
        for outside in OUTSIDE_TREE:
            for r, v in sum_resources(
                requests[key].request for key, res in live.workloads.items()
                if res.state == "admitted" and res.cluster_queue == outside
            ).items():
                total[r] = total.get(r, 0) - v
    else:
        total = implicit_cluster_total(setup.groups)
    root_share = {r: from_koord_value(r, max(koord_value(r, v), 0)) for r, v in total.items()}
    for parent, kids in _parents(tree).items():
        have = root_share if parent == k.ROOT_QUOTA else groups[parent].runtime
        for r, limit in have.items():
            assert sum(groups[c].runtime.get(r, 0) for c in kids) <= limit, (parent, r)


# --- (3) requests and runtimes under any delivery order -------------------------------------------
class ShuffledFlow(Flow):
    """Holds every told message and delivers them one at a time, in an order drawn by the test.

    Messages between the same two actors may overtake each other, which a mailbox never
    allows: the tree must converge all the same.
    """

    def __init__(self, rnd: random.Random) -> None:
        super().__init__()
        self.rnd = rnd
        self.held: list[tuple[Actor, object]] = []
        self._wake: anyio.Event | None = None

    def deliver(self, actor: Actor, msg: object) -> None:
        self.held.append((actor, msg))
        if self._wake is not None:
            self._wake.set()

    async def pump(self, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            while not self.held:
                self._wake = anyio.Event()
                await self._wake.wait()
            actor, msg = self.held.pop(self.rnd.randrange(len(self.held)))
            actor.tell(msg)
            for _ in range(self.rnd.randrange(3)):
                await anyio.sleep(0)


@settings(max_examples=120, deadline=None)
@given(elastic_inputs_st(max_workloads=16), st.integers(0, 2**32), st.data())
def test_requests_and_runtimes_converge_under_any_interleaving(case, seed, data) -> None:
    """Workloads arrive at random moments while every tree message is delivered in a random order.

    (The order comes from a seeded generator, not Hypothesis' own, which may stop a
    test in the middle of a draw and so in the middle of a task group.)
    """
    quotas, workloads, nodes, _ = case
    rnd = random.Random(seed)
    full = prepare(quotas, workloads, nodes)
    late = set(data.draw(st.sets(st.sampled_from([w.key for w in full.workloads])))) if full.workloads else set()
    first = dataclasses.replace(full, workloads=[w for w in full.workloads if w.key not in late])
    flow = ShuffledFlow(rnd)

    async def arrive(coord, w, delay):
        for _ in range(delay):
            await anyio.sleep(0)
        await coord.groups[w.group].ask(Hold((w,)))

    async def main():
        coord = ElasticCoordinator(first, InMemoryPort(), flow=flow)
        async with anyio.create_task_group() as tg:
            try:
                await tg.start(flow.pump)
                await coord.start(tg)
                async with anyio.create_task_group() as arrivals:  # workloads arrive while messages fly
                    for w in full.workloads:
                        if w.key in late:
                            arrivals.start_soon(arrive, coord, w, rnd.randrange(4))
                await flow.settled()
                assert not flow.held
                got = {n: (a.request()[0], a.runtime(), a.scaled_min) for n, a in coord.groups.items()}
                stats = await coord.groups[k.DEFAULT_QUOTA].ask(Stats())
            finally:
                coord.stop()
                tg.cancel_scope.cancel()
        return got, stats

    got, stats = anyio.run(main)
    states = full.states()
    own = {n: s.own_request() for n, s in states.items() if not s.inner}
    total = implicit_cluster_total(full.groups) if full.node_total is None else dict(full.node_total)
    for r, v in sum_resources(states[g].used() for g in sorted(OUTSIDE_TREE)).items():
        total[r] = total.get(r, 0) - v  # what the system and default groups use, Nodes or not
    want = compute_runtime(full.groups, own, total)
    for name, (request, runtime, scaled_min) in got.items():
        assert request == want[name].request, name
        assert runtime == want[name].runtime, name
        if name not in OUTSIDE_TREE:
            assert {r: from_koord_value(r, v) for r, v in scaled_min.items()} == want[name].scaled_min, name
    assert stats.name == k.DEFAULT_QUOTA and stats.runtime == dict(k.DEFAULT_GROUP_MAX)


def test_a_default_group_admission_shrinks_the_tree_before_the_next_decision() -> None:
    """With Nodes, the root shares what the default group leaves: the pass after it sees that at once."""
    quotas = [EQ("g0").min(cpu="0").max(cpu="10").build()]
    workloads = [WL("d", "elsewhere").req(cpu="6").priority(5).at(1).build(),
                 WL("a", "g0").req(cpu="6").priority(1).at(2).build()]
    nodes = [node("n1", cpu="10")]
    pure = run_elastic(quotas, workloads, nodes)
    assert pure.workloads["default/a"].reason == "quota g0: cpu used 0 + request 6 > runtime 4"
    assert pure.workloads["default/a"].preemptions == 0  # never admitted, so never revoked
    assert _actors(quotas, workloads, nodes) == pure
    assert all(_shuffled_actors(quotas, workloads, nodes, seed) == pure for seed in range(5))


class DirectFlow(Flow):
    """Hands each message straight to the receiver's handler: no event loop, depth first."""

    def deliver(self, actor: Actor, msg: object) -> None:
        actor.handle(msg)


def test_the_tree_settles_through_plain_method_calls() -> None:
    """The actors' state changes are plain methods: with direct delivery no message waits in a mailbox.

    (The shells run only so that stopping closes their mailboxes.)
    """
    quotas = [
        EQ("cluster").cluster(cpu="10").build(),
        EQ("a").parent("cluster").min(cpu="4").max(cpu="10").build(),
        EQ("b").parent("cluster").min(cpu="6").max(cpu="10").no_lend().build(),
    ]
    coord = ElasticCoordinator(prepare(quotas, [WL("a-1", "a").req(cpu="7").build()], []), InMemoryPort(),
                               flow=DirectFlow())
    for name, held in coord.build().items():
        coord.groups[name].hold(held)
    assert coord.flow.in_flight == 0
    # b does not lend: it keeps its min 6 idle, a gets the other 4
    assert {n: coord.groups[n].runtime() for n in ("cluster", "a", "b")} == {
        "cluster": {"cpu": 10_000}, "a": {"cpu": 4_000}, "b": {"cpu": 6_000}}
    assert coord.groups["a"].begin_pass() is not None
    decision = coord.groups["a"].try_admit()
    assert not decision.admitted and decision.reason == "quota a: cpu used 0 + request 7 > runtime 4"
    assert all(a.stats().handled == 0 for a in coord.groups.values())

    async def shut_down():
        async with anyio.create_task_group() as tg:
            for actor in [coord.root, *coord.groups.values()]:
                await tg.start(actor.run)
            coord.stop()
    anyio.run(shut_down)


# --- the API port ------------------------------------------------------------------------------
def _two_teams() -> list[dict]:
    return [
        EQ("cluster").cluster(cpu="10").build(),
        EQ("team-a").parent("cluster").min(cpu="5").max(cpu="10").build(),
        EQ("team-b").parent("cluster").min(cpu="5").max(cpu="10").build(),
    ]


def test_a_refused_admission_is_reverted_and_retried() -> None:
    refused = {"default/a-1"}
    port = InMemoryPort(refuse=lambda key: key in refused and not refused.discard(key))
    workloads = [WL("a-1", "team-a").req(cpu="6").at(1).build(), WL("a-2", "team-a").req(cpu="4").at(2).build()]
    out = _actors(_two_teams(), workloads, [], port=port)
    assert out == run_elastic(_two_teams(), workloads, [])
    assert [(c.kind, c.workload, c.cluster_queue) for c in port.log] == [
        ("admit", "default/a-2", "team-a"), ("admit", "default/a-1", "team-a")]


def test_preemption_and_recycling_commit_evictions_through_the_port() -> None:
    port = InMemoryPort()
    workloads = [
        WL("a-low", "team-a").req(cpu="3").priority(1).admitted().build(),
        WL("a-mid", "team-a").req(cpu="2").priority(2).admitted().build(),
        WL("a-over", "team-a").req(cpu="4").priority(0).admitted().build(),
        WL("b", "team-b").req(cpu="5").build(),
        WL("a-high", "team-a").req(cpu="3").priority(9).build(),
    ]
    out = _actors(_two_teams(), workloads, [], port=port)
    assert out == run_elastic(_two_teams(), workloads, [])
    evicted = {c.workload for c in port.log if c.kind == "evict"}
    assert evicted == {key for key, r in out.workloads.items() if r.preemptions}
    assert evicted and all(c.cluster_queue == "team-a" for c in port.log if c.kind == "evict")
    # the outcome lists what the port was told, in order, with the same reasons
    assert [(c.workload, c.detail.split(":", 1)[0]) for c in port.log if c.kind == "evict"] == [
        (e.workload, e.reason) for e in out.evictions]
