"""Kueue's resource-in-use finalizer goes on every ClusterQueue and ResourceFlavor and comes off a deleted
one once it is no longer in use; the keeper that patches it never holds back a status write."""

from __future__ import annotations

import copy

import anyio

from kueued.kube import finalizers
from kueued.kube.errors import ApiConflict, ApiForbidden, ApiUnavailable
from kueued.kube.finalizers import HOLDS_AT_LEAST, FinalizerKeeper, hold_finalizers, release_finalizers
from kueued.kube.status_publisher import TreeStatusPublisher
from kueued.model.api import IN_USE_FINALIZER
from kueued.world import Change, World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.kube.fake_api import FakeApi
from tests.kube.test_tree_status import FakeClient, Settled, settle, team


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
    assert [w for w in api.writes if w[1] == "ClusterQueue"] == [("patch_json", "ClusterQueue", "/q")]


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


class _Budget:
    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    def available(self) -> int:
        return self.tokens

    def spend(self, n: int) -> None:
        self.tokens -= n


def test_a_status_write_in_between_does_not_refuse_the_hold_but_another_finalizer_does() -> None:
    """The patch tests the finalizer list it was worked out on, not the resourceVersion: kueued's own
    status writes move the version all the time under load (a version-conditional patch met a 409
    nearly every time), while another controller's finalizer added meanwhile must not be dropped."""
    api, world, _ = _setup()
    stored = _fresh(api, world, "busy")
    written = copy.deepcopy(stored)
    written["status"] = {"pendingWorkloads": 3}  # kueued's status write, not yet seen by the watch
    api.put(written)
    sent: dict[str, str] = {}
    assert anyio.run(hold_finalizers, api, world, sent) == 1
    busy = api.obj("ClusterQueue", "", "busy")
    assert busy["metadata"]["finalizers"] == [IN_USE_FINALIZER] and busy["status"] == {"pendingWorkloads": 3}

    stored = _fresh(api, world, "shared")
    theirs = copy.deepcopy(stored)
    theirs["metadata"]["finalizers"] = ["example.com/theirs"]  # another controller's, not yet seen
    api.put(theirs)
    assert anyio.run(hold_finalizers, api, world, sent) == 0  # refused (422): the list is not as read
    assert api.obj("ClusterQueue", "", "shared")["metadata"]["finalizers"] == ["example.com/theirs"]
    assert anyio.run(hold_finalizers, api, world, sent) == 0  # not again on the version it was refused for
    world.apply(copy.deepcopy(api.obj("ClusterQueue", "", "shared")))
    assert anyio.run(hold_finalizers, api, world, sent) == 1
    assert api.obj("ClusterQueue", "", "shared")["metadata"]["finalizers"] == ["example.com/theirs", IN_USE_FINALIZER]


def test_the_keeper_adds_within_the_status_writes_budget_and_spends_from_it() -> None:
    """Half of the tokens left, and a trickle when none are: neither starves the other."""
    api, world, _ = _setup()
    for i in range(15):
        _fresh(api, world, f"bare-{i}")
    budget = _Budget(2 * HOLDS_AT_LEAST + 2)
    keeper = FinalizerKeeper(api, budget=budget)
    assert anyio.run(keeper.keep, world) == (HOLDS_AT_LEAST + 1, 0)
    assert budget.tokens == HOLDS_AT_LEAST + 1
    budget.tokens = 0
    assert anyio.run(keeper.keep, world) == (HOLDS_AT_LEAST, 0)  # all spent: still a trickle
    assert budget.tokens == -HOLDS_AT_LEAST
    budget.tokens = 100
    assert anyio.run(keeper.keep, world) == (15 - 2 * HOLDS_AT_LEAST - 1, 0)
    assert all(IN_USE_FINALIZER in api.obj("ClusterQueue", "", f"bare-{i}")["metadata"]["finalizers"]
               for i in range(15))


