"""KubePort's writes, read off a fake status client: Kueue's shapes, the resourceVersion the
decision was made on, the Pending condition's rate limit, conditions merged by type."""

from __future__ import annotations

from typing import Any

from kueued.kube.commits import PENDING_PER_FLUSH, KubePort
from kueued.kube.conditions import merge_conditions
from kueued.kube.errors import ApiConflict, ApiUnavailable
from kueued.kube.port import Condition


class FakeClient:
    def __init__(self) -> None:
        self.writes: list[tuple[str, str, dict[str, Any]]] = []
        self.conflict = False

    async def patch_status(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        if self.conflict:
            raise ApiConflict(409, "Conflict", "the object has been modified")
        self.writes.append((kind, f"{namespace}/{name}", body))
        return {"metadata": {"resourceVersion": str(100 + len(self.writes))}, "status": body.get("status")}

    async def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        self.writes.append((kind, f"{namespace}/{name}", body))
        return body


def _port(manifest: dict[str, Any], now: list[float]) -> tuple[KubePort, FakeClient]:
    client = FakeClient()
    port = KubePort(client, manifest_of=lambda key: manifest if key == "ns/w" else None,
                    requests_of=lambda key: [("main", 2, {"cpu": 3000})], pending_interval=10.0,
                    clock=lambda: now[0])
    return port, client


def _workload(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "7", "generation": 1},
            "status": status}


async def test_an_admission_is_kueue_s_shape_with_the_version_decided_on() -> None:
    port, client = _port(_workload(), [0.0])
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}},
                            usage={("default", "cpu"): 3000})
    ((kind, key, body),) = client.writes
    assert (kind, key, body["metadata"]) == ("Workload", "ns/w", {"resourceVersion": "7"})
    assert body["status"]["admission"] == {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "count": 2, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "3"}}]}
    assert {(c["type"], c["status"]) for c in body["status"]["conditions"]} == {("QuotaReserved", "True"),
                                                                                ("Admitted", "True")}
    assert port.counts[("admit", "cq", "")] == 1


async def test_a_partial_admission_records_the_pods_admitted_and_their_usage() -> None:
    """Partial admission took one pod of two: the admission says so, as Kueue's does (count and
    resourceUsage of the pods admitted), so a Job runs that many and a restart charges that much."""
    port, client = _port(_workload(), [0.0])
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}},
                            usage={("default", "cpu"): 1500}, counts={"main": 1})
    ((_, _, body),) = client.writes
    assert body["status"]["admission"]["podSetAssignments"] == [
        {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1500m"}}]


async def test_a_drain_is_evicted_with_its_own_reason_and_no_preempted_condition() -> None:
    port, client = _port(_workload(), [0.0])
    assert await port.evict("ns/w", cluster_queue="cq", reason="Deactivated", message="The workload is deactivated",
                            preempted=False)
    first = client.writes[0][2]["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in first] == [("Evicted", "True", "Deactivated")]
    second = client.writes[1][2]["status"]["conditions"]  # not requeued at once: it waits to be active again
    assert ("Requeued", "False", "Deactivated") in [(c["type"], c["status"], c["reason"]) for c in second]
    assert port.counts[("evict", "cq", "Deactivated")] == 1


async def test_a_refused_admission_writes_nothing_and_says_so() -> None:
    port, client = _port(_workload(), [0.0])
    client.conflict = True
    assert not await port.admit("ns/w", cluster_queue="cq", flavors={}, usage={})
    assert port.refused == 1 and not port.counts


async def test_admitted_again_after_an_eviction_turns_evicted_and_preempted_off() -> None:
    evicted = [{"type": "Evicted", "status": "True", "reason": "Preempted", "lastTransitionTime": "t0"},
               {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "lastTransitionTime": "t0"}]
    port, client = _port(_workload(conditions=evicted), [0.0])
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}}, usage={})
    conditions = {c["type"]: c["status"] for c in client.writes[0][2]["status"]["conditions"]}
    assert conditions == {"Evicted": "False", "Preempted": "False", "QuotaReserved": "True", "Admitted": "True"}


async def test_admitted_again_after_a_drain_invents_no_preempted_condition_and_keeps_the_message() -> None:
    """Kueue's ``resetActiveCondition``: only a condition that is on is turned off, and its message
    stays after "Previously: "; a drained workload was never preempted, so it gets no Preempted."""
    drained = [{"type": "Evicted", "status": "True", "reason": "LocalQueueStopped",
                "message": "The LocalQueue is stopped", "lastTransitionTime": "t0"}]
    port, client = _port(_workload(conditions=drained), [0.0])
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}}, usage={})
    conditions = {c["type"]: (c["status"], c["reason"], c["message"])
                  for c in client.writes[0][2]["status"]["conditions"]}
    assert "Preempted" not in conditions
    assert conditions["Evicted"] == ("False", "QuotaReserved", "Previously: The LocalQueue is stopped")


