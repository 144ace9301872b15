"""The tree's status: Kueue's shapes computed from a settled World, and written only when they change.

A small World is scheduled in-process on the actors (``simulate_world``); its final
snapshot is what ``Coordinator.assemble()`` gives the daemon.  The publisher writes
through a fake client that records every merge patch and answers as the API server
would (the status it now holds); clocks are injected, nothing sleeps.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import msgspec
import pytest
from structlog.testing import capture_logs

from actors.simulation import simulate_world
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.kube import shapes
from kueued.kube.errors import ApiError, ApiNotFound, ApiUnavailable
from kueued.kube.events import EventRecorder
from kueued.kube.port import Condition, InMemoryPort
from kueued.kube.status_publisher import TreeStatusPublisher, WriteBudget
from kueued.kube.tree_status import Desired, covered, tree_status
from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
from kueued.scheduling.snapshot import Snapshot
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload

FAIR_SHARING = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}


def settle(*manifests: dict[str, Any]) -> tuple[World, Snapshot]:
    """Apply, schedule to quiescence on the actors, and return the World with its final balances."""
    world = World()
    for m in manifests:
        world.apply(m)

    async def main() -> Snapshot:
        coord = await simulate_world(world, InMemoryPort(), preemptor=make_preemptor, iterate=make_iterate(world))
        assert coord.final is not None
        return coord.final
    return world, anyio.run(main)


def team(ns: str = "ns", cq: str = "cq", *, cpu: str = "4", **extra: Any) -> list[dict[str, Any]]:
    return [namespace(ns), flavor("default"), cluster_queue(cq, quotas("default", cpu=cpu), **extra),
            local_queue("lq", ns, cq)]


def active(desired: Desired) -> Condition:
    (condition,) = desired.conditions
    return condition


# --- shapes -------------------------------------------------------------------------------------

def test_a_cluster_queue_counts_its_workloads_and_reports_its_usage_per_flavor() -> None:
    world, snap = settle(*team(), *(workload(n, "ns", "lq", created=i, cpu="2") for i, n in enumerate("abc")))
    cq = tree_status(world, snap)["ClusterQueue/cq"]
    usage = [{"name": "default", "resources": [{"name": "cpu", "total": "4", "borrowed": "0"}]}]
    assert cq.fields == {"pendingWorkloads": 1, "reservingWorkloads": 2, "admittedWorkloads": 2,
                         "flavorsReservation": usage, "flavorsUsage": usage, "fairSharing": None}
    assert active(cq) == Condition("Active", "True", "Ready", "Can admit new workloads")
    # what is written is what the CRD's status schema (kueued.kube.shapes) admits
    msgspec.convert({**{k: v for k, v in cq.fields.items() if v is not None},
                     "conditions": [msgspec.structs.asdict(c) for c in cq.conditions]},
                    shapes.ClusterQueueStatus)


def test_usage_lists_every_flavor_in_spec_order_with_its_resources_sorted_and_memory_in_binary_units() -> None:
    resources = [{"name": "memory", "nominalQuota": "8Gi"}, {"name": "cpu", "nominalQuota": 2}]
    groups = {"coveredResources": ["memory", "cpu"], "flavors": [{"name": "on-demand", "resources": resources},
                                                                 {"name": "spot", "resources": resources}]}
    cq = cluster_queue("cq", quotas("x", cpu="1"))
    cq["spec"]["resourceGroups"] = [groups]
    world, snap = settle(namespace("ns"), flavor("on-demand"), flavor("spot"), cq, local_queue("lq", "ns", "cq"),
                         workload("a", "ns", "lq", cpu="1500m", memory="3Gi"))
    assert tree_status(world, snap)["ClusterQueue/cq"].fields["flavorsUsage"] == [
        {"name": "on-demand", "resources": [{"name": "cpu", "total": "1500m", "borrowed": "0"},
                                            {"name": "memory", "total": "3Gi", "borrowed": "0"}]},
        {"name": "spot", "resources": [{"name": "cpu", "total": "0", "borrowed": "0"},
                                       {"name": "memory", "total": "0", "borrowed": "0"}]}]
    # the LocalQueue gauges' series: the same pairs in the same order, without the strings
    pairs = [(f["name"], r["name"]) for f in tree_status(world, snap)["ClusterQueue/cq"].fields["flavorsUsage"]
             for r in f["resources"]]
    assert covered(snap.cluster_queues["cq"].spec.resource_groups) == pairs == [
        ("on-demand", "cpu"), ("on-demand", "memory"), ("spot", "cpu"), ("spot", "memory")]


def test_a_queue_in_a_cohort_says_what_it_borrows() -> None:
    world, snap = settle(namespace("ns"), flavor("default"),
                         cluster_queue("a", quotas("default", cpu="2"), cohort="org"),
                         cluster_queue("b", quotas("default", cpu="4"), cohort="org"),
                         local_queue("lq", "ns", "a"), workload("w", "ns", "lq", cpu="5"))
    status = tree_status(world, snap)
    assert status["ClusterQueue/a"].fields["flavorsUsage"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "5", "borrowed": "3"}]}]
    assert status["ClusterQueue/b"].fields["flavorsUsage"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "0", "borrowed": "0"}]}]
    assert "Cohort/org" not in status  # an implicit Cohort has no object to write to


@pytest.mark.parametrize(("objects", "reason", "message"), [
    pytest.param([cluster_queue("cq", quotas("gpu", cpu="4"), quotas("tpu", cpu="4"))], "FlavorNotFound",
                 "Can't admit new workloads: references missing ResourceFlavor(s): gpu,tpu.", id="missing-flavors"),
    pytest.param([flavor("default"), cluster_queue("cq", quotas("default", cpu="4"), stopPolicy="Hold")], "Stopped",
                 "Can't admit new workloads: is stopped.", id="stopped"),
    pytest.param([cluster_queue("cq", quotas("gpu", cpu="4"), stopPolicy="Hold")], "Stopped",
                 "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): gpu.",
                 id="stopped-and-missing"),
    pytest.param([flavor("default"), cohort("x", parent="y"), cohort("y", parent="x"),
                  cluster_queue("cq", quotas("default", cpu="4"), cohort="x")], "CohortCycle",
                 "Can't admit new workloads: cohort x is part of a cycle.", id="cycle"),
    pytest.param([flavor("default"), cluster_queue("cq", quotas("default", cpu="4"), admissionChecksStrategy={
        "admissionChecks": [{"name": "prov"}]})], "AdmissionCheckNotFound",
                 "Can't admit new workloads: references missing AdmissionCheck(s): prov.", id="admission-checks"),
    pytest.param([cluster_queue("cq", quotas("gpu", cpu="4"), stopPolicy="Hold") | {"metadata": {
        "name": "cq", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["kueue.x-k8s.io/resource-in-use"]}}],
                 "Terminating", "Can't admit new workloads; clusterQueue is terminating", id="terminating"),
])
def test_an_inactive_cluster_queue_says_why_with_kueue_s_reasons(objects: list[dict], reason: str,
                                                                    message: str) -> None:
    world, snap = settle(namespace("ns"), *objects, local_queue("lq", "ns", "cq"))
    status = tree_status(world, snap)
    assert active(status["ClusterQueue/cq"]) == Condition("Active", "False", reason, message)
    assert active(status["LocalQueue/ns/lq"]) == Condition("Active", "False", "ClusterQueueIsInactive",
                                                           "Can't submit new workloads to clusterQueue")


def test_a_local_queue_counts_its_own_workloads_and_usage() -> None:
    world, snap = settle(*team(cpu="3"), local_queue("other", "ns", "cq"), local_queue("orphan", "ns", "nowhere"),
                         workload("a", "ns", "lq", created=1, cpu="1"),
                         workload("b", "ns", "other", created=2, cpu="2"),
                         workload("c", "ns", "lq", created=3, cpu="1"), workload("d", "ns", "orphan", cpu="1"))
    status = tree_status(world, snap)
    lq = status["LocalQueue/ns/lq"]
    usage = [{"name": "default", "resources": [{"name": "cpu", "total": "1"}]}]
    assert lq.fields == {"pendingWorkloads": 1, "reservingWorkloads": 1, "admittedWorkloads": 1,
                         "flavorsReservation": usage, "flavorsUsage": usage}
    assert active(lq) == Condition("Active", "True", "Ready", "Can submit new workloads to localQueue")
    assert status["LocalQueue/ns/other"].fields["admittedWorkloads"] == 1
    orphan = status["LocalQueue/ns/orphan"]
    assert orphan.fields["pendingWorkloads"] == 1 and orphan.fields["flavorsUsage"] == []
    assert active(orphan).reason == "ClusterQueueDoesNotExist"
    assert status["ClusterQueue/cq"].fields["pendingWorkloads"] == 1  # c; d routes nowhere
    msgspec.convert({**lq.fields, "conditions": [msgspec.structs.asdict(c) for c in lq.conditions]},
                    shapes.LocalQueueStatus)


def test_a_deactivated_workload_is_not_counted_pending_by_its_queues() -> None:
    """Kueue queues no workload with ``spec.active: false``: its queues' pendingWorkloads (and the
    pending gauge, which reads the queues) leave it out."""
    off = workload("off", "ns", "lq", created=2, cpu="2")
    off["spec"]["active"] = False
    world, snap = settle(*team(cpu="2"), workload("a", "ns", "lq", created=1, cpu="2"), off,
                         workload("b", "ns", "lq", created=3, cpu="2"))
    status = tree_status(world, snap)
    assert status["ClusterQueue/cq"].fields["pendingWorkloads"] == 1  # b; not off
    assert status["LocalQueue/ns/lq"].fields["pendingWorkloads"] == 1


def test_a_stopped_local_queue_s_waiting_workloads_are_counted_nowhere() -> None:
    """Kueue's queue manager drops a stopped LocalQueue's workloads from its ClusterQueue, and the
    LocalQueue reports 0 pending (LocalQueueReconciler.UpdateStatusIfChanged)."""
    objects = team(cpu="2")
    objects[-1]["spec"]["stopPolicy"] = "Hold"
    world, snap = settle(*objects, workload("a", "ns", "lq", created=1, cpu="2"),
                         workload("b", "ns", "lq", created=2, cpu="2"))
    status = tree_status(world, snap)
    assert status["ClusterQueue/cq"].fields["pendingWorkloads"] == 0
    assert status["LocalQueue/ns/lq"].fields["pendingWorkloads"] == 0


def test_fair_sharing_adds_each_node_s_weighted_share() -> None:
    world, snap = settle(FAIR_SHARING, namespace("ns"), flavor("default"), cohort("org"),
                         cluster_queue("a", quotas("default", cpu="2"), cohort="org"),
                         cluster_queue("b", quotas("default", cpu="2"), cohort="org"),
                         local_queue("lq", "ns", "a"), workload("w", "ns", "lq", cpu="3"))
    status = tree_status(world, snap)
    assert status["ClusterQueue/a"].fields["fairSharing"] == {"weightedShare": 250}  # 1 of the 4 the cohort lends
    assert status["ClusterQueue/b"].fields["fairSharing"] == {"weightedShare": 0}
    assert status["Cohort/org"].fields == {"fairSharing": {"weightedShare": 0}}  # a root borrows from no one
    without, snap2 = settle(*team(), cohort("org"))
    assert tree_status(without, snap2)["Cohort/org"].fields == {"fairSharing": None}


def test_admission_fair_sharing_reports_each_local_queue_s_consumed_resources() -> None:
    world, snap = settle(*team())
    lq = tree_status(world, snap, consumed={"ns/lq": {"cpu": 1.5, "memory": 2**30}},
                     consumed_at="2026-01-01T00:00:00Z")["LocalQueue/ns/lq"]
    assert lq.fields["fairSharing"] == {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": "1500m", "memory": "1Gi"}, "lastUpdate": "2026-01-01T00:00:00Z"}}
    assert "fairSharing" not in tree_status(world, snap)["LocalQueue/ns/lq"].fields  # off: left alone


# --- the publisher ------------------------------------------------------------------------------

class Settled:
    """What the publisher reads of a coordinator, over a settled World."""

    def __init__(self, world: World, snapshot: Snapshot) -> None:
        self.world = world
        self.snapshot = snapshot
        self.rounds = 1
        self.afs = AdmissionFairSharing(world, clock=lambda: 0.0)

    async def assemble(self) -> Snapshot:
        return self.snapshot


class FakeClient:
    """Merge patches on status, answered with the status the object now has; scripted failures."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.status: dict[str, dict[str, Any]] = {}
        self.failures: dict[str, list[ApiError]] = {}
        self.events: list[tuple[str, str, str, str]] = []

    async def patch_status(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        key = f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
        self.calls.append((key, body))
        if self.failures.get(key):
            raise self.failures[key].pop(0)
        status = self.status.setdefault(key, {})
        for field, value in body["status"].items():
            if value is None:
                status.pop(field, None)
            else:
                status[field] = value
        return {"kind": kind, "status": dict(status)}

    async def create_event(self, regarding: dict[str, Any], *, reason: str, message: str, type: str = "Normal",
                           action: str = "", reporter: str = "kueued") -> dict[str, Any]:
        self.events.append((regarding["metadata"]["name"], type, reason, message))
        return {}

    def written(self) -> list[str]:
        return [key for key, _ in self.calls]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def publish(publisher: TreeStatusPublisher, coord: Settled, *, rounds: int | None = None) -> int:
    if rounds is not None:
        coord.rounds = rounds
    return anyio.run(publisher.publish, coord)


def test_the_first_publish_writes_every_object_and_the_next_only_what_changed() -> None:
    world, snap = settle(*team(), workload("a", "ns", "lq", cpu="1"))
    client, clock = FakeClient(), Clock()
    publisher = TreeStatusPublisher(client, clock=clock)
    coord = Settled(world, snap)
    assert publish(publisher, coord) == 2
    assert sorted(client.written()) == ["ClusterQueue/cq", "LocalQueue/ns/lq"]
    body = dict(client.calls)["ClusterQueue/cq"]["status"]
    assert body["admittedWorkloads"] == 1 and body["conditions"][0]["type"] == "Active"
    clock.now += 10
    assert publish(publisher, coord, rounds=2) == 0  # recomputed, nothing moved: nothing written
    assert publish(publisher, coord) == 0  # nothing ran: not even recomputed
    assert len(client.calls) == 2


def test_an_object_that_already_says_it_is_not_written_again_after_a_restart() -> None:
    world, snap = settle(*team(), workload("a", "ns", "lq", cpu="1"))
    first = FakeClient()
    anyio.run(TreeStatusPublisher(first).publish, Settled(world, snap))
    for key, status in first.status.items():  # the objects as the watch now shows them
        world.raw[key]["status"] = status
    again = FakeClient()
    assert anyio.run(TreeStatusPublisher(again).publish, Settled(world, snap)) == 0
    assert again.calls == []


def test_a_change_within_the_interval_is_written_at_the_first_publish_after_it() -> None:
    world, snap = settle(*team(cpu="1"), workload("a", "ns", "lq", created=1, cpu="1"))
    client, clock = FakeClient(), Clock()
    publisher = TreeStatusPublisher(client, clock=clock, min_interval=1.0)
    coord = Settled(world, snap)
    publish(publisher, coord)
    world.apply(workload("b", "ns", "lq", created=2, cpu="1"))  # one more pending: both counts move
    clock.now += 0.5
    assert publish(publisher, coord, rounds=2) == 0  # held back
    clock.now += 0.4
    assert publish(publisher, coord) == 0  # still inside the interval
    clock.now += 0.2
    assert publish(publisher, coord) == 2  # nothing ran since, but what was held back goes out
    assert client.status["ClusterQueue/cq"]["pendingWorkloads"] == 1
    assert client.status["LocalQueue/ns/lq"]["pendingWorkloads"] == 1
    assert publish(publisher, coord) == 0


def test_conditions_keep_their_transition_time_while_their_status_stays() -> None:
    world, snap = settle(*team(), workload("a", "ns", "lq", cpu="1"))
    client, clock, wall = FakeClient(), Clock(), Clock()
    wall.now = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    publisher = TreeStatusPublisher(client, clock=clock, wall=wall)
    coord = Settled(world, snap)
    publish(publisher, coord)
    world.apply(workload("b", "ns", "lq", cpu="1"))
    clock.now += 5
    wall.now += 3600
    publish(publisher, coord, rounds=2)
    (condition,) = client.status["ClusterQueue/cq"]["conditions"]
    assert condition["lastTransitionTime"] == "2026-01-01T00:00:00Z"  # the count moved, Active did not
    assert client.status["ClusterQueue/cq"]["pendingWorkloads"] == 1


class LostAnswers(FakeClient):
    """A write the API server applied but whose answer never came (the connection reset after it
    was forwarded): the client hears an error."""

    def __init__(self) -> None:
        super().__init__()
        self.lose: set[str] = set()

    async def patch_status(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await super().patch_status(kind, namespace, name, body)
        key = f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
        if key in self.lose:
            self.lose.discard(key)
            raise ApiUnavailable(None, "ConnectionError", "connection reset by peer")
        return answer


def test_a_write_whose_answer_was_lost_is_never_taken_as_not_applied() -> None:
    """Admitted 1, then 2 (that write lands, its answer is lost), then 1 again: what the object
    shows is unknown after the lost answer, so the 1 is written, not taken as already there
    (it stayed at 2 for ever under the fault proxy, tests/reliability/test_api_faults.py)."""
    one = Settled(*settle(*team(), workload("a", "ns", "lq", cpu="1")))
    two = Settled(*settle(*team(), workload("a", "ns", "lq", cpu="1"), workload("b", "ns", "lq", cpu="1")))
    client, clock = LostAnswers(), Clock()
    publisher = TreeStatusPublisher(client, clock=clock)
    assert publish(publisher, one) == 2
    client.lose.add("ClusterQueue/cq")
    clock.now += 2
    two.rounds = 2
    publish(publisher, two)
    assert client.status["ClusterQueue/cq"]["admittedWorkloads"] == 2  # applied, though kueued heard an error
    clock.now += 2
    one.rounds = 3
    publish(publisher, one)
    assert client.status["ClusterQueue/cq"]["admittedWorkloads"] == 1


def test_a_refused_write_is_logged_once_and_tried_again() -> None:
    world, snap = settle(*team())
    client, clock = FakeClient(), Clock()
    client.failures["ClusterQueue/cq"] = [ApiUnavailable(503, "ServiceUnavailable"), ApiUnavailable(503, "Down")]
    publisher = TreeStatusPublisher(client, clock=clock)
    coord = Settled(world, snap)
    with capture_logs() as logs:
        assert publish(publisher, coord) == 1  # the LocalQueue
        clock.now += 2
        assert publish(publisher, coord) == 0  # refused again, nothing else to do
        clock.now += 2
        assert publish(publisher, coord) == 1
    assert [e["object"] for e in logs if e["event"] == "status_write_failed"] == ["ClusterQueue/cq"]
    assert publisher.counts["failed"] == 2
    assert "ClusterQueue/cq" in client.status


def test_an_object_the_api_server_no_longer_has_is_forgotten_until_a_new_version_shows_up() -> None:
    world, snap = settle(*team())
    client, clock = FakeClient(), Clock()
    client.failures["ClusterQueue/cq"] = [ApiNotFound(404, "NotFound")]
    publisher = TreeStatusPublisher(client, clock=clock)
    coord = Settled(world, snap)
    publish(publisher, coord)
    clock.now += 5
    publish(publisher, coord, rounds=2)
    assert client.written().count("ClusterQueue/cq") == 1  # the same version: not asked again
    world.raw["ClusterQueue/cq"]["metadata"]["uid"] = "recreated"
    publish(publisher, coord, rounds=3)
    assert client.written().count("ClusterQueue/cq") == 2


def test_writes_are_bounded_in_flight() -> None:
    world, snap = settle(namespace("ns"), flavor("default"),
                         *(cluster_queue(f"cq{i}", quotas("default", cpu="1")) for i in range(12)))

    class Slow(FakeClient):
        def __init__(self) -> None:
            super().__init__()
            self.in_flight = self.most = 0

        async def patch_status(self, *args: Any) -> dict[str, Any]:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            self.in_flight -= 1
            return await super().patch_status(*args)

    client = Slow()
    assert anyio.run(TreeStatusPublisher(client, concurrency=3).publish, Settled(world, snap)) == 12
    assert client.most == 3


def test_under_admission_fair_sharing_a_local_queue_reports_what_it_consumed() -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "admissionFairSharing": {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}}
    afs_queue = cluster_queue("cq", quotas("default", cpu="4"),
                              admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
    world, snap = settle(config, namespace("ns"), flavor("default"), afs_queue, local_queue("lq", "ns", "cq"),
                         workload("a", "ns", "lq", cpu="2"))
    coord = Settled(world, snap)
    coord.afs = AdmissionFairSharing(world, clock=lambda: 1_767_225_600.0)  # 2026-01-01T00:00:00Z
    assert coord.afs.ledger is not None
    coord.afs.ledger.consumed["ns/lq"] = {"cpu": 0.5}
    coord.afs.ledger.penalty["ns/lq"] = {"cpu": 0.25}
    client = FakeClient()
    publish(TreeStatusPublisher(client), coord)
    assert client.status["LocalQueue/ns/lq"]["fairSharing"] == {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": "750m"}, "lastUpdate": "2026-01-01T00:00:00Z"}}


def test_admission_fair_sharing_status_follows_its_samples_while_no_round_runs() -> None:
    """Nothing changes, so no round runs; the samples go on (every sampling interval) and each one's
    decayed usage is written, as Kueue's LocalQueue controller writes it on its own timer."""
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "admissionFairSharing": {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}}
    afs_queue = cluster_queue("cq", quotas("default", cpu="4"),
                              admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"})
    world, snap = settle(config, namespace("ns"), flavor("default"), afs_queue, local_queue("lq", "ns", "cq"))
    coord = Settled(world, snap)
    now = [1_767_225_600.0]
    coord.afs = AdmissionFairSharing(world, clock=lambda: now[0])
    assert coord.afs.ledger is not None
    coord.afs.ledger.consumed["ns/lq"] = {"cpu": 1.0}
    client, clock = FakeClient(), Clock()
    publisher = TreeStatusPublisher(client, clock=clock)
    publish(publisher, coord)
    first = client.status["LocalQueue/ns/lq"]["fairSharing"]["admissionFairSharingStatus"]
    now[0] += 3  # three samples later, the same round
    clock.now += 10
    publish(publisher, coord)
    later = client.status["LocalQueue/ns/lq"]["fairSharing"]["admissionFairSharingStatus"]
    assert (first["lastUpdate"], later["lastUpdate"]) == ("2026-01-01T00:00:00Z", "2026-01-01T00:00:03Z")
    assert later["consumedResources"] != first["consumedResources"]  # decayed towards nothing held


def test_with_admission_fair_sharing_configured_every_local_queue_reports_it() -> None:
    """Kueue's LocalQueue controller keeps the consumed usage of every LocalQueue once the Configuration
    sets admissionFairSharing, before any ClusterQueue orders by it."""
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "admissionFairSharing": {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}}
    world, snap = settle(config, namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="4")),
                         local_queue("lq", "ns", "cq"))
    coord = Settled(world, snap)
    coord.afs = AdmissionFairSharing(world, clock=lambda: 1_767_225_600.0)
    client = FakeClient()
    publish(TreeStatusPublisher(client), coord)
    assert client.status["LocalQueue/ns/lq"]["fairSharing"]["admissionFairSharingStatus"] == {
        "consumedResources": {}, "lastUpdate": "2026-01-01T00:00:00Z"}