def test_a_pass_that_used_its_whole_allowance_asks_for_the_next_without_a_poke() -> None:
    """Under a storm of status writes the holds go a trickle a pass; the passes go on by themselves
    until none is due, so a thousand bare queues are held in minutes, not when publishes happen."""
    api, world, _ = _setup()
    for i in range(3 * HOLDS_AT_LEAST - 1):
        _fresh(api, world, f"bare-{i}")
    keeper = FinalizerKeeper(api, budget=_Budget(0), min_interval=0.0)

    def held() -> int:
        return sum(IN_USE_FINALIZER in (api.obj("ClusterQueue", "", f"bare-{i}")["metadata"].get("finalizers") or [])
                   for i in range(3 * HOLDS_AT_LEAST - 1))

    async def main() -> int:
        async with anyio.create_task_group() as tg:
            await tg.start(keeper.run)
            keeper.poke(world)  # once: the echoes never reach this World, nothing pokes again
            with anyio.fail_after(5):
                while held() < 3 * HOLDS_AT_LEAST - 1:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        return held()

    assert anyio.run(main) == 3 * HOLDS_AT_LEAST - 1


def test_a_stuck_finalizer_patch_holds_back_no_status_write() -> None:
    """The publisher only pokes the keeper: with every metadata patch hanging (an API server that
    stopped answering them, until a request timeout), the queues' status is still written."""
    world, snap = settle(*team())
    api = FakeApi()
    world.apply(copy.deepcopy(api.put(copy.deepcopy(world.raw["ClusterQueue/cq"]))))  # as the watch shows it
    assert world.raw["ClusterQueue/cq"]["metadata"]["resourceVersion"]
    client = FakeClient()
    stuck = anyio.Event()
    patched: list[str] = []

    async def patch_json(kind: str, namespace: str | None, name: str, operations: list) -> dict:
        patched.append(name)
        await stuck.wait()
        return await api.patch_json(kind, namespace, name, operations)

    client.patch_json = patch_json  # type: ignore[attr-defined]
    publisher = TreeStatusPublisher(client, min_interval=0.0)

    async def main() -> int:
        async with anyio.create_task_group() as tg:
            await tg.start(publisher.run)
            written = await publisher.publish(Settled(world, snap))
            await api.until(lambda: patched)  # the keeper's pass is under way, and hangs
            assert written == 2 and sorted(client.written()) == ["ClusterQueue/cq", "LocalQueue/ns/lq"]
            stuck.set()
            await api.until(lambda: IN_USE_FINALIZER in api.obj("ClusterQueue", "", "cq")["metadata"].get(
                "finalizers", ()))
            tg.cancel_scope.cancel()
        return len(patched)

    assert anyio.run(main) == 1


def test_a_flavor_gets_the_finalizer_and_a_deleted_one_keeps_it_while_a_queue_names_it() -> None:
    """Kueue's ResourceFlavor controller: the finalizer on every flavor; a deleted flavor is let go
    once no ClusterQueue names it, a terminating one included."""
    api, world, stored_q = _setup()  # q names "default" and holds Kueue's finalizer already
    stored = api.put(flavor("default"))
    world.apply(copy.deepcopy(stored))
    held: dict[str, str] = {}
    assert anyio.run(hold_finalizers, api, world, held) == 1
    stored = api.obj("ResourceFlavor", "", "default")
    assert stored["metadata"]["finalizers"] == [IN_USE_FINALIZER]
    world.apply(copy.deepcopy(stored))
    deleting = copy.deepcopy(stored)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-26T12:00:00Z"
    world.apply(copy.deepcopy(api.put(deleting)))
    assert "default" in world.flavors  # still usable while held, as in Kueue's cache
    released: dict[str, str] = {}
    assert anyio.run(release_finalizers, api, world, released) == 0  # q still names it
    _deleting(api, world, stored_q)  # q terminating (nothing admitted): it still names the flavor
    assert [k for k, *_ in finalizers._releases_due(world, {})] == ["ClusterQueue"]
    world.delete({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}})
    assert "q" not in world.cluster_queues
    assert anyio.run(release_finalizers, api, world, released) == 1
    assert api.obj("ResourceFlavor", "", "default")["metadata"]["finalizers"] == []
    assert [w for w in api.writes if w[1] == "ResourceFlavor"] == [("patch_json", "ResourceFlavor", "/default")] * 2