async def test_a_deactivated_pending_workload_gets_evicted_deactivated_not_a_pending_condition() -> None:
    port, client = _port(_workload(), [0.0])
    port.pending("ns/w", "the Workload is deactivated (spec.active is false)")
    assert await port.flush_pending() == 1
    conditions = client.writes[0][2]["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions] == [
        ("Evicted", "True", "Deactivated", "The workload is deactivated")]


async def test_an_eviction_is_written_in_two_phases() -> None:
    manifest = _workload(admission={"clusterQueue": "cq"})
    port, client = _port(manifest, [0.0])
    assert await port.evict("ns/w", cluster_queue="cq", reason="InClusterQueue", message="for ns/x")
    first, second = (body["status"] for _, _, body in client.writes)
    assert {c["type"]: c["status"] for c in first["conditions"]} == {"Evicted": "True", "Preempted": "True"}
    assert "admission" not in first
    assert second["admission"] is None  # the reservation cleared: the quota is free
    assert {c["type"]: c["status"] for c in second["conditions"]}["QuotaReserved"] == "False"
    requeued = next(c for c in second["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"], requeued["message"]) == ("True", "Preempted", "for ns/x")


async def test_the_pending_condition_is_written_on_change_at_most_once_an_interval() -> None:
    now = [0.0]
    port, client = _port(_workload(), now)
    port.pending("ns/w", "insufficient quota: 4 used + 2 requested > 4")
    assert await port.flush_pending() == 1
    port.pending("ns/w", "insufficient quota: 4 used + 2 requested > 4")  # unchanged: nothing to write
    assert await port.flush_pending() == 0
    port.pending("ns/w", "insufficient quota: 3 used + 2 requested > 4")  # changed, but within the interval
    assert await port.flush_pending() == 0
    now[0] = 10.0
    assert await port.flush_pending() == 1
    messages = [body["status"]["conditions"][0]["message"] for _, _, body in client.writes]
    assert messages == ["insufficient quota: 4 used + 2 requested > 4", "insufficient quota: 3 used + 2 requested > 4"]


async def test_a_change_of_reason_is_written_at_once_whatever_the_interval() -> None:
    """The interval paces the scheduler's churn of Pending sentences only: a ClusterQueue that appears
    (inactive, then active) changes the reason, and Kueue's workload controller writes that at once."""
    now = [0.0]
    port, client = _port(_workload(), now)
    port.pending("ns/w", "ClusterQueue cq doesn't exist")
    assert await port.flush_pending() == 1
    now[0] = 1.0
    port.pending("ns/w", "ClusterQueue cq is inactive: flavor(s) gpu not found")  # Inadmissible, another message
    assert await port.flush_pending() == 1
    now[0] = 2.0
    port.pending("ns/w", "insufficient quota: 4 used + 2 requested > 4")  # Inadmissible -> Pending
    assert await port.flush_pending() == 1
    now[0] = 3.0
    port.pending("ns/w", "insufficient quota: 3 used + 2 requested > 4")  # Pending -> Pending: paced
    assert await port.flush_pending() == 0
    port.pending("ns/w", "LocalQueue lq doesn't exist")  # Pending -> Inadmissible, over the paced one
    assert await port.flush_pending() == 1
    written = [(c["reason"], c["message"]) for _, _, body in client.writes for c in body["status"]["conditions"]
               if c["type"] == "QuotaReserved"]
    assert written == [("Inadmissible", "ClusterQueue cq doesn't exist"),
                       ("Inadmissible", "ClusterQueue cq is inactive"),
                       ("Pending", "insufficient quota: 4 used + 2 requested > 4"),
                       ("Inadmissible", "LocalQueue lq doesn't exist")]
    now[0] = 4.0
    port.pending("ns/w", "insufficient quota: 3 used + 2 requested > 4")  # back to Pending: at once again
    assert await port.flush_pending() == 1
    port.pending("ns/w", "insufficient quota: 2 used + 2 requested > 4")
    assert await port.flush_pending() == 0
    now[0] = 14.0
    assert await port.flush_pending() == 1


