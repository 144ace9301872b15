"""Kueue's resource-in-use finalizer comes off a deleted ClusterQueue once nothing is admitted in it."""

from __future__ import annotations

import copy

import anyio

from kueued.kube.errors import ApiConflict
from kueued.kube.finalizers import release_finalizers
from kueued.model.api import IN_USE_FINALIZER
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.kube.fake_api import FakeApi


def _setup() -> tuple[FakeApi, World, dict]:
    api, world = FakeApi(), World()
    cq = cluster_queue("q", quotas("default", cpu="2"))
    cq["metadata"]["finalizers"] = [IN_USE_FINALIZER, "example.com/other"]
    stored = api.put(copy.deepcopy(cq))
    for m in [namespace("ns"), flavor("default"), stored, local_queue("lq", "ns", "q")]:
        world.apply(copy.deepcopy(m))
    return api, world, stored


def _deleting(api: FakeApi, world: World, stored: dict) -> dict:
    """The user's delete: the API server sets deletionTimestamp, the watch brings it."""
    held = copy.deepcopy(stored)
    held["metadata"]["deletionTimestamp"] = "2026-11-26T12:00:00Z"
    held = api.put(held)
    world.apply(copy.deepcopy(held))
    return held


def test_kept_while_a_workload_is_admitted_then_taken_off_and_only_kueue_s() -> None:
    api, world, stored = _setup()
    admitted = workload("w", "ns", "lq", cpu="1")
    admitted["status"] = {
        "admission": {"clusterQueue": "q", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    world.apply(admitted)
    world.take_observed()  # as a scheduler that adopted it would hold it
    _deleting(api, world, stored)
    sent: dict[str, str] = {}

    async def main() -> tuple[int, int]:
        kept = await release_finalizers(api, world, sent)
        world.workloads.pop("ns/w")  # it finished
        world.placed.pop("ns/w")
        return kept, await release_finalizers(api, world, sent)

    kept, released = anyio.run(main)
    assert (kept, released) == (0, 1)
    assert api.obj("ClusterQueue", "", "q")["metadata"]["finalizers"] == ["example.com/other"]
    assert [w for w in api.writes if w[1] == "ClusterQueue"] == [("patch", "ClusterQueue", "/q")]


def test_a_conflict_is_tried_again_on_the_version_the_watch_brings() -> None:
    api, world, stored = _setup()
    held = _deleting(api, world, stored)
    api.fail_next.append(ApiConflict(409, "Conflict", "the object has been modified"))
    sent: dict[str, str] = {}
    assert anyio.run(release_finalizers, api, world, sent) == 0
    moved = api.put(copy.deepcopy(held))  # someone else wrote it: a new version, seen by the watch
    world.apply(copy.deepcopy(moved))
    assert anyio.run(release_finalizers, api, world, sent) == 1
    assert IN_USE_FINALIZER not in api.obj("ClusterQueue", "", "q")["metadata"]["finalizers"]


def test_a_queue_not_terminating_or_without_the_finalizer_is_left_alone() -> None:
    api, world, stored = _setup()
    assert anyio.run(release_finalizers, api, world, {}) == 0  # not deleted
    plain = copy.deepcopy(stored)
    plain["metadata"]["finalizers"] = ["example.com/other"]
    plain = api.put(plain)
    world.apply(copy.deepcopy(plain))
    _deleting(api, world, plain)
    assert anyio.run(release_finalizers, api, world, {}) == 0
    assert not [w for w in api.writes if w[1] == "ClusterQueue"]
