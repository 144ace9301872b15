"""The gauges reuse a queue's last sample while its actor has handled nothing since
(``Gauges._samples``, ``Actor.unchanged_since``): what they read must be what asking would give,
whatever arrived, was admitted, finished or was deleted in between."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from actors.harness import LiveEngine
from actors.observe import Gauges
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

QUEUES = ("cq-a", "cq-b", "cq-c")

step = st.one_of(
    st.tuples(st.just("arrive"), st.integers(0, len(QUEUES) - 1), st.integers(1, 4)),
    st.tuples(st.just("finish"), st.integers(0, 15), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, 15), st.just(0)),
    st.tuples(st.just("run"), st.just(0), st.just(0)),
    st.tuples(st.just("report"), st.just(0), st.just(0)),  # balances read (a status publish): changes nothing
)


def _fields(sample: Any) -> tuple:
    return (sample.name, sample.active, sample.inadmissible, sample.admitted, sample.usage, sample.local_queues,
            sample.holdings)


@settings(max_examples=40, deadline=None)
@given(st.lists(step, max_size=20), st.booleans())
def test_the_samples_the_gauges_read_are_the_ones_asking_gives(steps: list[tuple[str, int, int]],
                                                               local_queues: bool) -> None:
    world = World()
    for m in (namespace("ns"), flavor("default"),
              *(cluster_queue(name, quotas("default", cpu="4"), cohort="co") for name in QUEUES),
              *(local_queue(f"lq-{name}", "ns", name) for name in QUEUES)):
        world.apply(m)
    arrived: list[dict] = []
    reused = 0
    with LiveEngine(world) as engine:
        gauges = Gauges(metrics=Any, coord=engine.coordinator, elastic=Any,  # type: ignore[arg-type]
                        source=SimpleNamespace(queued=lambda: 0), clock=lambda: 0.0)
        for kind, which, cpu in steps:
            if kind == "arrive":
                manifest = workload(f"w{len(arrived)}", "ns", f"lq-{QUEUES[which]}", created=len(arrived), cpu=str(cpu))
                arrived.append(manifest)
                engine.apply(manifest)
            elif kind == "finish" and which < len(arrived):
                engine.finish(f"ns/w{which}")
            elif kind == "delete" and which < len(arrived):
                engine.delete(arrived[which])
            elif kind == "report":
                engine._call(engine.coordinator.assemble)
            else:
                engine.run()
            kept = {name: entry[2] for name, entry in gauges._last.items()}
            samples = engine._call(gauges._samples, local_queues)
            reused += sum(kept.get(s.name) is s for s in samples)
            # the actors' own state, read directly (an ask would move their count): every deferred
            # change was delivered by the gauges' asks, or nothing changed since the sample kept
            actors = engine.coordinator.cluster_queues
            assert {s.name: _fields(s) for s in samples} == {
                name: _fields(actor.sample(local_queues=local_queues)) for name, actor in actors.items()}
    event(f"samples reused: {'some' if reused else 'none'}")
