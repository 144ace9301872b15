"""Commits the API server refuses: the reservation is released and the workload retried."""

from __future__ import annotations

from kueued.kube.port import InMemoryPort


def test_a_refused_commit_releases_the_reservation_and_retries() -> None:
    import anyio

    from actors.simulation import simulate_world
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
    assert "ns/a" in world.placed and "ns/b" not in world.placed
    cq = coord.cluster_queues["cq"]
    assert cq.node.usage == {("default", "cpu"): 2000}
