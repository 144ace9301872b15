"""A ClusterQueue actor's sample says what each LocalQueue holds in it, as the assembled balances do.

The LocalQueue gauges (``kueued.metrics_local_queue``) read each LocalQueue's admitted workloads
from its ClusterQueue's ``Sample`` instead of assembling every queue's admitted set: the two must
agree, whatever was admitted where.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.harness import LiveEngine
from actors.messages import Sample
from kueued.kube.tree_status import local_queue_holdings
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

QUEUES = ("cq-a", "cq-b")
LOCAL = (("ns-1", "lq-1", "cq-a"), ("ns-1", "lq-2", "cq-a"), ("ns-2", "lq-1", "cq-b"), ("ns-2", "lq-3", "cq-a"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(LOCAL) - 1), st.integers(1, 4), st.integers(0, 3)), max_size=14),
       st.lists(st.integers(0, 13), max_size=4))
def test_each_local_queue_s_holdings_in_a_sample_are_the_assembled_ones(
        workloads: list[tuple[int, int, int]], finished: list[int]) -> None:
    world = World()
    for m in (namespace("ns-1"), namespace("ns-2"), flavor("default"),
              *(cluster_queue(name, quotas("default", cpu="6", memory="8Gi"), cohort="co") for name in QUEUES),
              *(local_queue(lq, ns, cq) for ns, lq, cq in LOCAL)):
        world.apply(m)
    with LiveEngine(world) as engine:
        for i, (which, cpu, memory) in enumerate(workloads):
            ns, lq, _ = LOCAL[which]
            engine.apply(workload(f"w{i}", ns, lq, created=i, cpu=str(cpu), memory=f"{memory}Gi"))
        engine.run()
        for i in finished:  # some leave: their quota goes to the next ones
            if i < len(workloads):
                engine.finish(f"{LOCAL[workloads[i][0]][0]}/w{i}")
        engine.run()
        assembled = local_queue_holdings(engine.state)
        actors = engine.coordinator.cluster_queues
        sampled = {name: engine._call(actors[name].ask, Sample(local_queues=True)) for name in QUEUES}
    for name in QUEUES:
        expected = {lq: held for (lq, cq), held in assembled.items() if cq == name}
        assert sampled[name].holdings == expected
    assert sum(held for held, _ in assembled.values()) == sum(s.admitted for s in sampled.values())
