"""Kueue's object retention on a real API server (KEP-1618): with ``[object_retention]`` set, a
finished Workload is deleted, and so is the Job of a Workload Kueue deactivated (its Workload with it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kueued.kube import job_workload as jw
from tests.builders import workload
from tests.integration.daemon import Daemon
from tests.integration.test_daemon_api import _apply, _tree, _unstamped, _wait
from tests.integration.test_jobs_api import _create, job
from tests.integration.test_jobs_api import _wait as _wait_job

pytestmark = pytest.mark.control_plane


def test_finished_workloads_and_the_jobs_of_expired_ones_are_deleted(installed: Any, tmp_path: Path) -> None:
    cluster = installed
    config = tmp_path / "kueued.toml"
    config.write_text("[object_retention]\nworkloads_after_finished = 0\nworkloads_after_deactivated_by_kueue = 1\n")
    ns = "retention"
    _apply(cluster, *_tree(ns, "retention-cq", cpu="4"))
    daemon = Daemon(cluster, tmp_path / "kueued.log", "--config", str(config)).start()
    try:
        _apply(cluster, _unstamped(workload("done", ns, "lq", cpu="1")))
        _wait(cluster, "jsonpath={.status.admission.clusterQueue}=retention-cq", "workload/done", namespace=ns)
        finished = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}
        conditions = [*cluster.kubectl_json("get", "workload", "done", "-n", ns)["status"]["conditions"], finished]
        cluster.kubectl_run("patch", "workload", "done", "-n", ns, "--subresource=status", "--type=merge",
                            "-p", json.dumps({"status": {"conditions": conditions}}))
        cluster.kubectl_run("wait", f"--namespace={ns}", "--for=delete", "--timeout=60s", "workload/done")

        limited = job("limited", ns, cpu="1")
        limited["metadata"]["labels"][jw.MAX_EXEC_LABEL] = "2"
        wl = _create(cluster, limited)
        _wait_job(cluster, "jsonpath={.spec.suspend}=false", "job/limited", ns)
        # out of time after 2 s, deactivated and evicted; a second later the Job goes, and its Workload
        _wait_job(cluster, "delete", "job/limited", ns)
        _wait_job(cluster, "delete", f"workload/{wl}", ns)
        reasons = {(e["reason"], e["message"]) for e in cluster.kubectl_json(
            "get", "events", "-n", ns, "--field-selector", "reason=Deleted")["items"]}
        assert reasons == {("Deleted", "Deleted finished workload due to elapsed retention"),
                           ("Deleted", "Deleted job: deactivation retention period expired")}
    finally:
        assert daemon.stop() == 0
