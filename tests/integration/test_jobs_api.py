"""The Job integration against a real API server: a batch/v1 Job's whole life under kueued.

``kueued run`` decides as its own process and runs the Job controller
(:class:`kueued.kube.jobs.JobController`) beside its scheduler, authenticated as user ``kueued``,
bound only to the RBAC ``kueued manifests`` prints.  There is no kube-controller-manager:
no pods, no garbage collector, nobody stamps a Job's status, so a test marks a Job
started or finished by patching its status, as Kueue's integration tests do.  Everything
is waited for on the event (``kubectl wait``, or a ``kubectl get --watch`` read until it
shows what is expected), never with a sleep.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueued.kube import job_workload as jw
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas
from tests.integration.daemon import Daemon

pytestmark = pytest.mark.control_plane

TEAM_TOLERATION = {"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}


@pytest.fixture
def daemon(installed: Any, tmp_path: Path) -> Iterator[Any]:
    """``kueued run`` as its own process, as user kueued, beside the Job controller below."""
    d = Daemon(installed, tmp_path / "kueued.log").start()
    try:
        yield installed
    finally:
        assert d.proc is not None
        exited = d.proc.poll()
        d.stop()
        # shown with a failing test's output: what kueued decided (or why it stopped)
        print(f"kueued run {'exited ' + str(exited) if exited is not None else 'ran'}; its log ends:")
        print(d.tail())


@pytest.fixture
def cluster(daemon: Any) -> Any:
    """The cluster with ``kueued run`` deciding and running its Job integration (one process)."""
    return daemon


# ---- helpers --------------------------------------------------------------------------------------------

def _apply(cluster: Any, *docs: dict) -> None:
    cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))


def _wait(cluster: Any, condition: str, obj: str, ns: str, timeout: int = 60) -> None:
    if condition != "delete":  # kubectl waits on a condition only of an object that exists
        cluster.kubectl_run("wait", f"--namespace={ns}", "--for=create", f"--timeout={timeout}s", obj)
    cluster.kubectl_run("wait", f"--namespace={ns}", f"--for={condition}", f"--timeout={timeout}s", obj)


def _get(cluster: Any, obj: str, ns: str) -> dict[str, Any]:
    return cluster.kubectl_json("get", obj, "-n", ns)


def _watch_until(cluster: Any, obj: str, ns: str, predicate: Callable[[dict[str, Any]], bool],
                 timeout: float = 60) -> dict[str, Any]:
    """Follow ``obj`` with ``kubectl get --watch`` until a version satisfies ``predicate``; that version."""
    command = [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}", f"--cache-dir={cluster.cache_dir}",
               "get", obj, "-n", ns, "--watch", "-o", 'jsonpath={@}{"\\n"}']
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    seen: dict[str, Any] = {}
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                seen = json.loads(lines.get(timeout=left))
            except queue.Empty:
                break
            if predicate(seen):
                return seen
    finally:
        proc.kill()
        proc.wait()
        reader.join(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    pytest.fail(f"{obj} in {ns} never got there; last seen: {json.dumps(seen)[:2000]}")


def _tree(ns: str, *, flavor_name: str, cpu: str, preemption: dict | None = None, **flavor_spec: Any) -> list[dict]:
    return [namespace(ns), flavor(flavor_name, **flavor_spec),
            cluster_queue(f"{ns}-cq", quotas(flavor_name, cpu=cpu), preemption=preemption),
            local_queue("lq", ns, f"{ns}-cq")]


def job(name: str, ns: str, *, queue: str = "lq", cpu: str = "2", suspend: bool = True,
        priority_class: str = "", node_selector: dict | None = None, tolerations: list | None = None) -> dict:
    labels = {jw.QUEUE_LABEL: queue}
    if priority_class:
        labels[jw.PRIORITY_CLASS_LABEL] = priority_class
    pod: dict[str, Any] = {"restartPolicy": "Never",
                           "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    if tolerations:
        pod["tolerations"] = tolerations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"suspend": suspend, "template": {"spec": pod}}}


def _create(cluster: Any, manifest: dict) -> str:
    """Create a Job; the name of its Workload."""
    cluster.kubectl_run("create", "-f", "-", stdin=yaml.safe_dump(manifest))
    meta = manifest["metadata"]
    uid = cluster.kubectl_run("get", "job", meta["name"], "-n", meta["namespace"], "-o",
                              "jsonpath={.metadata.uid}").stdout
    return jw.workload_name(meta["name"], uid)


def _finish(cluster: Any, name: str, ns: str) -> None:
    """What the job controller writes when a Job's pods all succeeded."""
    status = {"startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:01:00Z", "succeeded": 1,
              "conditions": [
                  {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "message": "done"},
                  {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                   "message": "Reached expected number of succeeded pods"}]}
    cluster.kubectl_run("patch", "job", name, "-n", ns, "--subresource=status", "--type=merge",
                        "-p", json.dumps({"status": status}))


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


# ---- the tests ---------------------------------------------------------------------------------------------