# --- objects a webhook would have refused -----------------------------------------------------------

BAD_CQ = cluster_queue("bad", quotas("default", cpu=("4", "2")))  # a borrowingLimit without a cohort
BAD_REASON = ('spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Invalid value: "2": '
              "must be nil when cohort is empty")


def test_a_refused_queue_gets_accepted_false_and_one_warning_and_true_once_a_version_passes() -> None:
    world, snap = settle(*team())
    bad = {**BAD_CQ, "metadata": {"name": "bad", "uid": "u1", "generation": 1}}
    assert world.apply(bad)[0].value == "rejected" and world.rejected["ClusterQueue/bad"] == BAD_REASON
    client, clock = FakeClient(), Clock()
    recorder = EventRecorder(client)
    publisher = TreeStatusPublisher(client, recorder=recorder, clock=clock)
    coord = Settled(world, snap)
    assert publisher.validated(bad, BAD_REASON) is True
    publish(publisher, coord)
    (accepted,) = client.status["ClusterQueue/bad"]["conditions"]
    assert accepted | {"lastTransitionTime": "-"} == {
        "type": "Accepted", "status": "False", "reason": "ValidationFailed", "message": BAD_REASON,
        "lastTransitionTime": "-", "observedGeneration": 1}
    echo = {**bad, "status": client.status["ClusterQueue/bad"]}
    assert publisher.validated(echo, BAD_REASON) is False  # the echo of the write: the same refusal
    assert recorder.pending_events() == 1  # one warning, not one per echo
    good = cluster_queue("bad", quotas("default", cpu="4"))
    good["metadata"].update(uid="u1", generation=2)
    world.apply(good)
    publisher.validated({**good, "status": client.status["ClusterQueue/bad"]}, None)
    clock.now += 5
    publish(publisher, Settled(world, settle(*team(), good)[1]), rounds=2)
    conditions = {c["type"]: c for c in client.status["ClusterQueue/bad"]["conditions"]}
    assert (conditions["Accepted"]["status"], conditions["Accepted"]["reason"]) == ("True", "Valid")
    assert conditions["Active"]["status"] == "True"

    async def drain() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(recorder.run)
            while recorder.pending_events():
                await anyio.lowlevel.checkpoint()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    anyio.run(drain)
    assert client.events == [("bad", "Warning", "ValidationFailed", BAD_REASON)]


