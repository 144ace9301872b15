"""The actor runtime and the borrow-request protocol under any interleaving."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.cluster_queue import ClusterQueueActor
from actors.cohort import CohortActor
from actors.messages import Denied, Granted, Release, Report, Reserve
from actors.node import NodeActor
from actors.runtime import Actor, ActorStopped
from kueued.quota import node as qn
from tests.quota.test_node import FR, trees


class Echo(Actor):
    def handle(self, msg):
        if msg == "boom":
            raise ValueError("boom")
        return msg * 2


def test_ask_replies_and_errors_travel_back_to_the_asker() -> None:
    async def main():
        actor = Echo("echo")
        async with anyio.create_task_group() as tg:
            await tg.start(actor.run)
            assert await actor.ask(21) == 42
            with pytest.raises(ValueError, match="boom"):
                await actor.ask("boom")
            assert await actor.ask(1) == 2  # the actor survived its handler's error
            actor.stop()
        with pytest.raises(ActorStopped):
            await actor.ask(1)
        assert actor.stats().handled == 3
    anyio.run(main)


class Log(Actor):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.seen: list[str] = []

    def handle(self, msg):
        self.seen.append(msg)
        return list(self.seen)


def test_deferred_tells_ride_on_the_next_message_and_are_handled_first() -> None:
    async def main():
        actor = Log("log")
        async with anyio.create_task_group() as tg:
            await tg.start(actor.run)
            actor.defer("a")
            actor.defer("b")
            await anyio.sleep(0)
            assert actor.seen == []  # no wake-up of their own
            assert await actor.ask("c") == ["a", "b", "c"]
            actor.defer("d")
            await actor.drain()  # handles what was deferred, answers nothing of its own
            assert actor.seen == ["a", "b", "c", "d"]
            actor.defer("e")
            actor.stop()  # a deferred tell is still handled before the mailbox closes
        assert actor.seen == ["a", "b", "c", "d", "e"]
        with pytest.raises(ActorStopped):
            actor.defer("f")

    anyio.run(main)


class AtOnce(Actor):
    """Logs what it handles; "slow:x" waits for ``gate`` (a coroutine), "ping:x" asks ``peer``,
    "relay:x" asks ``peer``, which asks this one back ("back:" -> "echo:")."""

    handles_at_once = True

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__(name)
        self.log = log
        self.gate = anyio.Event()
        self.peer: AtOnce | None = None
        self.depth = 0  # handlers running right now: never more than one

    def handle(self, msg):
        self.depth += 1
        try:
            assert self.depth == 1, "a handler was re-entered"
            kind, _, arg = msg.partition(":")
            if kind == "slow":
                return self._slow(msg)
            if kind == "ping" and self.peer is not None:
                self.log.append(f"{self.name}<{msg}")
                return self.peer.post(f"pong:{arg}")  # a Reply: the peer is busy or answers at once
            if kind == "relay" and self.peer is not None:  # the peer asks back while this one handles
                inner = self.peer.post(f"back:{msg}")
                self.log.append(f"{self.name}<{msg}")
                return inner
            if kind == "back" and self.peer is not None:
                return self.peer.post(f"echo:{msg}")  # the relaying actor is busy: queued
            self.log.append(f"{self.name}<{msg}")
            return f"{self.name}:{msg}"
        finally:
            self.depth -= 1

    async def _slow(self, msg):
        await self.gate.wait()
        self.log.append(f"{self.name}<{msg}")
        return "slow done"


def _pair(body) -> None:
    """Run ``body(a, b, log)`` with two started AtOnce actors that know each other."""
    async def main():
        log: list[str] = []
        a, b = AtOnce("a", log), AtOnce("b", log)
        a.peer, b.peer = b, a
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            await tg.start(b.run)
            await body(a, b, log)
            for actor in (a, b):
                actor.stop()
    anyio.run(main)


def test_an_idle_actor_handles_at_once_in_order() -> None:
    async def body(a: AtOnce, b: AtOnce, log: list[str]) -> None:
        a.defer("d1")
        reply = a.post("x")
        assert reply.done and reply.value == "a:x"  # answered before post returned
        assert log == ["a<d1", "a<x"] and a.stats().handled == 2
        # a handler that waits goes to the actor's task; what follows queues behind it
        slow = a.post("slow:1")
        after = a.post("y")
        assert not slow.done and not after.done and log == ["a<d1", "a<x"]
        a.gate.set()
        assert await slow.result(5) == "slow done" and await after.result(5) == "a:y"
        assert log[2:] == ["a<slow:1", "a<y"]
        # an idle actor asked from inside another's handler answers at once too, either way round
        log.clear()
        pong = b.post("ping:1")  # b handles at once, posting pong:1 to a (idle: at once)
        assert pong.done and log == ["b<ping:1", "a<pong:1"]
        log.clear()
        nested = a.post("ping:2")  # a handles at once, asks b ("pong:2" -> b at once)
        assert nested.done and log == ["a<ping:2", "b<pong:2"]
    _pair(body)


def test_a_message_back_to_a_busy_actor_waits_for_its_turn() -> None:
    async def body(a: AtOnce, b: AtOnce, log: list[str]) -> None:
        outer = a.post("relay:1")
        assert outer.done  # a's answer is b's Reply, whose answer is a's queued echo
        echo = outer.value.value  # b answered at once with a's Reply for the echo
        assert not echo.done  # a was inside its handler: the echo went to its mailbox
        assert await echo.result(5) == "a:echo:back:relay:1"
        assert log == ["a<relay:1", "a<echo:back:relay:1"]
    _pair(body)


async def _actor_tree(tg, nodes) -> dict[str, NodeActor]:
    actors: dict[str, NodeActor] = {}
    for name, n in nodes.items():
        actors[name] = CohortActor(name) if n.is_cohort else ClusterQueueActor(name, strict=False)
        await tg.start(actors[name].run)
    for name, n in nodes.items():
        actors[name].configure(n.limits, n.subtree, actors[n.parent.name] if n.parent else None)
    return actors


async def _drain_upwards(actors: dict[str, NodeActor]) -> None:
    """Every actor handles what it holds, children before parents (deepest first)."""
    def depth(a: NodeActor) -> int:
        return 0 if a.parent is None else 1 + depth(a.parent)
    for a in sorted(actors.values(), key=depth, reverse=True):
        await a.drain()


def _check(actors: dict[str, NodeActor], *, at_rest: bool = False) -> None:
    """Limits hold at every moment; charges match children's shares once nothing is in flight."""
    for a in actors.values():
        used = a.node.usage.get(FR, 0)
        limit = qn.allowed(a.node, FR, has_parent=a.parent is not None)
        assert limit is None or used <= limit, (a.name, used, limit)
        assert used >= 0
    if not at_rest:
        return
    for a in actors.values():
        if a.node.is_cohort:
            kids = [c for c in actors.values() if c.parent is a]
            assert a.node.usage.get(FR, 0) == sum(qn.parent_share(c.node, FR, c.node.usage.get(FR, 0))
                                                  for c in kids)