def _deleted_workload(api: FakeApi, world: World, keeper: FinalizerKeeper, name: str, *, owned: bool,
                      admitted: bool) -> str:
    """A Workload Kueue made (its finalizer on), deleted: the watch brings its deletionTimestamp."""
    wl = workload(name, "ns", "lq", cpu="1")
    wl["metadata"]["finalizers"] = [IN_USE_FINALIZER]
    wl["metadata"]["deletionTimestamp"] = "2026-11-26T12:00:00Z"
    if owned:
        wl["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                              "uid": f"uid-{name}", "controller": True}]
    if admitted:
        wl["status"] = {
            "admission": {"clusterQueue": "q", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    stored = api.put(wl)
    world.apply(copy.deepcopy(stored))
    keeper.observe(stored)
    return f"ns/{name}"


def test_a_deleted_workload_goes_unless_its_job_s_pods_may_still_hold_the_quota() -> None:
    """Kueue's workload controller lets a bare Workload go at once; one a Job owns goes once it
    holds no quota (here: its Job finished), never while admitted (its pods may run)."""
    api, world, _ = _setup()
    keeper = FinalizerKeeper(api)
    bare = _deleted_workload(api, world, keeper, "bare", owned=False, admitted=True)
    pending = _deleted_workload(api, world, keeper, "pending", owned=True, admitted=False)
    running = _deleted_workload(api, world, keeper, "running", owned=True, admitted=True)
    world.take_observed()  # the admitted ones hold quota, as a scheduler that adopted them would
    assert set(world.placed) == {bare, running}
    assert anyio.run(keeper.keep, world) == (0, 2)
    for key in (bare, pending):
        assert api.obj("Workload", "ns", key.split("/")[1])["metadata"]["finalizers"] == []
        keeper.observe(api.obj("Workload", "ns", key.split("/")[1]))  # the echo: nothing holds it now
    assert keeper.deleting == {f"Workload/{running}"}
    assert anyio.run(keeper.keep, world) == (0, 0)
    world.placed.pop(running)  # its Job finished: the quota is free
    assert anyio.run(keeper.keep, world) == (0, 1)
    assert api.obj("Workload", "ns", "running")["metadata"]["finalizers"] == []


def test_a_flavor_named_like_a_terminating_queue_is_still_held() -> None:
    api, world, stored = _setup()  # ClusterQueue q, held by Kueue's finalizer
    _deleting(api, world, stored)
    assert world.terminating == {"q"}
    world.apply(copy.deepcopy(api.put(flavor("q"))))
    assert anyio.run(hold_finalizers, api, world, {}) == 1
    assert api.obj("ResourceFlavor", "", "q")["metadata"]["finalizers"] == [IN_USE_FINALIZER]


def test_a_forbidden_patch_waits_for_the_next_version_instead_of_every_pass() -> None:
    """An RBAC role from before kueued patched flavors: refused once per version, not once a second."""
    api, world, _ = _setup()
    stored = api.put(flavor("gpu"))
    world.apply(copy.deepcopy(stored))
    api.fail_next.append(ApiForbidden(403, "Forbidden", "cannot patch resource resourceflavors"))
    sent: dict[str, str] = {}
    assert anyio.run(hold_finalizers, api, world, sent) == 0
    assert anyio.run(hold_finalizers, api, world, sent) == 0
    assert [w for w in api.writes if w[1] == "ResourceFlavor"] == [("patch_json", "ResourceFlavor", "/gpu")]
    labelled = copy.deepcopy(stored)
    labelled["metadata"]["labels"] = {"pool": "a"}
    world.apply(copy.deepcopy(api.put(labelled)))  # a new version (or a restart, as an upgrade of the role is)
    assert anyio.run(hold_finalizers, api, world, sent) == 1