def test_a_job_s_whole_life_and_the_quota_it_frees(cluster: Any) -> None:
    ns = "jobs-life"
    spot = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
    _apply(cluster, *_tree(ns, flavor_name="jobs-spot", cpu="2", nodeLabels={"kueued.io/pool": "spot"},
                           tolerations=[spot]))
    first = _create(cluster, job("first", ns, node_selector={"team": "a"}, tolerations=[TEAM_TOLERATION]))
    _wait(cluster, f"jsonpath={{.status.admission.clusterQueue}}={ns}-cq", f"workload/{first}", ns)
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/first", ns)

    wl = _get(cluster, f"workload/{first}", ns)
    assert wl["metadata"]["labels"][jw.JOB_UID_LABEL] == _get(cluster, "job/first", ns)["metadata"]["uid"]
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "Job" and wl["spec"]["queueName"] == "lq"
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]  # as on a Workload Kueue makes
    pod = _get(cluster, "job/first", ns)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"team": "a", "kueued.io/pool": "spot"}
    assert pod["tolerations"] == [TEAM_TOLERATION, spot]

    second = _create(cluster, job("second", ns))  # waits: the quota is the first's
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Pending",
          f"workload/{second}", ns)
    assert _get(cluster, "job/second", ns)["spec"]["suspend"] is True

    _finish(cluster, "first", ns)
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Finished')].reason}=Succeeded", f"workload/{first}", ns)
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/second", ns)  # the quota came back and went to it
    finished = _condition(_get(cluster, f"workload/{first}", ns), "Finished")
    assert finished is not None and finished["message"] == "Reached expected number of succeeded pods"
    # finished, it is held no longer: Kueue's finalizer comes off, so deleting it is not stuck
    _watch_until(cluster, f"workload/{first}", ns, lambda w: not w["metadata"].get("finalizers"))
    # the Job's story as Kueue's job reconciler tells it, in Events on the Job
    told = _events_until(cluster, "first", ns, {"CreatedWorkload", "Started", "FinishedWorkload"})
    assert told["CreatedWorkload"] == f"Created Workload: {ns}/{first}"
    assert told["Started"] == f"Admitted by clusterQueue {ns}-cq"


def _events_until(cluster: Any, name: str, ns: str, reasons: set[str], timeout: float = 30) -> dict[str, str]:
    """The Events about object ``name`` by reason (their messages), once all of ``reasons`` are there."""
    deadline = time.monotonic() + timeout
    while True:
        listed = cluster.kubectl_json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}")
        seen = {e["reason"]: e.get("message", "") for e in listed.get("items", [])}
        if reasons <= seen.keys() or time.monotonic() > deadline:
            assert reasons <= seen.keys(), f"Events on {name}: {sorted(seen)}"
            return seen
        time.sleep(0.5)


def test_an_eviction_suspends_the_job_and_gives_its_template_back(cluster: Any) -> None:
    ns = "jobs-evict"
    _apply(cluster, *_tree(ns, flavor_name="jobs-evict-flavor", cpu="2", nodeLabels={"kueued.io/pool": "evict"},
                           preemption={"withinClusterQueue": "LowerPriority"}),
           *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
              "value": value} for name, value in (("jobs-low", 10), ("jobs-high", 1000))))
    low = _create(cluster, job("low", ns, priority_class="jobs-low", node_selector={"team": "a"},
                               tolerations=[TEAM_TOLERATION]))
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/low", ns)
    assert _get(cluster, f"workload/{low}", ns)["spec"]["priority"] == 10
    # the job controller stamps startTime; a stopped Job's template can change only once it is cleared
    cluster.kubectl_run("patch", "job", "low", "-n", ns, "--subresource=status", "--type=merge",
                        "-p", '{"status": {"startTime": "2026-01-01T00:00:00Z"}}')

    high = _create(cluster, job("high", ns, priority_class="jobs-high"))
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/high", ns)
    restored = _watch_until(cluster, "job/low", ns,
                            lambda j: jw.ORIGINAL_ANNOTATION not in j["metadata"].get("annotations", {}))
    assert restored["spec"]["suspend"] is True and "startTime" not in restored.get("status", {})
    assert restored["spec"]["template"]["spec"]["nodeSelector"] == {"team": "a"}
    assert restored["spec"]["template"]["spec"]["tolerations"] == [TEAM_TOLERATION]
    evicted = _get(cluster, f"workload/{low}", ns)
    assert _condition(evicted, "Evicted")["status"] == "True" and "admission" not in evicted["status"]
    assert _get(cluster, f"workload/{high}", ns)["spec"]["priorityClassRef"]["name"] == "jobs-high"


