"""A refused update survives a restart refused: the version in force rides on the object
(``kueued.io/in-force``, :mod:`kueued.kube.in_force`), driven with kubectl on a real API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.integration.daemon import Daemon
from tests.integration.test_daemon_api import _admitted, _apply, _condition, _unstamped, _wait

pytestmark = pytest.mark.control_plane

NS = "team-if"


def test_refused_updates_stay_refused_across_a_restart_and_the_earlier_versions_keep_working(
        installed: Any, tmp_path: Path) -> None:
    cluster = installed
    _apply(cluster, namespace(NS), flavor("default"), cluster_queue("if-old", quotas("default", cpu="1")),
           cluster_queue("if-new", quotas("default", cpu="10")), local_queue("lq", NS, "if-old"))
    first = Daemon(cluster, tmp_path / "first.log").start()
    try:
        _apply(cluster, _unstamped(workload("w1", NS, "lq", cpu="1")))
        _wait(cluster, "jsonpath={.status.admission.clusterQueue}=if-old", "workload/w1", namespace=NS)
        _apply(cluster, _unstamped(workload("w2", NS, "lq", cpu="1")))
        _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Pending", "workload/w2",
              namespace=NS)
        # Kueue's CEL rules are the API server's: a LocalQueue cannot move, kubectl says why
        moved = cluster.kubectl_run("patch", "localqueue", "-n", NS, "lq", "--type=merge", "-p",
                                    json.dumps({"spec": {"clusterQueue": "if-new"}}), check=False)
        assert moved.returncode != 0 and "spec.clusterQueue" in moved.stderr and "field is immutable" in moved.stderr
        # Kueue's webhook refuses a negative quota; kueued refuses it after the API server stored it
        cluster.kubectl_run("patch", "clusterqueue", "if-old", "--type=json", "-p", json.dumps([
            {"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": "-1"}]))
        cluster.kubectl_run("wait", "clusterqueue/if-old", "--timeout=60s",
                            "--for=jsonpath={.metadata.annotations.kueued\\.io/in-force}")
    finally:
        assert first.stop() == 0
    second = Daemon(cluster, tmp_path / "second.log").start()
    try:
        second.wait_for("daemon_ready", timeout=60)
        # if-old still works with its earlier quota: w1 finished, w2 takes its place there
        cluster.kubectl_run("patch", "workload", "-n", NS, "w1", "--subresource=status", "--type=merge", "-p",
                            json.dumps({"status": {"conditions": [{
                                "type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
        _wait(cluster, "jsonpath={.status.admission.clusterQueue}=if-old", "workload/w2", namespace=NS)
        cq = cluster.kubectl_json("get", "clusterqueue", "if-old")
        accepted = _condition(cq, "Accepted")  # still refused, the same refusal
        assert accepted is not None and accepted["status"] == "False" and "nominalQuota" in accepted["message"]
        assert _admitted(cluster, NS) == ["w1", "w2"]  # w1 finished keeps its admission record
        assert not [e for e in second.events() if e["event"] == "workload_admitted"
                    and e.get("cluster_queue") == "if-new"]
    finally:
        assert second.stop() == 0
