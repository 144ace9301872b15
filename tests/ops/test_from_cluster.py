"""``simulate --from-cluster``: live objects (as the API server lists them) and changes laid over them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from actors.simulation import run_actors
from kueued.ops.from_cluster import overlay, what_if
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def admitted(manifest: dict[str, Any], cq: str, fl: str) -> dict[str, Any]:
    """``manifest`` as the daemon leaves it admitted: Kueue's status.admission shape."""
    requests = manifest["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
    manifest["status"] = {"admission": {"clusterQueue": cq, "podSetAssignments": [
        {"name": "main", "count": 1, "flavors": dict.fromkeys(requests, fl), "resourceUsage": requests}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:10Z"}]}
    manifest["metadata"]["resourceVersion"] = "7"
    return manifest


def live() -> list[dict[str, Any]]:
    """cq (cpu 4) holds a (2) and b (2); c (2) waits."""
    return [namespace("ns"), flavor("f"), cluster_queue("cq", quotas("f", cpu="4")), local_queue("lq", "ns", "cq"),
            admitted(workload("a", "ns", "lq", created=1, cpu="2"), "cq", "f"),
            admitted(workload("b", "ns", "lq", created=2, cpu="2"), "cq", "f"),
            workload("c", "ns", "lq", created=3, cpu="2")]


def _rows(result) -> dict[str, tuple[str, str, str]]:
    return {r.workload: (r.now, r.after, r.change) for r in result.rows}


def test_nothing_proposed_changes_nothing() -> None:
    result = what_if(live(), [], runner=run_actors, now=NOW)
    assert _rows(result) == {"ns/a": ("admitted in cq (f)", "admitted in cq (f)", "unchanged"),
                             "ns/b": ("admitted in cq (f)", "admitted in cq (f)", "unchanged"),
                             "ns/c": ("pending", "pending", "still waiting")}


def test_a_raised_quota_admits_the_waiting_one_and_a_burst_queues_behind_it() -> None:
    changes = [cluster_queue("cq", quotas("f", cpu="8")),
               *(workload(f"new-{i}", "ns", "lq", cpu="2") for i in range(2))]
    for w in changes[1:]:
        w["metadata"].pop("creationTimestamp")  # submitted now: stamped with the run's time
    result = what_if(live(), changes, runner=run_actors, now=NOW)
    assert _rows(result) == {"ns/a": ("admitted in cq (f)", "admitted in cq (f)", "unchanged"),
                             "ns/b": ("admitted in cq (f)", "admitted in cq (f)", "unchanged"),
                             "ns/c": ("pending", "admitted in cq (f)", "admitted"),
                             "ns/new-0": ("absent", "admitted in cq (f)", "admitted"),
                             "ns/new-1": ("absent", "pending", "new, waiting")}
    assert result.rejected == {}


def test_a_lowered_quota_with_preemption_evicts() -> None:
    preempting = cluster_queue("cq", quotas("f", cpu="4"), preemption={"withinClusterQueue": "LowerPriority"})
    urgent = workload("urgent", "ns", "lq", priority=100, cpu="4")
    result = what_if(live(), [preempting, urgent], runner=run_actors, now=NOW)
    rows = _rows(result)
    assert rows["ns/urgent"][2] == "admitted"
    assert (rows["ns/a"][2], rows["ns/b"][2]) == ("evicted", "evicted")
    assert {e["workload"] for e in result.evictions} == {"ns/a", "ns/b"}


def test_a_change_replaces_the_live_object_of_its_key_and_a_refused_one_is_reported() -> None:
    merged = overlay(live(), [cluster_queue("cq", quotas("f", cpu="8"))], now=NOW)
    (cq,) = [m for m in merged if m["kind"] == "ClusterQueue"]
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "8"
    bad = cluster_queue("cq", quotas("f", cpu=("4", "2")))  # a borrowingLimit without a cohort
    result = what_if(live(), [bad], runner=run_actors, now=NOW)
    assert list(result.rejected) == ["ClusterQueue/cq"]