async def test_a_burst_of_pending_reasons_goes_out_a_bounded_batch_a_flush() -> None:
    """A thousand new Workloads' reasons do not hold the daemon's loop for one long flush: at most
    PENDING_PER_FLUSH a call, the rest on the next calls, none lost and none written twice."""
    manifests = {f"ns/w{i}": {**_workload(), "metadata": {"name": f"w{i}", "namespace": "ns",
                                                          "resourceVersion": "7", "generation": 1}}
                 for i in range(PENDING_PER_FLUSH * 2 + 10)}
    client = FakeClient()
    port = KubePort(client, manifest_of=manifests.get, requests_of=lambda key: [], pending_interval=10.0,
                    clock=lambda: 0.0)
    for key in manifests:
        port.pending(key, "insufficient quota")
    flushes = [await port.flush_pending() for _ in range(4)]
    assert flushes == [PENDING_PER_FLUSH, PENDING_PER_FLUSH, 10, 0]
    assert sorted(name for _, name, _ in client.writes) == sorted(manifests)


async def test_a_flush_stops_between_batches_once_changes_wait_and_keeps_the_rest_due() -> None:
    """Reasons go WRITES_IN_FLIGHT at a time; once ``busy()`` says changes wait, the flush stops (the
    first batch always goes, so reasons progress under a steady stream) and the rest go later."""
    from kueued.kube.commits import WRITES_IN_FLIGHT
    manifests = {f"ns/w{i}": {**_workload(), "metadata": {"name": f"w{i}", "namespace": "ns",
                                                          "resourceVersion": "7", "generation": 1}}
                 for i in range(WRITES_IN_FLIGHT * 3)}
    client = FakeClient()
    port = KubePort(client, manifest_of=manifests.get, requests_of=lambda key: [], pending_interval=10.0,
                    clock=lambda: 0.0)
    for key in manifests:
        port.pending(key, "insufficient quota")
    assert await port.flush_pending(busy=lambda: True) == WRITES_IN_FLIGHT
    assert await port.flush_pending(busy=lambda: False) == WRITES_IN_FLIGHT * 2
    assert await port.flush_pending() == 0
    assert sorted(name for _, name, _ in client.writes) == sorted(manifests)  # each once


def test_conditions_are_set_by_type_and_keep_their_transition_time_when_unchanged() -> None:
    current = [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": "t0"},
               {"type": "Other", "status": "True", "lastTransitionTime": "t0"}]
    merged = merge_conditions(current, [Condition("QuotaReserved", "False", "Pending", "new words"),
                                        Condition("Admitted", "True", "Admitted")], generation=3, now="t1")
    by_type = {c["type"]: c for c in merged}
    assert by_type["QuotaReserved"]["lastTransitionTime"] == "t0" and by_type["QuotaReserved"]["message"] == "new words"
    assert by_type["Admitted"]["lastTransitionTime"] == "t1" and by_type["Admitted"]["observedGeneration"] == 3
    assert by_type["Other"] == current[1]


async def test_a_pending_reason_whose_answer_was_lost_is_written_again_when_back_to_the_last_one() -> None:
    """A written; B applied but its answer lost; A again: A is written, not taken as already there
    (neither from what was last written nor from the Workload as last seen, which still says A)."""
    now = [0.0]
    manifest = _workload()
    port, client = _port(manifest, now)
    port.pending("ns/w", "A")
    assert await port.flush_pending() == 1
    manifest["status"] = client.writes[-1][2]["status"]  # the watch brings A
    real = client.patch_status

    async def lost(kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        await real(kind, namespace, name, body)
        raise ApiUnavailable(None, "ConnectionError", "connection reset by peer")

    client.patch_status = lost  # type: ignore[method-assign]
    now[0] = 10.0
    port.pending("ns/w", "B")
    assert await port.flush_pending() == 0
    client.patch_status = real  # type: ignore[method-assign]
    now[0] = 20.0
    port.pending("ns/w", "A")
    assert await port.flush_pending() == 1
    assert [body["status"]["conditions"][0]["message"] for _, _, body in client.writes] == ["A", "B", "A"]


async def test_a_late_second_phase_never_clears_a_newer_admission() -> None:
    """An eviction's phase two keeps failing; meanwhile the Workload is admitted again (its
    reservation cleared by the phase two that landed with its answer lost, as the watch showed).
    The retry must not clear that new admission, which kueued holds quota for: it is dropped."""
    manifest = _workload(admission={"clusterQueue": "cq"})
    port, client = _port(manifest, [0.0])
    real = client.patch_status
    calls = []

    async def phase_two_fails(kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        calls.append(body)
        if "admission" in body["status"]:  # phase two (admission: None)
            raise ApiUnavailable(503, "ServiceUnavailable", "try later")
        return await real(kind, namespace, name, body)

    client.patch_status = phase_two_fails  # type: ignore[method-assign]
    assert await port.evict("ns/w", cluster_queue="cq", reason="InClusterQueue", message="for ns/x")
    assert not port.released("ns/w")
    client.patch_status = real  # type: ignore[method-assign]
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}},
                            usage={("default", "cpu"): 3000})
    writes = len(client.writes)
    assert await port.finish_evictions() == []
    assert len(client.writes) == writes  # nothing written over the new admission
    assert port.released("ns/w")


