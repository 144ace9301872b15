"""A WorkloadPriorityClass's value reaches its Workloads' spec.priority (Kueue's controller)."""

from __future__ import annotations

from typing import Any

import anyio

from kueued.kube.errors import ApiNotFound
from kueued.kube.priority_sync import PrioritySync, due
from kueued.world import World
from tests.builders import workload


def wpc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}


def classed(name: str, cls: str, priority: int | None) -> dict[str, Any]:
    wl = workload(name, "ns", "lq", priority=priority, cpu="1")
    wl["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": cls}
    return wl


class Recorder:
    def __init__(self, missing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.patches: list[tuple[str, str, str, dict]] = []
        self.missing = missing

    async def patch(self, kind: str, namespace: str, name: str, body: dict) -> dict:
        if name in self.missing:
            raise ApiNotFound(404, "NotFound", "gone")
        self.patches.append((kind, namespace, name, body))
        return {}


def test_workloads_that_disagree_with_their_class_get_its_value() -> None:
    world = World()
    for m in (wpc("high", 500), classed("stale", "high", 10), classed("fresh", "high", 500),
              classed("orphan", "gone", 7), workload("plain", "ns", "lq", priority=200, cpu="1")):
        world.apply(m)
    assert list(due(world)) == [("ns", "stale", 500)]
    client = Recorder()
    assert anyio.run(PrioritySync().sync, client, world) == 1
    assert client.patches == [("Workload", "ns", "stale", {"spec": {"priority": 500}})]


def test_a_pass_is_bounded_and_a_vanished_workload_is_skipped() -> None:
    world = World()
    world.apply(wpc("high", 500))
    for i in range(5):
        world.apply(classed(f"w{i}", "high", 1))
    client = Recorder(missing={"w0"})
    sync = PrioritySync()
    assert anyio.run(lambda: sync.sync(client, world, limit=2)) == 2
    assert [p[2] for p in client.patches] == ["w1", "w2"]


def test_the_workloads_are_looked_at_again_only_after_a_change_or_while_some_are_left() -> None:
    world = World()
    world.apply(wpc("high", 500))
    for i in range(3):
        world.apply(classed(f"w{i}", "high", 1))
    client, sync = Recorder(), PrioritySync()

    def run(epoch: int) -> int:
        before = len(client.patches)
        written = anyio.run(lambda: sync.sync(client, world, limit=2, epoch=epoch))
        for _, _, name, body in client.patches[before:]:  # the watch brings each write back
            world.apply(classed(name, "high", body["spec"]["priority"]))
        return written

    assert run(1) == 2
    assert run(1) == 1  # one was left: looked at again in the same epoch
    world.apply(classed("w0", "high", 7))  # changed behind the World's back, no round since
    assert run(1) == 0  # nothing was left and nothing ran: not looked at
    assert run(2) == 1  # a round: looked at in full
