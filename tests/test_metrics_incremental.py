"""The queues' gauges are worked out again only for the queues whose sample, snapshot or status moved
(``Metrics.observe_queues``, ``LocalQueueMetrics.observe``): after any sequence of changes, what the
registry exports is what a fresh registry shows for the same state, worked out whole."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.engine.wiring import forest_of
from kueued.metrics import Metrics, QueueSample
from kueued.metrics_local_queue import gated
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas

QUEUES = ("cq-a", "cq-b", "cq-c")

step = st.one_of(
    st.tuples(st.just("sample"), st.integers(0, 2), st.integers(0, 5)),
    st.tuples(st.just("unsampled"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("requota"), st.integers(0, 2), st.integers(1, 8)),
    st.tuples(st.just("recohort"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("delete"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("lq-delete"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("lq-stop"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("terminating"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("flavor"), st.just(0), st.just(0)),
    st.tuples(st.just("nothing"), st.just(0), st.just(0)),
)


def _gauges(metrics: Metrics) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {(s.name, tuple(sorted(s.labels.items())), s.value)
            for family in metrics.registry.collect() if family.type == "gauge" for s in family.samples}


def _sample(name: str, n: int) -> QueueSample:
    lq = f"ns/lq-{name}"
    return QueueSample(name, active=n, inadmissible=n // 2, admitted=n % 3, usage={("default", "cpu"): 1000 * n},
                       mailbox=0, local_queues={lq: (n, n // 2)}, holdings={lq: (n % 3, {("default", "cpu"): 500 * n})})


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=25))
def test_incremental_gauges_equal_gauges_worked_out_whole(steps: list[tuple[str, int, int]]) -> None:
    world = World()
    for m in (namespace("ns"), flavor("default"),
              *(cluster_queue(name, quotas("default", cpu="4"), cohort="co") for name in QUEUES),
              *(local_queue(f"lq-{name}", "ns", name) for name in QUEUES)):
        world.apply(m)
    metrics = Metrics()
    lq = gated(metrics, True)
    assert lq is not None
    forest = forest_of(world)
    samples: dict[str, QueueSample] = {}
    terminating: set[str] = set()
    flavor_there = True
    for kind, i, n in steps:
        name = QUEUES[i]
        topology: Any = None
        if kind == "sample":
            samples[name] = _sample(name, n)
        elif kind == "unsampled":
            samples.pop(name, None)
        elif kind == "requota":
            topology = cluster_queue(name, quotas("default", cpu=str(n)), cohort="co")
        elif kind == "recohort":
            topology = cluster_queue(name, quotas("default", cpu="4"), cohort=("co", "other")[n])
        elif kind == "delete":  # (n: the forest not yet rebuilt, as while the daemon holds a batch's changes)
            world.delete(cluster_queue(name, quotas("default", cpu="4")))
            topology = None if n else True
        elif kind == "lq-delete":
            world.delete(local_queue(f"lq-{name}", "ns", name))
        elif kind == "lq-stop":
            world.apply({**local_queue(f"lq-{name}", "ns", name),
                         "spec": {"clusterQueue": name, "stopPolicy": "Hold"}})
        elif kind == "terminating":
            terminating ^= {name}
        elif kind == "flavor":
            (world.delete if flavor_there else world.apply)(flavor("default"))
            flavor_there = not flavor_there
            topology = True
        if isinstance(topology, dict):
            world.apply(topology)
        if topology is not None:
            forest = forest_of(world)  # the daemon builds a new forest on a topology change only
        present = [samples[q] for q in forest.cluster_queues if q in samples]
        metrics.observe_queues(present, forest.cluster_queues, terminating=terminating)
        lq.observe(world, forest, present)

        whole = Metrics()
        whole_lq = gated(whole, True)
        assert whole_lq is not None
        whole.observe_queues(present, forest.cluster_queues, terminating=terminating)
        whole_lq.observe(world, forest, present)
        assert _gauges(metrics) == _gauges(whole)
