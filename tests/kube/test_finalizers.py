"""Kueue's resource-in-use finalizer goes on every ClusterQueue and comes off a deleted one once nothing
is admitted in it."""

from __future__ import annotations

import copy

import anyio

from kueued.kube.errors import ApiConflict, ApiUnavailable
from kueued.kube.finalizers import HOLD_EVERY, Holds, hold_finalizers, release_finalizers
from kueued.model.api import IN_USE_FINALIZER
from kueued.world import Change, World
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


def _fresh(api: FakeApi, world: World, name: str, *finalizers: str) -> dict:
    """A ClusterQueue as the API server stores it (no webhook added Kueue's finalizer), seen by the watch."""
    cq = cluster_queue(name, quotas("default", cpu="1"))
    if finalizers:
        cq["metadata"]["finalizers"] = list(finalizers)
    stored = api.put(cq)
    world.apply(copy.deepcopy(stored))
    return stored


def test_kueue_s_finalizer_is_put_on_every_queue_that_lacks_it_keeping_the_others() -> None:
    api, world, _ = _setup()  # q has it already
    _fresh(api, world, "bare")
    _fresh(api, world, "other", "example.com/other")
    world.apply(cluster_queue("from-a-file", quotas("default", cpu="1")))  # no version: not the API server's
    sent: dict[str, str] = {}
    assert anyio.run(hold_finalizers, api, world, sent) == 2
    assert api.obj("ClusterQueue", "", "bare")["metadata"]["finalizers"] == [IN_USE_FINALIZER]
    assert api.obj("ClusterQueue", "", "other")["metadata"]["finalizers"] == ["example.com/other", IN_USE_FINALIZER]
    assert sorted(w[2] for w in api.writes if w[1] == "ClusterQueue") == ["/bare", "/other"]
    assert anyio.run(hold_finalizers, api, world, sent) == 0  # the same versions are not patched twice
    for name in ("bare", "other"):  # the echo: a new version with the finalizer, nothing for the scheduler
        assert world.apply(copy.deepcopy(api.obj("ClusterQueue", "", name)))[0] is Change.NONE
    assert anyio.run(hold_finalizers, api, world, sent) == 0


def test_a_queue_being_deleted_is_not_held_and_a_refusal_is_tried_again() -> None:
    api, world, _ = _setup()
    _fresh(api, world, "bare")
    api.fail_next.append(ApiUnavailable(503, "ServiceUnavailable", "try later"))
    sent: dict[str, str] = {}
    assert anyio.run(hold_finalizers, api, world, sent) == 0
    assert anyio.run(hold_finalizers, api, world, sent) == 1  # the same version, once the server answers
    going = _fresh(api, world, "going")
    _deleting(api, world, going)
    assert anyio.run(hold_finalizers, api, world, sent) == 0
    assert "finalizers" not in (api.obj("ClusterQueue", "", "going") or {}).get("metadata", {})


def test_a_conflict_waits_for_the_version_the_watch_brings() -> None:
    api, world, _ = _setup()
    stored = _fresh(api, world, "bare")
    api.fail_next.append(ApiConflict(409, "Conflict", "the object has been modified"))
    sent: dict[str, str] = {}
    assert anyio.run(hold_finalizers, api, world, sent) == 0
    assert anyio.run(hold_finalizers, api, world, sent) == 0  # not on the version it was refused for
    labelled = copy.deepcopy(stored)
    labelled["metadata"]["labels"] = {"team": "x"}
    world.apply(copy.deepcopy(api.put(labelled)))
    assert anyio.run(hold_finalizers, api, world, sent) == 1


def test_queues_are_looked_at_for_the_finalizer_once_a_second_at_most() -> None:
    api, world, _ = _setup()
    now = [0.0]
    holds = Holds(lambda: now[0])
    assert anyio.run(holds.hold, api, world) == 0  # q has it already
    _fresh(api, world, "bare")
    now[0] = HOLD_EVERY / 2
    assert anyio.run(holds.hold, api, world) == 0  # too soon: not looked at
    assert not [w for w in api.writes if w[1] == "ClusterQueue"]
    now[0] = HOLD_EVERY
    assert anyio.run(holds.hold, api, world) == 1
    assert api.obj("ClusterQueue", "", "bare")["metadata"]["finalizers"] == [IN_USE_FINALIZER]