def test_a_refused_elastic_quota_gets_one_warning_and_no_condition_from_the_publisher() -> None:
    """Its Accepted condition is the elastic tree's to write (actors.elastic.status); the warning
    Event says what Koordinator's webhook would have, once per refused version."""
    client = FakeClient()
    recorder = EventRecorder(client)
    publisher = TreeStatusPublisher(client, recorder=recorder)
    world, snap = settle(*team())
    bad = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
           "metadata": {"name": "eq", "namespace": "ns", "uid": "u-eq", "generation": 1},
           "spec": {"min": {"cpu": "10"}, "max": {"cpu": "5"}}}
    assert publisher.validated(bad, "spec.min.cpu: min 10 > max 5") is True
    assert publisher.validated(bad, "spec.min.cpu: min 10 > max 5") is False  # the echo of an annotation write
    publish(publisher, Settled(world, snap))
    assert not [key for key in client.written() if key.startswith("ElasticQuota")]
    assert recorder.pending_events() == 1
    assert publisher.validated({**bad, "metadata": {**bad["metadata"], "generation": 2}},
                               "spec.min.cpu: min 10 > max 5") is True  # a new version, refused again


def test_a_refused_workload_keeps_its_other_conditions() -> None:
    world, snap = settle(*team(), workload("a", "ns", "lq", cpu="1"))
    admitted = world.raw["Workload/ns/a"]
    admitted["status"] = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                          "message": "Quota reserved", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    client = FakeClient()
    publisher = TreeStatusPublisher(client)
    publisher.validated({**admitted, "spec": {"queueName": "lq"}}, "spec.podSets: Required value")
    publish(publisher, Settled(world, snap))
    (body,) = [b for key, b in client.calls if key == "Workload/ns/a"]
    assert [c["type"] for c in body["status"]["conditions"]] == ["QuotaReserved", "Accepted"]
    # the API port's next write builds on World.raw: it now holds both
    assert [c["type"] for c in world.raw["Workload/ns/a"]["status"]["conditions"]] == ["QuotaReserved", "Accepted"]


