"""A Workload's maximum execution time on a real API server (Kueue's KEP-3125), read back with kubectl."""

from __future__ import annotations

import pytest

from tests.builders import workload
from tests.integration.daemon import Daemon
from tests.integration.test_daemon_api import _apply, _condition, _tree, _unstamped, _wait, _workload

pytestmark = pytest.mark.control_plane



def test_a_workload_out_of_time_is_deactivated_evicted_and_its_quota_freed(daemon: Daemon) -> None:
    cluster = daemon.cluster
    _apply(cluster, *_tree("team-x", "cq-x", cpu="2"))
    limited = _unstamped(workload("limited", "team-x", "lq", cpu="2"))
    limited["spec"]["maximumExecutionTimeSeconds"] = 3
    _apply(cluster, limited)
    _wait(cluster, "jsonpath={.status.admission.clusterQueue}=cq-x", "workload/limited", namespace="team-x")
    _apply(cluster, _unstamped(workload("waiting", "team-x", "lq", cpu="2")))
    # nothing changes on the cluster when the time runs out: kueued wakes up for it
    _wait(cluster, "jsonpath={.spec.active}=false", "workload/limited", namespace="team-x", timeout=30)
    _wait(cluster, "jsonpath={.status.admission.clusterQueue}=cq-x", "workload/waiting", namespace="team-x")
    wl = _workload(cluster, "team-x", "limited")
    evicted = _condition(wl, "Evicted")
    assert (evicted["status"], evicted["reason"], evicted["message"]) == (
        "True", "DeactivatedDueToMaximumExecutionTimeExceeded",
        "The workload is deactivated due to exceeding the maximum execution time")
    assert _condition(wl, "DeactivationTarget") is None  # taken off as it was evicted
    assert "admission" not in wl["status"]
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Deactivated", "underlyingCause": "MaximumExecutionTimeExceeded", "count": 1}]
    assert 2 <= wl["status"]["accumulatedPastExecutionTimeSeconds"] <= 6  # the seconds it was admitted
    reasons = {(e["type"], e["reason"], e["message"]) for e in cluster.kubectl_json(
        "get", "events", "-n", "team-x", "--field-selector", "involvedObject.name=limited")["items"]}
    assert ("Warning", "MaximumExecutionTimeExceeded", "The maximum execution time (3s) exceeded") in reasons
    assert [e["workload"] for e in daemon.events() if e["event"] == "workload_deactivated"] == ["team-x/limited"]
