"""The operator's CLI on a real API server: ``status``, ``explain`` and ``simulate --from-cluster``.

A small tree is applied with kubectl and ``kueued run`` (its own process, as the RBAC-bound
user ``kueued``) admits what fits; it is then stopped, so the commands read a cluster that
nothing else writes to, and the test can check that they write nothing either.

The tree (names ``ops-`` prefixed, to share the session's control plane): an implicit
Cohort ``ops-research`` of ``ops-vision`` (cpu 4) and ``ops-nlp`` (cpu 2).  w1 (3) and w2
(2) are admitted in ops-vision: 5 used, 1 borrowed, lent by ops-nlp.  w3 (2) would take the
cohort to 7, above its 6: it waits, blocked at the cohort, 1 cpu short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.integration.daemon import Daemon
from tests.integration.test_daemon_api import _apply, _unstamped, _wait

pytestmark = pytest.mark.control_plane

NS = "ops-a"


@pytest.fixture(scope="module")
def settled(installed: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The tree applied, admitted by the daemon, and the daemon stopped."""
    cluster = installed
    d = Daemon(cluster, tmp_path_factory.mktemp("ops") / "kueued.log").start()
    try:
        _apply(cluster, namespace(NS), flavor("ops-f"),
               cluster_queue("ops-vision", quotas("ops-f", cpu="4"), cohort="ops-research"),
               cluster_queue("ops-nlp", quotas("ops-f", cpu="2"), cohort="ops-research"),
               local_queue("lq", NS, "ops-vision"))
        for name, cpu in (("w1", "3"), ("w2", "2")):  # one at a time: creation stamps have a one-second grain
            _apply(cluster, _unstamped(workload(name, NS, "lq", cpu=cpu)))
            _wait(cluster, "jsonpath={.status.admission.clusterQueue}=ops-vision", f"workload/{name}", namespace=NS)
        _apply(cluster, _unstamped(workload("w3", NS, "lq", cpu="2")))
        _wait(cluster, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Pending", "workload/w3",
              namespace=NS)
    finally:
        assert d.stop() == 0, d.tail()
    yield cluster


def _kueued(cluster: Any, *args: str, program: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [*(program or [sys.executable, "-m", "kueued.cli"]), *args, "--kubeconfig", str(cluster.kubeconfig)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def _versions(cluster: Any) -> dict[str, str]:
    """resourceVersion of every object the commands read, by kind/namespace/name."""
    out = {}
    for kind in ("workloads", "localqueues", "clusterqueues", "resourceflavors"):
        for item in cluster.kubectl_json("get", kind, "--all-namespaces")["items"]:
            meta = item["metadata"]
            out[f"{kind}/{meta.get('namespace', '')}/{meta['name']}"] = meta["resourceVersion"]
    return out


def test_status_shows_the_tree_s_numbers_from_admitted_workloads(settled: Any) -> None:
    body = json.loads(_kueued(settled, "status", "--output", "json").stdout)
    vision, nlp = body["nodes"]["ClusterQueue/ops-vision"], body["nodes"]["ClusterQueue/ops-nlp"]
    cohort = body["nodes"]["Cohort/ops-research"]
    assert vision["resources"]["ops-f"]["cpu"] == {"nominal": "4", "quota": "4", "used": "5", "borrowed": "1",
                                                   "lent": "0"}
    assert nlp["resources"]["ops-f"]["cpu"] == {"nominal": "2", "quota": "2", "used": "0", "borrowed": "0",
                                                "lent": "1"}
    assert cohort["resources"]["ops-f"]["cpu"] == {"nominal": "0", "quota": "6", "used": "5", "borrowed": "0",
                                                   "lent": "0"}
    assert [(n["pending"], n["admitted"]) for n in (cohort, vision, nlp)] == [(1, 2), (1, 2), (0, 0)]
    assert (vision["parent"], vision["depth"]) == ("ops-research", 1)
    tree = _kueued(settled, "status").stdout
    assert "ClusterQueue ops-vision  pending 1 · admitted 2" in tree
    assert "ops-f cpu: used 5 of quota 4 · borrowed 1" in tree


def test_kubectl_kueued_status_runs_the_plugin(settled: Any) -> None:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kubectl-kueued").is_file(), "refresh the entry points: pip install -e . --no-deps"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(settled.kubectl), "kueued", "status", "-o", "json", "--kubeconfig", str(settled.kubeconfig)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["nodes"]["ClusterQueue/ops-vision"]["admitted"] == 2


def test_explain_an_admitted_and_a_waiting_workload(settled: Any) -> None:
    admitted = json.loads(_kueued(settled, "explain", f"{NS}/w1", "-o", "json").stdout)
    assert (admitted["state"], admitted["clusterQueue"], admitted["flavors"], admitted["usage"]) == (
        "admitted", "ops-vision", {"main": {"cpu": "ops-f"}}, {"ops-f": {"cpu": "3"}})

    waiting = json.loads(_kueued(settled, "explain", f"{NS}/w3", "-o", "json").stdout)
    assert (waiting["state"], waiting["clusterQueue"], waiting.get("fitsNow", False)) == ("pending", "ops-vision",
                                                                                           False)
    assert "quota" in waiting["reason"]  # the daemon's QuotaReserved message, read back from the cluster
    (blocked,) = waiting["blocked"]
    assert {k: blocked[k] for k in ("kind", "node", "flavor", "resource", "used", "requested", "allowed", "more")} == {
        "kind": "Cohort", "node": "ops-research", "flavor": "ops-f", "resource": "cpu", "used": "5",
        "requested": "2", "allowed": "6", "more": "1"}
    text = _kueued(settled, "explain", f"{NS}/w3").stdout
    assert "blocked at cohort ops-research: cpu in flavor ops-f would reach 5 + 2, above 6" in text
    assert "1 more cpu in flavor ops-f at Cohort ops-research: its nominalQuota 0 -> 1" in text


def test_simulate_from_cluster_shows_a_raised_quota_admitting_the_waiting_one_and_writes_nothing(
        settled: Any, tmp_path: Path) -> None:
    before = _versions(settled)
    change = tmp_path / "more-cpu.yaml"
    change.write_text(yaml.safe_dump(cluster_queue("ops-nlp", quotas("ops-f", cpu="3"), cohort="ops-research")))
    body = json.loads(_kueued(settled, "simulate", "--from-cluster", str(change), "--output", "json").stdout)
    rows = {r["workload"]: (r["now"], r["after"], r["change"]) for r in body["rows"]}
    assert rows[f"{NS}/w3"] == ("pending", "admitted in ops-vision (ops-f)", "admitted")
    assert rows[f"{NS}/w1"] == ("admitted in ops-vision (ops-f)", "admitted in ops-vision (ops-f)", "unchanged")
    assert body["evictions"] == [] and body["rejected"] == {}
    table = _kueued(settled, "simulate", "--from-cluster", str(change)).stdout
    assert "nothing written" in table and "ops-a/w3" in table
    assert _versions(settled) == before
    assert not settled.kubectl_json("get", "workload", "-n", NS, "w3").get("status", {}).get("admission")