async def test_phase_two_is_written_on_the_version_phase_one_returned_and_a_conflict_keeps_it_due() -> None:
    """Another controller's write between the two phases (a Job's Finished condition) must not be
    overwritten by phase two's condition list: phase two carries phase one's resourceVersion, and
    a conflict leaves it due for the next pass, on the version the watch brings."""
    manifest = _workload(admission={"clusterQueue": "cq"})
    port, client = _port(manifest, [0.0])
    real = client.patch_status
    refused = []

    async def someone_wrote_in_between(kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        if "admission" in body["status"] and not refused:  # phase two, the first time
            refused.append(body["metadata"]["resourceVersion"])
            raise ApiConflict(409, "Conflict", "the object has been modified")
        return await real(kind, namespace, name, body)

    client.patch_status = someone_wrote_in_between  # type: ignore[method-assign]
    assert await port.evict("ns/w", cluster_queue="cq", reason="InClusterQueue", message="for ns/x")
    assert refused == ["101"]  # phase one's answer, not the "7" the decision was made on
    assert not port.released("ns/w")
    manifest["metadata"]["resourceVersion"] = "102"  # the watch brings the other controller's version
    assert await port.finish_evictions() == ["ns/w"]
    assert client.writes[-1][2]["metadata"] == {"resourceVersion": "102"} and port.released("ns/w")


async def test_a_drained_workload_whose_queue_runs_again_is_marked_requeued_by_the_restart() -> None:
    """Kueue's workload controller: ``Requeued`` turns True, ClusterQueueRestarted, once the stopped
    ClusterQueue that drained it runs again; a wait on a queue still stopped leaves it off."""
    drained = [{"type": "Requeued", "status": "False", "reason": "ClusterQueueStopped",
                "message": "The ClusterQueue is stopped", "lastTransitionTime": "t0"}]
    port, client = _port(_workload(conditions=drained), [0.0])
    port.pending("ns/w", "ClusterQueue cq is inactive: stopPolicy Hold")
    await port.flush_pending()
    assert {c["type"]: c["status"] for c in client.writes[-1][2]["status"]["conditions"]}["Requeued"] == "False"
    port, client = _port(_workload(conditions=drained), [0.0])
    port.pending("ns/w", "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor x")
    await port.flush_pending()
    requeued = next(c for c in client.writes[-1][2]["status"]["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("True", "ClusterQueueRestarted")


async def test_a_pending_workload_shows_its_requests_and_an_admission_clears_them() -> None:
    """Kueue's scheduler writes ``status.resourceRequests`` (each pod set's requests for all its pods)
    beside the Pending condition, and clears it once the admission's resourceUsage says it."""
    port, client = _port(_workload(), [100.0])
    port.pending("ns/w", "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor x")
    assert await port.flush_pending() == 1
    status = client.writes[-1][2]["status"]
    assert status["resourceRequests"] == [{"name": "main", "resources": {"cpu": "3"}}]
    port.pending("ns/w", "LocalQueue lq doesn't exist")  # the workload controller's reason: no requests
    port._pending_written.clear()
    assert await port.flush_pending() == 1
    assert "resourceRequests" not in client.writes[-1][2]["status"]
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}},
                            usage={("default", "cpu"): 3000})
    assert client.writes[-1][2]["status"]["resourceRequests"] is None  # a merge patch's delete


async def test_a_pending_condition_goes_on_the_version_decided_on_and_a_stale_one_is_tried_again() -> None:
    """Built on a stale version, the patch's condition list would replace an admission's conditions
    made meanwhile (a new leader's first pass once turned Admitted off under a running Job)."""
    now = [0.0]
    port, client = _port(_workload(), now)
    client.conflict = True  # the Workload moved on since: the API server refuses the version
    port.pending("ns/w", "insufficient quota: 4 used + 2 requested > 4")
    assert await port.flush_pending() == 0
    client.conflict = False
    assert await port.flush_pending() == 1  # still due: written once the version is the current one
    ((_, _, body),) = client.writes
    assert body["metadata"] == {"resourceVersion": "7"}
