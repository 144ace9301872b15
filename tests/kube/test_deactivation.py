"""KubePort's writes for a maximum execution time (KEP-3125): the deactivation, the eviction that
follows it, and the seconds an admission ran, as Kueue's workload controller writes them."""

from __future__ import annotations

import time
from typing import Any

from kueued.model.clock import rfc3339
from tests.kube.test_commits import _port, _workload


def _conditions(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in body["status"]["conditions"]}


async def test_a_deactivation_sets_kueue_s_condition_clears_the_time_then_the_spec() -> None:
    port, client = _port(_workload(accumulatedPastExecutionTimeSeconds=12), [0.0])
    assert await port.deactivate("ns/w", reason="MaximumExecutionTimeExceeded",
                                 message="exceeding the maximum execution time")
    (status_kind, _, status), (spec_kind, key, spec) = client.writes
    target = _conditions(status)["DeactivationTarget"]
    assert (target["status"], target["reason"], target["message"]) == \
        ("True", "MaximumExecutionTimeExceeded", "exceeding the maximum execution time")
    assert status["status"]["accumulatedPastExecutionTimeSeconds"] is None  # a merge patch's delete
    assert status["metadata"] == {"resourceVersion": "7"}  # on the version decided on
    assert (spec_kind, key, spec) == ("Workload", "ns/w", {"spec": {"active": False}})
    assert port.echoes  # the watch brings the deactivated version back to the coordinator


async def test_a_deactivation_refused_writes_no_spec() -> None:
    port, client = _port(_workload(), [0.0])
    client.conflict = True
    assert not await port.deactivate("ns/w", reason="MaximumExecutionTimeExceeded", message="m")
    assert client.writes == []


async def test_the_eviction_of_a_deactivated_workload_takes_its_deactivation_target_off() -> None:
    target = {"type": "DeactivationTarget", "status": "True", "reason": "MaximumExecutionTimeExceeded",
              "message": "exceeding the maximum execution time", "lastTransitionTime": rfc3339()}
    port, client = _port(_workload(conditions=[target]), [0.0])
    reason = "DeactivatedDueToMaximumExecutionTimeExceeded"
    message = "The workload is deactivated due to exceeding the maximum execution time"
    assert await port.evict("ns/w", cluster_queue="cq", reason=reason, message=message, preempted=False)
    first = _conditions(client.writes[0][2])
    assert "DeactivationTarget" not in first
    assert (first["Evicted"]["reason"], first["Evicted"]["message"]) == (reason, message)


async def test_an_admission_that_ends_adds_the_seconds_it_ran_to_the_accumulated_time() -> None:
    admitted_at = time.time() - 42.5
    conditions = [{"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime":
                   rfc3339(admitted_at)},
                  {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m"}]
    port, client = _port(_workload(conditions=conditions, accumulatedPastExecutionTimeSeconds=10,
                                   admission={"clusterQueue": "cq"}), [0.0])
    port.resume_eviction("ns/w", "m")  # evicted, the reservation still to clear: the second phase
    assert await port.finish_evictions(["ns/w"]) == ["ns/w"]
    release = client.writes[-1][2]["status"]
    assert release["admission"] is None
    # 42 or 43 whole seconds (the condition's time has a one-second grain), on top of the 10 held
    assert release["accumulatedPastExecutionTimeSeconds"] in (52, 53)


async def test_a_deactivated_workload_s_evicted_reason_is_not_overwritten_by_its_pending_one() -> None:
    evicted = {"type": "Evicted", "status": "True", "reason": "DeactivatedDueToMaximumExecutionTimeExceeded",
               "message": "The workload is deactivated due to exceeding the maximum execution time"}
    port, client = _port(_workload(conditions=[evicted]), [100.0])
    port.pending("ns/w", "the Workload is deactivated (spec.active is false)")
    assert await port.flush_pending() == 0
    assert client.writes == []



async def test_a_deactivated_workload_active_again_is_marked_requeued_by_the_reactivation() -> None:
    """Kueue's workload controller: ``Requeued`` False for the deactivation turns True, Reactivated,
    once the workload is active again (here: it waits for quota, then it is admitted)."""
    deactivated = [{"type": "Requeued", "status": "False", "reason": "Deactivated",
                    "message": "The workload is deactivated", "lastTransitionTime": "t0"}]
    port, client = _port(_workload(conditions=deactivated), [0.0])
    port.pending("ns/w", "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor x")
    await port.flush_pending()
    requeued = _conditions(client.writes[-1][2])["Requeued"]
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "True", "Reactivated", "The workload was reactivated")
    port, client = _port(_workload(conditions=deactivated), [0.0])
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}},
                            usage={("default", "cpu"): 3000})
    assert _conditions(client.writes[-1][2])["Requeued"]["reason"] == "Reactivated"
    port, client = _port(_workload(conditions=deactivated), [0.0])  # still deactivated: left as it is
    port.pending("ns/w", "the Workload is deactivated (spec.active is false)")
    await port.flush_pending()
    assert "Requeued" not in {c["type"] for w in client.writes for c in w[2]["status"]["conditions"]
                              if c.get("status") == "True"}


async def test_every_eviction_is_counted_by_reason_and_cause() -> None:
    """Kueue's ``status.schedulingStats.evictions``: one entry per (reason, underlyingCause), counted up."""
    stats = {"evictions": [{"reason": "Preempted", "count": 2}]}
    port, client = _port(_workload(schedulingStats=stats, admission={"clusterQueue": "cq"}), [0.0])
    assert await port.evict("ns/w", cluster_queue="cq", reason="InClusterQueue", message="m1")
    assert client.writes[0][2]["status"]["schedulingStats"] == {"evictions": [{"reason": "Preempted", "count": 3}]}
    port, client = _port(_workload(schedulingStats=stats), [0.0])
    assert await port.evict("ns/w", cluster_queue="cq", reason="DeactivatedDueToMaximumExecutionTimeExceeded",
                            message="m2", preempted=False)
    assert client.writes[0][2]["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "count": 2},
        {"reason": "Deactivated", "underlyingCause": "MaximumExecutionTimeExceeded", "count": 1}]
