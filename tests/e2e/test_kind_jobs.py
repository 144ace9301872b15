"""Jobs whose pods really run, on kind, under a ``kueued run`` started by ``tests/e2e/kind.sh``.

Here there is a kubelet and a Job controller: nothing stamps a Job's status by hand (as
tests/integration/test_jobs_api.py must, on a control plane without them).  Two busybox Jobs
share a ClusterQueue that fits one: the first is admitted and unsuspended, its pod runs and
exits, the Job controller marks it Complete, kueued finishes its Workload and the second gets
the quota.  kueued runs outside the cluster, as the systemd unit runs it (``--leader-elect``,
metrics on); the script starts it and says where its metrics are (``KUEUED_E2E_METRICS``).

Skipped unless ``KUEUED_E2E_KIND=1`` (only the script sets it): these need a real cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
import uuid
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from kueued.kube import job_workload as jw
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas

pytestmark = [pytest.mark.kind,
              pytest.mark.skipif(os.environ.get("KUEUED_E2E_KIND") != "1",
                                 reason="needs the kind cluster and kueued run of `make e2e-kind`")]

POD_TIMEOUT_S = 300  # the first pull of busybox onto the kind node is most of it


def kubectl(*args: str, stdin: str | None = None) -> str:
    command = [os.environ.get("KUEUED_E2E_KUBECTL", "kubectl"),
               f"--kubeconfig={os.environ['KUEUED_TEST_KUBECONFIG']}", *args]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=POD_TIMEOUT_S + 60)
    if result.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def wait(ns: str, condition: str, obj: str, timeout: int = 120) -> None:
    kubectl("wait", f"--namespace={ns}", "--for=create", f"--timeout={timeout}s", obj)
    kubectl("wait", f"--namespace={ns}", f"--for={condition}", f"--timeout={timeout}s", obj)


def busybox_job(name: str, ns: str, *, cpu: str) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{
        "name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 2"],
        "resources": {"requests": {"cpu": cpu}}}]}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {jw.QUEUE_LABEL: "lq"}},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": pod}}}


def create(ns: str, manifest: dict[str, Any]) -> str:
    """Create a Job; the name of its Workload."""
    kubectl("create", "-f", "-", stdin=yaml.safe_dump(manifest))
    uid = kubectl("get", "job", manifest["metadata"]["name"], "-n", ns, "-o", "jsonpath={.metadata.uid}")
    return jw.workload_name(manifest["metadata"]["name"], uid)


def ready(url: str, timeout: float = 60) -> None:
    """Until kueued's /readyz answers 200 (another process: polled)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"kueued's {url}/readyz did not answer 200 within {timeout:g}s")
        time.sleep(0.2)


def test_real_pods_finish_and_their_quota_goes_to_the_next_job() -> None:
    metrics = os.environ["KUEUED_E2E_METRICS"]
    ready(metrics)
    ns = f"e2e-jobs-{uuid.uuid4().hex[:6]}"
    cq = f"{ns}-cq"
    kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all([
        namespace(ns), flavor("e2e-default"), cluster_queue(cq, quotas("e2e-default", cpu="1")),
        local_queue("lq", ns, cq)]))

    first = create(ns, busybox_job("first", ns, cpu="600m"))
    wait(ns, "jsonpath={.spec.suspend}=false", "job/first")
    second = create(ns, busybox_job("second", ns, cpu="600m"))  # 600m + 600m > 1: it waits
    wait(ns, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].reason}=Pending", f"workload/{second}")

    wait(ns, "condition=Complete", "job/first", timeout=POD_TIMEOUT_S)  # the Job controller says so, not us
    wait(ns, "jsonpath={.status.conditions[?(@.type=='Finished')].reason}=Succeeded", f"workload/{first}")
    wait(ns, "jsonpath={.spec.suspend}=false", "job/second")
    wait(ns, "condition=Complete", "job/second", timeout=POD_TIMEOUT_S)
    wait(ns, "jsonpath={.status.conditions[?(@.type=='Finished')].reason}=Succeeded", f"workload/{second}")

    pods = json.loads(kubectl("get", "pods", "-n", ns, "-o", "json"))["items"]
    assert sorted(p["status"]["phase"] for p in pods) == ["Succeeded", "Succeeded"]
    with urllib.request.urlopen(f"{metrics}/metrics", timeout=10) as response:
        text = response.read().decode()
    admitted = {s.labels["cluster_queue"]: s.value for family in text_string_to_metric_families(text)
                if family.name == "kueue_admitted_workloads" for s in family.samples
                if s.name == "kueue_admitted_workloads_total"}
    assert admitted.get(cq) == 2
