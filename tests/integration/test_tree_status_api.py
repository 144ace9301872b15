"""The tree's status, Events and refusals, as ``kubectl`` shows them, with ``kueued run`` on a real API server.

kueued runs as its own process, as the RBAC-bound user ``kueued`` (``test_daemon_api.Daemon``);
each test waits on what it expects with ``kubectl wait`` or a ``kubectl get --watch`` of
Events, never a sleep.  Names are this module's own (``ts-`` prefixed), so it shares the
session's control plane with the other integration tests.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import pytest
import yaml

from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.integration.daemon import Daemon
from tests.integration.test_daemon_api import _apply, _unstamped, _wait

pytestmark = pytest.mark.control_plane



def _get(cluster: Any, *what: str) -> dict[str, Any]:
    return cluster.kubectl_json("get", *what)


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    found = next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == type_), None)
    assert found is not None, f"no {type_} condition in {obj.get('status')}"
    return found


def _events(cluster: Any, namespace: str, name: str, wanted: set[str], *, timeout: float = 60) -> dict[str, dict]:
    """The Events about ``name`` by reason, once every reason in ``wanted`` has appeared (a watch, not a poll)."""
    command = [str(cluster.kubectl), f"--kubeconfig={cluster.kubeconfig}", f"--cache-dir={cluster.cache_dir}",
               "get", "events", "-n", namespace, "--watch", f"--field-selector=involvedObject.name={name}",
               "-o", r'jsonpath={.type}{"|"}{.reason}{"|"}{.involvedObject.kind}{"|"}{.message}{"\n"}']
    seen: dict[str, dict] = {}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                # kubectl's printer turns tabs into spaces; the message is last, so a "|" in it is kept
                type_, reason, kind, message = (line.rstrip("\n").split("|", 3) + ["", "", ""])[:4]
                seen[reason] = {"type": type_, "kind": kind, "message": message}
                if wanted <= seen.keys():
                    break
        finally:
            timer.cancel()
            proc.kill()
    assert wanted <= seen.keys(), f"Events about {name} in {namespace}: {sorted(seen)}, wanted {sorted(wanted)}"
    return seen


def test_a_cluster_queue_and_its_local_queue_show_their_counts_and_usage(daemon: Daemon) -> None:
    cluster = daemon.cluster
    _apply(cluster, namespace("ts-a"), flavor("ts-flavor"), cluster_queue("ts-cq", quotas("ts-flavor", cpu="4")),
           local_queue("lq", "ts-a", "ts-cq"))
    for name in ("w1", "w2", "w3"):  # one at a time: creation stamps have a one-second grain
        _apply(cluster, _unstamped(workload(name, "ts-a", "lq", cpu="2")))
        _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].status}", f"workload/{name}",
              namespace="ts-a")
    _wait(cluster, "jsonpath={.status.admittedWorkloads}=2", "clusterqueue/ts-cq")
    _wait(cluster, "jsonpath={.status.pendingWorkloads}=1", "clusterqueue/ts-cq")
    cq = _get(cluster, "clusterqueue", "ts-cq")["status"]
    usage = [{"name": "ts-flavor", "resources": [{"name": "cpu", "total": "4", "borrowed": "0"}]}]
    assert (cq["reservingWorkloads"], cq["flavorsReservation"], cq["flavorsUsage"]) == (2, usage, usage)
    active = _condition({"status": cq}, "Active")
    assert (active["status"], active["reason"], active["message"]) == ("True", "Ready", "Can admit new workloads")

    _wait(cluster, "jsonpath={.status.admittedWorkloads}=2", "localqueue/lq", namespace="ts-a")
    _wait(cluster, "jsonpath={.status.pendingWorkloads}=1", "localqueue/lq", namespace="ts-a")
    lq = _get(cluster, "localqueue", "-n", "ts-a", "lq")["status"]
    assert lq["flavorsUsage"] == [{"name": "ts-flavor", "resources": [{"name": "cpu", "total": "4"}]}]
    assert _condition({"status": lq}, "Active")["reason"] == "Ready"

    cluster.kubectl_run("delete", "workload", "-n", "ts-a", "w1")  # w3 gets in: pending 0, still 2 admitted
    _wait(cluster, "jsonpath={.status.pendingWorkloads}=0", "clusterqueue/ts-cq")
    _wait(cluster, "jsonpath={.status.pendingWorkloads}=0", "localqueue/lq", namespace="ts-a")
    assert _get(cluster, "clusterqueue", "ts-cq")["status"]["admittedWorkloads"] == 2


def test_a_cluster_queue_is_inactive_while_its_flavor_is_missing(daemon: Daemon) -> None:
    cluster = daemon.cluster
    _apply(cluster, namespace("ts-b"), cluster_queue("ts-gpu-cq", quotas("ts-gpu", cpu="4")),
           local_queue("lq", "ts-b", "ts-gpu-cq"))
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Active')].reason}=FlavorNotFound",
          "clusterqueue/ts-gpu-cq")
    active = _condition(_get(cluster, "clusterqueue", "ts-gpu-cq"), "Active")
    assert (active["status"], active["message"]) == (
        "False", "Can't admit new workloads: references missing ResourceFlavor(s): ts-gpu.")
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Active')].reason}=ClusterQueueIsInactive",
          "localqueue/lq", namespace="ts-b")

    _apply(cluster, flavor("ts-gpu"))
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Active')].status}=True", "clusterqueue/ts-gpu-cq")
    assert _condition(_get(cluster, "clusterqueue", "ts-gpu-cq"), "Active")["reason"] == "Ready"
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Active')].reason}=Ready", "localqueue/lq",
          namespace="ts-b")


def test_a_refused_cluster_queue_says_why_and_a_good_one_beside_it_still_admits(daemon: Daemon) -> None:
    cluster = daemon.cluster
    refused = cluster.kubectl_run("apply", "--server-side", "-f", "-", check=False, stdin=yaml.safe_dump(
        cluster_queue("ts-cel", quotas("ts-flavor", cpu=("4", "2")))))  # one of Kueue's CEL rules: the API server's
    assert refused.returncode != 0 and "borrowingLimit must be nil when cohort is empty" in refused.stderr
    bad = cluster_queue("ts-bad", quotas("ts-flavor", cpu="-4"))  # Kueue's webhook refuses it, not its CRD
    _apply(cluster, namespace("ts-c"), flavor("ts-flavor"), bad,
           cluster_queue("ts-good", quotas("ts-flavor", cpu="2")), local_queue("lq", "ts-c", "ts-good"))
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Accepted')].reason}=ValidationFailed",
          "clusterqueue/ts-bad")
    accepted = _condition(_get(cluster, "clusterqueue", "ts-bad"), "Accepted")
    assert accepted["status"] == "False"
    assert accepted["message"] == ('spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: '
                                   'Invalid value: "-4": must be greater than or equal to 0')
    warning = _events(cluster, "default", "ts-bad", {"ValidationFailed"})["ValidationFailed"]
    assert (warning["type"], warning["kind"], warning["message"]) == ("Warning", "ClusterQueue", accepted["message"])

    _apply(cluster, _unstamped(workload("w", "ts-c", "lq", cpu="2")))
    _wait(cluster, "jsonpath={.status.admission.clusterQueue}=ts-good", "workload/w", namespace="ts-c")

    _apply(cluster, cluster_queue("ts-bad", quotas("ts-flavor", cpu="4")))  # fixed: its next version passes
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Accepted')].reason}=Valid", "clusterqueue/ts-bad")
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Active')].status}=True", "clusterqueue/ts-bad")


def test_an_admitted_workload_has_kueue_s_events(daemon: Daemon) -> None:
    cluster = daemon.cluster
    _apply(cluster, namespace("ts-d"), flavor("ts-flavor"), cluster_queue("ts-events", quotas("ts-flavor", cpu="2")),
           local_queue("lq", "ts-d", "ts-events"))
    _apply(cluster, _unstamped(workload("w", "ts-d", "lq", cpu="2")))
    _wait(cluster, "jsonpath={.status.admission.clusterQueue}=ts-events", "workload/w", namespace="ts-d")
    events = _events(cluster, "ts-d", "w", {"QuotaReserved", "Admitted"})
    assert events["QuotaReserved"]["type"] == "Normal" and events["QuotaReserved"]["kind"] == "Workload"
    assert events["QuotaReserved"]["message"].startswith(
        "Quota reserved in ClusterQueue ts-events, wait time since queued was ")
    assert events["Admitted"]["message"] == "Admitted by ClusterQueue ts-events, wait time since reservation was 0s"


def test_a_refused_elastic_quota_says_why_in_its_condition_and_a_warning(daemon: Daemon) -> None:
    """Koordinator's webhook would refuse min > max at apply time; kueued says so on the object."""
    cluster = daemon.cluster
    quota = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
             "metadata": {"name": "ts-eq", "namespace": "ts-e"},
             "spec": {"min": {"cpu": "10"}, "max": {"cpu": "5"}}}
    _apply(cluster, namespace("ts-e"), quota)
    _wait(cluster, "jsonpath={.status.conditions[?(@.type=='Accepted')].reason}=ValidationFailed",
          "elasticquota/ts-eq", namespace="ts-e")
    accepted = _condition(_get(cluster, "elasticquota", "ts-eq", "-n", "ts-e"), "Accepted")
    assert (accepted["status"], accepted["message"]) == ("False", "spec.min.cpu: min 10 > max 5")
    warning = _events(cluster, "ts-e", "ts-eq", {"ValidationFailed"})["ValidationFailed"]
    assert (warning["type"], warning["kind"], warning["message"]) == ("Warning", "ElasticQuota", accepted["message"])
