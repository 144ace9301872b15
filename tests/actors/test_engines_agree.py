"""The actor engine and the pure synchronous core decide the same on every scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.simulation import run_actors
from kueued.kube.port import InMemoryPort
from kueued.manifests import load_manifests
from kueued.simulate import simulate
from tests.conformance.test_scenarios import SCENARIOS


@pytest.mark.skipif(not SCENARIOS, reason="../shared/conformance is not beside this checkout")
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_actor_engine_matches_the_pure_core(path: Path) -> None:
    manifests = load_manifests([path])
    sync, live = simulate(manifests), simulate(manifests, runner=run_actors)
    assert live.workloads == sync.workloads
    assert live.rejected == sync.rejected
    assert live.evictions == sync.evictions


def test_a_refused_commit_releases_the_reservation_and_retries() -> None:
    import anyio

    from actors.coordinator import simulate_world
    from kueued.engine.wiring import make_iterate, make_preemptor
    from kueued.world import World
    from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

    world = World()
    for m in [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
              local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", created=1, cpu="2"),
              workload("b", "ns", "lq", created=2, cpu="2")]:
        world.apply(m)
    refused = {"ns/a"}
    port = InMemoryPort(refuse=lambda key: key in refused and not refused.discard(key))

    async def main():
        return await simulate_world(world, port, preemptor=make_preemptor, iterate=make_iterate(world))
    coord = anyio.run(main)
    # a's first commit failed: its reservation was released (b could not have been granted
    # otherwise only if a's quota leaked); a retried and was admitted, b waits.
    assert [c.workload for c in port.log if c.kind == "admit"] == ["ns/a"]
    assert world.workloads["ns/a"].admitted and not world.workloads["ns/b"].admitted
    cq = coord.cluster_queues["cq"]
    assert cq.node.usage == {("default", "cpu"): 2000}