@settings(max_examples=150, deadline=None)
@given(trees(), st.lists(st.tuples(st.integers(0, 5), st.integers(1, 12).map(lambda x: x * 500),
                                   st.integers(0, 3), st.booleans()), min_size=1, max_size=25))
def test_no_interleaving_of_borrow_requests_over_admits(nodes, requests) -> None:
    """Concurrent borrow requests and releases, started at random points, never exceed the tree.

    Each request climbs as messages; actors serialise their own mailboxes, but requests
    from different leaves interleave freely at every shared ancestor.
    """
    async def main():
        async with anyio.create_task_group() as tg:
            actors = await _actor_tree(tg, nodes)
            leaves = [a for a in actors.values() if not a.node.is_cohort]
            granted: list[tuple[NodeActor, int]] = []

            async def one(idx, value, delay, release):
                for _ in range(delay):
                    await anyio.sleep(0)
                leaf = leaves[idx % len(leaves)]
                answer = await leaf.ask(Reserve(f"w{idx}", {FR: value}))
                assert isinstance(answer, Granted | Denied)
                _check(actors)
                if isinstance(answer, Granted):
                    if release:
                        await anyio.sleep(0)
                        await leaf.ask(Release(f"w{idx}", {FR: value}))
                    else:
                        granted.append((leaf, value))

            async with anyio.create_task_group() as inner:
                for i, (idx, value, delay, release) in enumerate(requests):
                    inner.start_soon(one, idx + i, value, delay, release)
            await _drain_upwards(actors)  # releases climb as tells: let them land
            _check(actors, at_rest=True)
            held = sum(v for _, v in granted)
            roots = [a for a in actors.values() if a.parent is None]
            # everything granted and not released is accounted at the leaves
            assert held == sum(a.node.usage.get(FR, 0) for a in leaves)
            for a in roots:
                assert a.node.usage.get(FR, 0) <= a.node.subtree.get(FR, 0)
            for a in actors.values():
                a.stop()
    anyio.run(main)