def test_a_refused_flavor_gets_only_a_warning_its_crd_has_no_status() -> None:
    client = FakeClient()
    recorder = EventRecorder(client)
    publisher = TreeStatusPublisher(client, recorder=recorder)
    world, snap = settle(*team())
    bad = flavor("Bad_Name")
    assert publisher.validated(bad, "metadata.name: Invalid value") is True
    publish(publisher, Settled(world, snap))
    assert not [key for key in client.written() if key.startswith("ResourceFlavor")]
    assert recorder.pending_events() == 1


def test_a_deleted_object_is_forgotten() -> None:
    world, snap = settle(*team())
    client = FakeClient()
    publisher = TreeStatusPublisher(client)
    publisher.validated(BAD_CQ, BAD_REASON)
    publisher.forget("ClusterQueue/bad")
    publish(publisher, Settled(world, snap))
    assert "ClusterQueue/bad" not in client.written()


def test_a_thousand_queues_statuses_go_out_a_bounded_batch_a_publish(monkeypatch: Any) -> None:
    """Publishing never holds the loop for every object at once: at most WRITES_PER_PUBLISH a
    call (here 3 of 8 objects), the rest held back first in line for the next calls."""
    import kueued.kube.status_publisher as sp
    monkeypatch.setattr(sp, "WRITES_PER_PUBLISH", 3)
    docs = [namespace("ns"), flavor("default")]
    for i in range(4):
        docs += [cluster_queue(f"cq{i}", quotas("default", cpu="1")), local_queue(f"lq{i}", "ns", f"cq{i}")]
    world, snap = settle(*docs)
    client = FakeClient()
    publisher = TreeStatusPublisher(client, clock=Clock())
    coord = Settled(world, snap)
    assert [publish(publisher, coord) for _ in range(4)] == [3, 3, 2, 0]
    assert len(client.written()) == len(set(client.written())) == 8


