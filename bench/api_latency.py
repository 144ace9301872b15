"""Time from a Workload's creation to its committed admission, through a real API server.

    .venv/bin/python bench/api_latency.py                    # 1,000 workloads, all of which fit
    .venv/bin/python bench/api_latency.py --workloads 5000 --cluster-queues 20

Starts a local control plane (``kueued.devcluster``, built once), installs ``kueued
manifests``, runs ``kueued run`` as its own process (the daemon a user would run, as user
``kueued`` bound to its RBAC), then creates the Workloads through the API as fast as a few
concurrent clients allow and watches them: a Workload's latency is from the moment its
create call returned to the moment the watch shows its ``status.admission``.  The tree has
quota for every workload, so this measures the path (watch -> decision -> status write ->
watch), not contention.  Prints the median and p99 latency, the commits per second kueued
sustained (admissions / the span from first to last), and the same figures for the create
calls alone, the API server's own floor on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import yaml
from rich.console import Console
from rich.table import Table

from kueued.devcluster.controlplane import ControlPlane
from kueued.devcluster.versions import binaries
from kueued.kube.client import KubeClient
from kueued.kube.connect import connect
from kueued.kube.manifests import render

API = "kueue.x-k8s.io/v1beta2"
NS = "bench"


def _tree(queues: int, workloads: int) -> list[dict]:
    per_queue = -(-workloads // queues)
    objs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    for i in range(queues):
        objs.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": f"cq-{i}"},
                     "spec": {"namespaceSelector": {}, "cohortName": "all", "resourceGroups": [
                         {"coveredResources": ["cpu"], "flavors": [
                             {"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(per_queue)}]}]}]}})
        objs.append({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": f"lq-{i}", "namespace": NS},
                     "spec": {"clusterQueue": f"cq-{i}"}})
    return objs


def _workload(i: int, queues: int) -> dict:
    return {"apiVersion": API, "kind": "Workload", "metadata": {"name": f"w-{i}", "namespace": NS},
            "spec": {"queueName": f"lq-{i % queues}", "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}]}}


async def _measure(client: KubeClient, *, workloads: int, queues: int, writers: int) -> dict:
    created: dict[str, float] = {}
    admitted: dict[str, float] = {}
    _, version = await client.list("Workload", NS)
    done = anyio.Event()

    async def watch() -> None:
        async with client.watch("Workload", version, timeout_seconds=600, namespace=NS) as events:
            async for event in events:
                obj = event.get("object") or {}
                name = (obj.get("metadata") or {}).get("name")
                if name and name not in admitted and (obj.get("status") or {}).get("admission"):
                    admitted[name] = time.perf_counter()
                    if len(admitted) == workloads:
                        done.set()
                        return

    async def write(start: int) -> None:
        for i in range(start, workloads, writers):
            await client.create("Workload", _workload(i, queues))
            created[f"w-{i}"] = time.perf_counter()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        await anyio.sleep(0.5)  # the watch is open before the first create
        began = time.perf_counter()
        async with anyio.create_task_group() as writers_tg:
            for w in range(writers):
                writers_tg.start_soon(write, w)
        created_all = time.perf_counter()
        with anyio.fail_after(600):
            await done.wait()
    latencies = sorted(admitted[n] - created[n] for n in created)
    first, last = min(admitted.values()), max(admitted.values())
    return {"latencies": latencies, "commits_per_s": (workloads - 1) / (last - first) if last > first else 0.0,
            "creates_per_s": workloads / (created_all - began)}


def _pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--cluster-queues", type=int, default=10)
    ap.add_argument("--writers", type=int, default=8, help="concurrent create calls")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(apiserver_args=[
            "--max-requests-inflight=5000", "--max-mutating-requests-inflight=2500"]) as cp:
        user = cp.user_kubeconfig("kueued")
        log = Path(tmp) / "kueued.log"

        async def run() -> dict:
            client = await connect(cp.kubeconfig)
            async with client:
                kubectl(cp, "apply", "--server-side", "-f", "-", stdin=render(user="kueued"))
                kubectl(cp, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
                kubectl(cp, "apply", "--server-side", "-f", "-",
                        stdin=yaml.safe_dump_all(_tree(args.cluster_queues, args.workloads)))
                with log.open("w") as out:
                    daemon = subprocess.Popen([sys.executable, "-m", "kueued.cli", "--log-format", "json",
                                               "--log-level", "WARNING", "run", "--kubeconfig", str(user),
                                               "--interval", "0.2"], stderr=out)
                    try:
                        await anyio.sleep(2)  # its initial sync
                        return await _measure(client, workloads=args.workloads, queues=args.cluster_queues,
                                              writers=args.writers)
                    finally:
                        daemon.terminate()
                        daemon.wait(timeout=30)

        result = anyio.run(run)
    lat = result["latencies"]
    table = Table(title=f"{args.workloads} Workloads through kube-apiserver (kueued run as its own process)")
    for col in ("median latency", "p99 latency", "max", "commits / s", "creates / s (API floor)"):
        table.add_column(col, justify="right")
    table.add_row(f"{statistics.median(lat) * 1000:.0f} ms", f"{_pct(lat, 99) * 1000:.0f} ms",
                  f"{lat[-1] * 1000:.0f} ms", f"{result['commits_per_s']:.0f}", f"{result['creates_per_s']:.0f}")
    Console().print(table)
    return 0


def kubectl(cp: ControlPlane, *args: str, stdin: str | None = None) -> None:
    subprocess.run([str(binaries().kubectl), f"--kubeconfig={cp.kubeconfig}", *args], input=stdin, text=True,
                   check=True, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