@settings(max_examples=150, deadline=None)
@given(trees(), st.lists(st.tuples(st.integers(0, 5), st.integers(1, 12).map(lambda x: x * 500)), max_size=8),
       st.lists(st.tuples(st.integers(0, 5), st.integers(1, 12).map(lambda x: x * 500), st.integers(0, 3)),
                min_size=1, max_size=20))
def test_reserving_then_releasing_is_the_identity(nodes, base, extra) -> None:
    """From any balance, borrow requests granted concurrently and then all released leave every
    node exactly as it was: its usage, and what it counts each child as holding of it (what
    Reclaim queries are routed by), which at rest equals the child's share of its usage."""
    async def main():
        async with anyio.create_task_group() as tg:
            actors = await _actor_tree(tg, nodes)
            leaves = [a for a in actors.values() if not a.node.is_cohort]
            for idx, value in base:
                await leaves[idx % len(leaves)].ask(Reserve(f"b{idx}", {FR: value}))
            await _drain_upwards(actors)
            before = _balances(actors)
            granted: list[tuple[NodeActor, str, int]] = []

            async def one(i, idx, value, delay):
                for _ in range(delay):
                    await anyio.sleep(0)
                leaf = leaves[idx % len(leaves)]
                if isinstance(await leaf.ask(Reserve(f"x{i}", {FR: value})), Granted):
                    granted.append((leaf, f"x{i}", value))

            async with anyio.create_task_group() as inner:
                for i, (idx, value, delay) in enumerate(extra):
                    inner.start_soon(one, i, idx, value, delay)
            await _drain_upwards(actors)
            for a in actors.values():  # at rest, each child's count is its share of its usage
                for c in actors.values():
                    if c.parent is a:
                        assert a.held.get(c.key, {}).get(FR, 0) == qn.parent_share(
                            c.node, FR, c.node.usage.get(FR, 0))
            for leaf, key, value in granted:
                await leaf.ask(Release(key, {FR: value}))
            await _drain_upwards(actors)
            after = _balances(actors)
            assert after == before
            for a in actors.values():
                a.stop()
    anyio.run(main)


def _balances(actors: dict[str, NodeActor]) -> dict[str, tuple[dict, dict]]:
    """Each node's usage and per-child counts, zero entries left out (a node that held and gave
    back keeps a 0, one that never held has no entry: the same balance)."""
    def nonzero(amounts: dict) -> dict:
        return {k: v for k, v in amounts.items() if v}
    return {n: (nonzero(a.node.usage), {c: nonzero(h) for c, h in a.held.items() if nonzero(h)})
            for n, a in actors.items()}


def test_a_denial_high_up_unwinds_every_reservation_below() -> None:
    async def main():
        root, mid, leaf = CohortActor("root"), CohortActor("mid"), ClusterQueueActor("cq", strict=False)
        async with anyio.create_task_group() as tg:
            for a in (root, mid, leaf):
                await tg.start(a.run)
            root.configure({}, {FR: 1000}, None)
            mid.configure({FR: qn.Limits(0, None, None)}, {FR: 0}, root)
            leaf.configure({FR: qn.Limits(0, None, None)}, {FR: 0}, mid)
            assert isinstance(await leaf.ask(Reserve("a", {FR: 800})), Granted)
            denied = await leaf.ask(Reserve("b", {FR: 800}))
            assert isinstance(denied, Denied) and denied.node == "cohort root"
            assert (leaf.node.usage[FR], mid.node.usage[FR], root.node.usage[FR]) == (800, 800, 800)
            await mid.ask(Release("a", {FR: 800}))
            assert root.node.usage[FR] == 0
            assert (await root.ask(Report())).usage == {FR: 0}
            assert isinstance(await mid.ask(Reserve("c", {FR: 1000})), Granted)
            for a in (root, mid, leaf):
                a.stop()
    anyio.run(main)


async def test_a_sample_sees_the_requeues_still_riding_on_the_next_message() -> None:
    """A failed head's Requeue is deferred to the queue's next message: the statistics record
    that metrics read must come as a message after it, or it misses that workload."""
    from actors.messages import Enqueue, Nominate, Requeue, Sample
    from tests.scheduling.test_preemption import incoming
    actor = ClusterQueueActor("a", strict=True)
    async with anyio.create_task_group() as tg:
        await tg.start(actor.run)
        for name in ("w0", "w1"):
            await actor.ask(Enqueue(incoming(name, cpu="1").spec))  # the message carries a spec
        head = (await actor.ask(Nominate())).head
        actor.defer(Requeue(head, "Generic"))
        assert actor.sample().active == 1  # read directly, the head still in flight is missed
        assert (await actor.ask(Sample())).active == 2
        actor.stop()
