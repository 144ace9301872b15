"""When the daemon refreshes the queues' gauges (actors.observe.Gauges)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio

from actors.messages import Sample
from actors.observe import Gauges
from actors.runtime import Actor
from kueued.metrics import QueueSample


class Backlog:
    """A source with ``n`` changes waiting."""

    def __init__(self) -> None:
        self.n = 0

    def queued(self) -> int:
        return self.n


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_gauges_refresh_at_most_once_a_second_under_a_backlog_and_catch_up_after() -> None:
    source: Any = Backlog()  # the one method Gauges reads of a Source
    clock, refreshed = Clock(), []
    gauges = Gauges(metrics=Any, coord=Any, elastic=Any, source=source, clock=clock)  # type: ignore[arg-type]

    async def observe() -> None:
        refreshed.append(clock.now)

    gauges.observe = observe  # type: ignore[method-assign]

    async def passes() -> None:
        assert gauges.due()  # nothing waiting: every pass refreshes
        assert gauges.due()
        source.n = 5  # a storm: changes keep arriving
        for _ in range(10):
            clock.now += 0.25
            if gauges.due():
                await gauges.observe()
        source.n = 0  # quiet again: the pass without rounds catches the last skip up
        await gauges.catch_up()
        await gauges.catch_up()  # and only once

    anyio.run(passes)
    assert refreshed == [51.0, 52.0, 52.5]  # 10 passes in 2.5 s: two refreshes, then the catch-up


def test_under_a_backlog_a_costly_refresh_is_paced_by_its_cost() -> None:
    source: Any = Backlog()
    clock, refreshed = Clock(), []
    gauges = Gauges(metrics=Any, coord=Any, elastic=Any, source=source, clock=clock)  # type: ignore[arg-type]

    async def observe() -> None:  # a thousand queues: each refresh takes 50 ms
        refreshed.append(round(clock.now, 2))
        clock.now += 0.05

    gauges.observe = observe  # type: ignore[method-assign]

    async def passes() -> None:
        source.n = 5  # a storm: a pass every half second, changes always waiting
        for _ in range(11):  # paced at 0.05 / SHARE = 2 s, not every second
            if gauges.due():
                await gauges._refresh()
            clock.now += 0.5
        source.n = 0  # quiet again: at once, whatever the pace
        await gauges.catch_up()

    anyio.run(passes)
    pace = 0.05 / gauges.pace.share
    assert all(b - a >= pace for a, b in zip(refreshed[:-1], refreshed[1:-1], strict=False))
    assert len(refreshed) == 4 and refreshed[-1] - refreshed[-2] < pace  # three in the storm, the catch-up


class Counter(Actor):
    """A queue actor reduced to what the gauges read: its samples, and messages that change it."""

    handles_at_once = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.samples = 0
        self.value = 0

    def handle(self, msg: Any) -> Any:
        if isinstance(msg, Sample):
            self.reads += 1
            self.samples += 1
            return QueueSample(self.name, active=self.value, inadmissible=0, admitted=0, usage={}, mailbox=0,
                               changes=self.changes)
        if msg == "peek":  # a read, as a balance report is
            self.reads += 1
            return self.value
        self.value += msg
        return None


def test_a_queue_that_handled_nothing_since_its_last_sample_is_not_asked_again() -> None:
    async def main() -> None:
        async with anyio.create_task_group() as tg:
            actors = {name: Counter(name) for name in ("a", "b", "c")}
            for actor in actors.values():
                await tg.start(actor.run)
            coord: Any = SimpleNamespace(cluster_queues=dict(actors))
            gauges = Gauges(metrics=Any, coord=coord, elastic=Any, source=Backlog(), clock=Clock())  # type: ignore[arg-type]

            first = await gauges._samples(False)
            assert [a.samples for a in actors.values()] == [1, 1, 1]
            again = await gauges._samples(False)
            assert [a.samples for a in actors.values()] == [1, 1, 1]  # nothing moved: nothing asked
            assert [s.active for s in again] == [s.active for s in first]

            assert await actors["a"].ask("peek") == 0  # read, not changed: not asked again below
            await actors["b"].ask(2)  # b changed
            actors["c"].defer(5)  # c has a change waiting for its next message
            changed = {s.name: s.active for s in await gauges._samples(False)}
            assert [a.samples for a in actors.values()] == [1, 2, 2]
            assert changed == {"a": 0, "b": 2, "c": 5}

            await gauges._samples(True)  # asked for more (the LocalQueue gate): every queue again
            assert [a.samples for a in actors.values()] == [2, 3, 3]

            fresh = Counter("a")  # a queue's spec changed: the coordinator made a new actor
            await tg.start(fresh.run)
            coord.cluster_queues["a"] = fresh
            del coord.cluster_queues["c"]
            names = [s.name for s in await gauges._samples(True)]
            assert sorted(names) == ["a", "b"] and fresh.samples == 1 and actors["b"].samples == 3
            assert set(gauges._last) == {"a", "b"}
            for actor in [*actors.values(), fresh]:
                actor.stop()

    anyio.run(main)