def test_under_a_storm_status_writes_keep_to_the_budget_and_every_object_gets_its_turn() -> None:
    """Six queues and their LocalQueues (twelve objects) whose counts move before every publish,
    a budget of 2 writes a second with bursts of 4: the first publish spends the burst, each
    later one what a second earns, and the longest unwritten go first, so every object is
    written once before any is written twice (the ClusterQueues, listed first, used to take
    the whole budget and the LocalQueues were never written)."""
    docs = [namespace("ns"), flavor("default")]
    for i in range(6):
        docs += [cluster_queue(f"cq{i}", quotas("default", cpu="1")), local_queue(f"lq{i}", "ns", f"cq{i}")]
    world, snap = settle(*docs)
    client, clock = FakeClient(), Clock()
    publisher = TreeStatusPublisher(client, clock=clock, min_interval=0.0, rate=2.0, burst=4)
    coord = Settled(world, snap)
    done = []
    for second in range(10):
        for i in range(6):  # one more pending workload everywhere: every object's status moves
            world.apply(workload(f"w{second}-{i}", "ns", f"lq{i}", created=second, cpu="1"))
        done.append(publish(publisher, coord, rounds=1 + second))
        clock.now += 1.0
    assert done == [4, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    written = client.written()
    assert len(set(written[:12])) == 12  # everyone once, then the round starts again
    assert written[12:] == written[:len(written) - 12]
    assert publisher.counts["over_budget"] > 0
    clock.now += 10.0  # a quiet spell refills the bucket up to the burst, no further
    assert publisher.budget.available() == 4


def test_the_budget_follows_a_rate_that_changes_while_running() -> None:
    """The daemon hands the publisher its setting, re-read on SIGHUP: a new rate takes effect
    for the tokens earned from then on."""
    clock, rate = Clock(), [1.0]
    budget = WriteBudget(lambda: rate[0], 100, clock)
    budget.spend(budget.available())
    clock.now += 2.0
    assert budget.available() == 2
    rate[0] = 10.0
    clock.now += 2.0
    assert budget.available() == 22


def test_working_the_statuses_out_is_paced_by_its_cost_and_nothing_is_stranded() -> None:
    """A tree whose statuses take 100 ms to work out, rounds before every publish half a second
    apart: they are worked out again no sooner than 0.1 / SHARE seconds after the last time;
    the publishes between only look at what was put off, and the first one after the pace
    writes what moved meanwhile."""
    world, snap = settle(*team(cpu="4"), workload("a", "ns", "lq", created=1, cpu="1"))
    client, clock = FakeClient(), Clock()
    publisher = TreeStatusPublisher(client, clock=clock, min_interval=0.0)
    worked_out: list[float] = []

    class Costly(Settled):
        async def assemble(self) -> Snapshot:
            worked_out.append(clock.now)
            clock.now += 0.1
            return self.snapshot

    coord = Costly(world, snap)
    publish(publisher, coord)
    assert client.status["ClusterQueue/cq"]["pendingWorkloads"] == 0  # "a" is admitted
    world.apply(workload("b", "ns", "lq", created=2, cpu="1"))  # one more pending
    assert publisher.put_off() == math.inf  # nothing ran since: nothing put off
    written, waits = [], []
    for r in range(2, 12):
        clock.now += 0.5
        written.append(publish(publisher, coord, rounds=r))
        waits.append(round(publisher.put_off(), 2))  # how long an idle daemon may wait to publish
    pace = 0.1 / publisher.pace.share
    assert worked_out[1] - worked_out[0] >= pace and len(worked_out) == 2  # 5.1 s: once more, at 104.1
    assert written == [0] * 7 + [2, 0, 0]  # the ClusterQueue's and the LocalQueue's pending count
    assert waits == [3.4, 2.9, 2.4, 1.9, 1.4, 0.9, 0.4, math.inf, 3.4, 2.9]  # rounds keep moving
    assert client.status["ClusterQueue/cq"]["pendingWorkloads"] == 1
