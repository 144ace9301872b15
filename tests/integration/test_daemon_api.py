"""``kueued run`` against a real API server, driven with kubectl as a user would.

kueued runs as its own process, authenticated as user ``kueued`` and bound only to the RBAC
that ``kueued manifests`` prints; the tests apply objects and read the Kueue status shapes
back with ``kubectl``, waiting with ``kubectl wait`` (on the event, never a sleep).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.integration.daemon import Daemon

pytestmark = pytest.mark.control_plane



def _apply(cluster: Any, *docs: dict) -> None:
    cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))


def _wait(cluster: Any, condition: str, *objects: str, namespace: str = "", timeout: int = 60) -> None:
    ns = [f"--namespace={namespace}"] if namespace else []
    cluster.kubectl_run("wait", *ns, f"--for={condition}", f"--timeout={timeout}s", *objects)


def _workload(cluster: Any, ns: str, name: str) -> dict[str, Any]:
    return cluster.kubectl_json("get", "workload", "-n", ns, name)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _events_until(cluster: Any, ns: str, selector: str, timeout: float = 30) -> list[dict[str, Any]]:
    """The Events matching ``selector``, once there is one (polled: kubectl cannot wait for an Event to exist)."""
    deadline = time.monotonic() + timeout
    while True:
        items = cluster.kubectl_json("get", "events", "-n", ns, f"--field-selector={selector}")["items"]
        if items or time.monotonic() > deadline:
            assert items, f"no Event {selector} in {ns}"
            return items
        time.sleep(0.2)


def _admitted(cluster: Any, ns: str) -> list[str]:
    items = cluster.kubectl_json("get", "workloads", "-n", ns)["items"]
    return sorted(w["metadata"]["name"] for w in items if w.get("status", {}).get("admission"))


def _tree(ns: str, cq: str, *, cpu: str = "4", preemption: dict | None = None) -> list[dict]:
    return [namespace(ns), flavor("default"), cluster_queue(cq, quotas("default", cpu=cpu), preemption=preemption),
            local_queue("lq", ns, cq)]


def _unstamped(manifest: dict) -> dict:
    manifest["metadata"].pop("creationTimestamp", None)  # the API server stamps it
    return manifest


def test_workloads_are_admitted_in_kueue_s_status_shape_and_the_rest_say_why(daemon: Daemon) -> None:
    cluster = daemon.cluster
    _apply(cluster, *_tree("team-a", "cq-a"))
    for name in ("w1", "w2"):  # one at a time: creation stamps have a one-second grain
        _apply(cluster, _unstamped(workload(name, "team-a", "lq", cpu="2")))
        _wait(cluster, "jsonpath={.status.admission.clusterQueue}=cq-a", f"workload/{name}", namespace="team-a")
    _apply(cluster, _unstamped(workload("w3", "team-a", "lq", cpu="2")))
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Pending", "workload/w3",
          namespace="team-a")
    w1 = _workload(cluster, "team-a", "w1")
    (assignment,) = w1["status"]["admission"]["podSetAssignments"]
    assert assignment == {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}}
    assert _condition(w1, "QuotaReserved")["status"] == "True"
    assert _condition(w1, "Admitted")["status"] == "True"
    assert "resourceRequests" not in w1["status"]
    w3 = _workload(cluster, "team-a", "w3")
    assert "admission" not in w3["status"]
    assert w3["status"]["resourceRequests"] == [{"name": "main", "resources": {"cpu": "2"}}]
    assert "cpu 4 used + 2 requested > 4 quota" in _condition(w3, "QuotaReserved")["message"]

    cluster.kubectl_run("delete", "workload", "-n", "team-a", "w1")
    _wait(cluster, "jsonpath={.status.admission.clusterQueue}=cq-a", "workload/w3", namespace="team-a")
    assert [e["workload"] for e in daemon.events() if e["event"] == "workload_admitted"] == \
        ["team-a/w1", "team-a/w2", "team-a/w3"]


def test_with_a_config_file_on_a_cluster_queue_status_keeps_to_its_budget(installed: Any, tmp_path: Path) -> None:
    """``kueued run --config FILE``: the file's status budget is what the publisher spends (a
    daemon started without --config once read it from nowhere and exited at its first publish)."""
    cluster = installed
    config = tmp_path / "kueued.toml"
    config.write_text("[daemon]\nstatus_writes_per_second = 5\n")
    _apply(cluster, *_tree("team-g", "cq-g"))
    daemon = Daemon(cluster, tmp_path / "kueued.log", "--config", str(config)).start()
    try:
        _apply(cluster, _unstamped(workload("w", "team-g", "lq", cpu="1")))
        _wait(cluster, "jsonpath={.status.admittedWorkloads}=1", "clusterqueue/cq-g")
        _wait(cluster, "jsonpath={.status.admittedWorkloads}=1", "localqueue/lq", namespace="team-g")
    finally:
        assert daemon.stop() == 0


def test_preemption_evicts_in_two_phases_and_admits_the_preemptor(daemon: Daemon) -> None:
    cluster = daemon.cluster
    _apply(cluster, *_tree("team-b", "cq-b", cpu="2", preemption={"withinClusterQueue": "LowerPriority"}))
    _apply(cluster, _unstamped(workload("low", "team-b", "lq", cpu="2", priority=1)))
    _wait(cluster, "jsonpath={.status.admission.clusterQueue}=cq-b", "workload/low", namespace="team-b")
    _apply(cluster, _unstamped(workload("high", "team-b", "lq", cpu="2", priority=100)))
    _wait(cluster, "jsonpath={.status.admission.clusterQueue}=cq-b", "workload/high", namespace="team-b")
    low = _workload(cluster, "team-b", "low")
    assert "admission" not in low["status"]
    assert _condition(low, "Evicted")["reason"] == "Preempted"
    assert _condition(low, "Preempted")["reason"] == "InClusterQueue"
    assert low["status"]["schedulingStats"] == {"evictions": [{"reason": "Preempted", "count": 1}]}
    high = _workload(cluster, "team-b", "high")
    assert _condition(low, "Evicted")["message"] == (  # Kueue's preemptionMessage
        f"Preempted to accommodate a workload (UID: {high['metadata']['uid']}, JobUID: UNKNOWN) due to "
        "prioritization in the ClusterQueue; preemptor path: /cq-b; preemptee path: /cq-b")
    # and Kueue's Event on the preemptor, naming its victim (Events are written in the background)
    events = _events_until(cluster, "team-b", "involvedObject.name=high,reason=PreemptedWorkload")
    assert events[0]["message"].startswith(f"Preempted workload team-b/low (UID: {low['metadata']['uid']}) in "
                                           "ClusterQueue cq-b; preemptor effective priority: 100 (base: 100, boost: 0)")
    assert _condition(low, "QuotaReserved")["status"] == "False"
    # the watch brings both phases of low's eviction back: neither charges its quota again, so the
    # queue holds what high holds (2 cpu) and low waits (before, low's quota leaked: 4 of 2 held)
    _wait(cluster, "jsonpath={.status.pendingWorkloads}=1", "clusterqueue/cq-b")
    _wait(cluster, "jsonpath={.status.flavorsReservation[0].resources[0].total}=2", "clusterqueue/cq-b")
    assert cluster.kubectl_json("get", "clusterqueue", "cq-b")["status"]["admittedWorkloads"] == 1


def test_a_restart_keeps_every_admission_and_doubles_none(installed: Any, tmp_path: Path) -> None:
    cluster = installed
    _apply(cluster, *_tree("team-c", "cq-c", cpu="3"))
    first = Daemon(cluster, tmp_path / "first.log").start()
    try:
        for i in range(5):
            _apply(cluster, _unstamped(workload(f"w{i}", "team-c", "lq", cpu="1")))
        _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].status}", "workload/w0",
              "workload/w1", "workload/w2", "workload/w3", "workload/w4", namespace="team-c")
        before = _admitted(cluster, "team-c")
    finally:
        assert first.stop() == 0
    assert len(before) == 3
    second = Daemon(cluster, tmp_path / "second.log").start()
    try:
        _apply(cluster, _unstamped(workload("late", "team-c", "lq", cpu="1")))
        _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Pending", "workload/late",
              namespace="team-c")
        assert _admitted(cluster, "team-c") == before  # nothing doubled, nothing lost, the quota full
        assert not [e for e in second.events() if e["event"] == "workload_admitted"]
    finally:
        assert second.stop() == 0


def test_a_conflict_storm_never_leaks_quota_or_doubles_an_admission(daemon: Daemon) -> None:
    """Another writer keeps bumping the Workloads' resourceVersion while kueued commits: its
    admissions are refused (409), decided again on the new version, and the quota holds."""
    cluster = daemon.cluster
    _apply(cluster, *_tree("team-d", "cq-d", cpu="10"))
    names = [f"w{i}" for i in range(20)]
    bumper = subprocess.Popen(["bash", "-c", f'for i in $(seq 1 40); do "{cluster.kubectl}" '
                               f'--kubeconfig={cluster.kubeconfig} --cache-dir={cluster.cache_dir} -n team-d '
                               'label workloads --all bump=$i --overwrite >/dev/null 2>&1; done'])
    try:
        for name in names:
            _apply(cluster, _unstamped(workload(name, "team-d", "lq", cpu="1")))
    finally:
        bumper.wait(timeout=120)
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].status}",
          *(f"workload/{n}" for n in names), namespace="team-d")
    admitted = _admitted(cluster, "team-d")
    assert len(admitted) == 10  # the quota exactly: nothing leaked by a refused commit, nothing doubled
    events = daemon.events()
    assert [e["event"] for e in events].count("workload_admitted") - \
        sum(1 for e in events if e["event"] == "workload_evicted") >= 10



def test_an_admission_decided_on_an_old_version_is_refused_and_writes_nothing(installed: Any) -> None:
    """The 409 itself, made certain: the commit carries the resourceVersion kueued decided on."""
    import anyio

    from kueued.kube.commits import KubePort
    from kueued.kube.connect import connect
    cluster = installed
    _apply(cluster, *_tree("team-e", "cq-e"), _unstamped(workload("w", "team-e", "lq", cpu="1")))
    seen = _workload(cluster, "team-e", "w")
    cluster.kubectl_run("label", "workload", "-n", "team-e", "w", "bumped=yes")  # another writer, after
    port = KubePort(None, manifest_of=lambda key: seen, requests_of=lambda key: [("main", 1, {"cpu": 1000})])

    async def commit() -> bool:
        port.client = await connect(cluster.kubeconfig)
        async with port.client:
            return await port.admit("team-e/w", cluster_queue="cq-e", flavors={"main": {"cpu": "default"}},
                                    usage={("default", "cpu"): 1000})

    assert anyio.run(commit) is False and port.refused == 1
    assert "admission" not in _workload(cluster, "team-e", "w").get("status", {})


def test_kueued_holds_a_queue_in_use_even_when_deleted_while_kueued_is_down(daemon: Daemon, tmp_path: Path) -> None:
    """A ClusterQueue created without Kueue's finalizer (no webhook in front of kueued) is given it;
    deleted while a workload is admitted in it and kueued is down (kill -9), the API server keeps
    it, so the next kueued still finds it, terminating, with the workload's quota charged there;
    once the workload finishes the deletion completes."""
    cluster = daemon.cluster
    ns, cq = "team-h", "cq-h"
    _apply(cluster, *_tree(ns, cq, cpu="2"))
    _wait(cluster, "jsonpath={.metadata.finalizers[0]}=kueue.x-k8s.io/resource-in-use", f"clusterqueue/{cq}")
    _wait(cluster, "jsonpath={.metadata.finalizers[0]}=kueue.x-k8s.io/resource-in-use", "resourceflavor/default")
    _apply(cluster, _unstamped(workload("w1", ns, "lq", cpu="2")))
    _wait(cluster, f"jsonpath={{.status.admission.clusterQueue}}={cq}", "workload/w1", namespace=ns)
    daemon.kill()
    cluster.kubectl_run("delete", "clusterqueue", cq, "--wait=false")
    assert cluster.kubectl_json("get", "clusterqueue", cq)["metadata"]["deletionTimestamp"]  # held, not gone
    again = Daemon(cluster, tmp_path / "again.log").start()
    try:
        _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Active')].reason}=Terminating", f"clusterqueue/{cq}")
        finished = {"status": {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded",
                                               "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
        cluster.kubectl_run("patch", "workload", "w1", "-n", ns, "--subresource=status", "--type=merge",
                            "-p", json.dumps(finished))
        _wait(cluster, "delete", f"clusterqueue/{cq}")
        # logged once the patch's reply is in, which can be after the API server completed the deletion
        assert again.wait_for("cluster_queue_released", timeout=30, cluster_queue=cq)
    finally:
        again.stop()


def test_a_workload_kueue_s_finalizer_holds_is_let_go_when_deleted(daemon: Daemon) -> None:
    """A Workload made under Kueue carries its resource-in-use finalizer; deleted, it would stay
    terminating for ever (nothing but Kueue takes it off): kueued lets a bare one go, as Kueue's
    workload controller does, and its quota with it."""
    cluster = daemon.cluster
    ns, cq = "team-i", "cq-i"
    _apply(cluster, *_tree(ns, cq, cpu="1"))
    held = _unstamped(workload("w1", ns, "lq", cpu="1"))
    held["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    _apply(cluster, held)
    _wait(cluster, f"jsonpath={{.status.admission.clusterQueue}}={cq}", "workload/w1", namespace=ns)
    _apply(cluster, _unstamped(workload("w2", ns, "lq", cpu="1")))  # waits: w1 holds the whole quota
    cluster.kubectl_run("delete", "workload", "w1", "-n", ns, "--wait=false")
    _wait(cluster, "delete", "workload/w1", namespace=ns)
    _wait(cluster, f"jsonpath={{.status.admission.clusterQueue}}={cq}", "workload/w2", namespace=ns)
    assert daemon.wait_for("workload_released", timeout=30, workload=f"{ns}/w1")  # logged after the reply


def test_a_cluster_queue_deleted_in_use_terminates_until_its_workloads_finish(daemon: Daemon) -> None:
    """A ClusterQueue carrying Kueue's finalizer (as one created under Kueue does), deleted while a
    workload is admitted in it, stays terminating: inactive, admitting nothing new, until the
    workload finishes; then kueued takes the finalizer off and the API server completes the delete."""
    cluster = daemon.cluster
    ns, cq = "team-t", "cq-t"
    tree = _tree(ns, cq, cpu="2")
    tree[2]["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    _apply(cluster, *tree)
    _apply(cluster, _unstamped(workload("w1", ns, "lq", cpu="2")))
    _wait(cluster, f"jsonpath={{.status.admission.clusterQueue}}={cq}", "workload/w1", namespace=ns)
    cluster.kubectl_run("delete", "clusterqueue", cq, "--wait=false")
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Active')].reason}=Terminating", f"clusterqueue/{cq}")
    _apply(cluster, _unstamped(workload("w2", ns, "lq", cpu="1")))
    # Kueue's workload controller: a workload of an inactive queue is Inadmissible (the queue says why)
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Inadmissible", "workload/w2",
          namespace=ns)
    assert _condition(_workload(cluster, ns, "w2"), "QuotaReserved")["message"] == f"ClusterQueue {cq} is inactive"
    assert cluster.kubectl_json("get", "clusterqueue", cq)["metadata"]["finalizers"] == [
        "kueue.x-k8s.io/resource-in-use"]  # still in use: kept
    finished = {"status": {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded",
                                           "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    cluster.kubectl_run("patch", "workload", "w1", "-n", ns, "--subresource=status", "--type=merge",
                        "-p", json.dumps(finished))
    _wait(cluster, "delete", f"clusterqueue/{cq}")
    assert _admitted(cluster, ns) == ["w1"]  # finished, its admission kept (as Kueue); w2 never admitted
    assert any(e.get("event") == "cluster_queue_released" and e.get("cluster_queue") == cq for e in daemon.events())