def test_a_running_job_is_suspended_and_its_queue_label_moves_it_until_it_is_admitted(cluster: Any) -> None:
    ns = "jobs-unsuspended"
    _apply(cluster, *_tree(ns, flavor_name="jobs-unsuspended-flavor", cpu="2"))
    wl = _create(cluster, job("eager", ns, queue="nowhere", suspend=False))  # no such LocalQueue: it waits
    _wait(cluster, "jsonpath={.spec.suspend}=true", "job/eager", ns)
    _wait(cluster, "jsonpath={.spec.queueName}=nowhere", f"workload/{wl}", ns)

    cluster.kubectl_run("label", "job", "eager", "-n", ns, f"{jw.QUEUE_LABEL}=lq", "--overwrite")
    _wait(cluster, "jsonpath={.spec.queueName}=lq", f"workload/{wl}", ns)
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/eager", ns)

    cluster.kubectl_run("label", "job", "eager", "-n", ns, f"{jw.QUEUE_LABEL}=nowhere", "--overwrite")
    _finish(cluster, "eager", ns)  # a sync point: the controller has seen the label once it finishes the Workload
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Finished')].status}=True", f"workload/{wl}", ns)
    assert _get(cluster, f"workload/{wl}", ns)["spec"]["queueName"] == "lq"  # admitted: left alone


def test_deleting_a_job_deletes_its_workload(cluster: Any) -> None:
    ns = "jobs-delete"
    _apply(cluster, *_tree(ns, flavor_name="jobs-delete-flavor", cpu="2"))
    running = _create(cluster, job("running", ns))
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/running", ns)  # before the next: stamps have 1 s grain
    waiting = _create(cluster, job("waiting", ns))
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Pending",
          f"workload/{waiting}", ns)
    cluster.kubectl_run("delete", "job", "running", "-n", ns)
    _wait(cluster, "delete", f"workload/{running}", ns)
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/waiting", ns)  # its quota is free again
    cluster.kubectl_run("delete", "job", "waiting", "-n", ns)
    _wait(cluster, "delete", f"workload/{waiting}", ns)


def test_a_workload_made_under_kueue_deleted_stops_its_job_and_goes(cluster: Any, tmp_path: Path) -> None:
    """A Workload carrying Kueue's finalizer (as one Kueue made does) is deleted while its Job runs:
    as Kueue's reconciler, kueued stops the Job, then takes the finalizer off, so the deletion
    completes; the Job, suspended again, gets a new Workload and is admitted again."""
    ns = "jobs-wl-deleted"
    _apply(cluster, *_tree(ns, flavor_name="jobs-wl-deleted-flavor", cpu="2"))
    wl = _create(cluster, job("train", ns))
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/train", ns)
    cluster.kubectl_run("patch", "workload", wl, "-n", ns, "--type=merge",
                        "-p", json.dumps({"metadata": {"finalizers": ["kueue.x-k8s.io/resource-in-use"]}}))
    old_uid = _get(cluster, f"workload/{wl}", ns)["metadata"]["uid"]
    cluster.kubectl_run("delete", "workload", wl, "-n", ns, "--wait=false")
    # the deletion completes and the Job gets a new Workload (the same name: Kueue's naming), admitted;
    # followed as a list, which a watch shows whether the old one is still there, gone or replaced
    def replaced(seen: dict[str, Any]) -> bool:  # the list first (its items), then each version
        return any(w.get("metadata", {}).get("uid") not in (None, old_uid) and w.get("status", {}).get("admission")
                   for w in seen.get("items", [seen]))
    _watch_until(cluster, "workloads", ns, replaced)
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/train", ns)
    log = [json.loads(line) for line in (tmp_path / "kueued.log").read_text().splitlines() if line.startswith("{")]
    steps = [(e["event"], e.get("why")) for e in log if e.get("event") in ("job_suspended", "workload_released")]
    assert steps == [("job_suspended", "workload deleted"), ("workload_released", "workload deleted")]


def test_a_job_with_a_minimum_parallelism_runs_with_the_pods_the_quota_holds(cluster: Any) -> None:
    """Kueue's partial admission: 4 pods of 1 cpu, at least 2, into 3 cpu: admitted with 3, the Job
    runs with parallelism 3 (and completions 3, as its annotation asks of an Indexed Job)."""
    ns = "jobs-partial"
    _apply(cluster, *_tree(ns, flavor_name="jobs-partial-flavor", cpu="3"))
    manifest = job("wide", ns, cpu="1")
    manifest["metadata"]["annotations"] = {jw.MIN_PARALLELISM_ANNOTATION: "2", jw.SYNC_COMPLETIONS_ANNOTATION: "true"}
    manifest["spec"].update(parallelism=4, completions=4, completionMode="Indexed")
    wl = _create(cluster, manifest)
    _wait(cluster, "jsonpath={.spec.suspend}=false", "job/wide", ns)
    running = _get(cluster, "job/wide", ns)
    assert (running["spec"]["parallelism"], running["spec"]["completions"]) == (3, 3)
    (assignment,) = _get(cluster, f"workload/{wl}", ns)["status"]["admission"]["podSetAssignments"]
    assert (assignment["count"], assignment["resourceUsage"]) == (3, {"cpu": "3"})
    assert _get(cluster, f"workload/{wl}", ns)["spec"]["podSets"][0]["minCount"] == 2
