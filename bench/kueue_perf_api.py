"""Kueue's scheduler-performance configurations end to end, through a real API server.

    .venv/bin/python bench/kueue_perf_api.py --scale 0.1          # a tenth of the baseline, about a minute
    .venv/bin/python bench/kueue_perf_api.py                      # the full baseline (15,000 Workloads)
    .venv/bin/python bench/kueue_perf_api.py --config large-scale --plot perf.png
    .venv/bin/python bench/kueue_perf_api.py --config large-scale --scale 0.1 --repeat 3   # the median of 3 pairs

``bench/kueue_perf.py`` measures the engine in-process; this measures what a user gets.  It starts
a local control plane (``kueued.devcluster``, with ``--max-requests-inflight=5000
--max-mutating-requests-inflight=2500`` as Kueue's envtest runner has), installs ``kueued
manifests``, creates the generator's objects, and then plays the trace in three ways (the two runs
through the API server each on a fresh control plane, so neither starts with the other's deletions
in etcd):

- **kueued**: ``kueued run`` as its own process (user ``kueued``, its RBAC only, the Job integration
  off as in Kueue's minimalkueue).  A *runner* in this process creates each Workload at its
  generator time, and a *recorder* watches Workloads: an ``Admitted=True`` Workload is marked
  ``Finished=True`` (reason ``ByTest``, the condition kueued's World and Kueue read as done) its run
  time after the watch showed the admission, as Kueue's runner (``runner/controller``) does; an
  evicted one's finish is cancelled and its run time restarts when it is admitted again.  Usage is
  reserved cpu (admitted, not yet finished) integrated over the run per ClusterQueue.
- **API floor**: the same runner against the same kind of API server, with kueued replaced by a trivial
  in-process admitter that writes, for every Workload as soon as its watch shows it, the status
  patch kueued's ``KubePort.admit`` makes (``status.admission`` and ``QuotaReserved``/``Admitted``,
  with the resourceVersion) and knows no quota: what the API server and the runner alone cost.
- **schedule floor**: the virtual-clock makespan of the same trace on the engine
  (``actors.simulation.simulate_timed``), an infinitely fast scheduler making kueued's decisions.
- **chain floor** (printed beside them, not one of the issue's targets): the schedule floor with each
  run time longer by one *link latency*, the API floor's median time from a create to the runner
  seeing the admission.  A finish reaches the scheduler and the admission it frees reaches the runner
  through the same four steps, so however fast the scheduler, each admission holds its quota about
  that much longer than it runs; neither floor above contains that latency.  It is an estimate, not a
  bound: the median moves with how far the floor run's admitter queues (0.18 s and 0.63 s in two full
  baseline runs).

kueued's CPU seconds (over the run, from ``/proc``, read before the bench scrapes it: one scrape of
1,000 queues' series takes 0.6 s) and peak RSS are read from its process, and its
commit latency (median, p99) from its own ``kueued_commit_duration_seconds`` histogram
(``/metrics``), interpolated within buckets as Prometheus' ``histogram_quantile`` does.  Ratios:
wall / max(API floor, schedule floor) (target <= 1.15), kueued CPU / wall (<= 50 %), commit p99 (<= 1 s).
Beside them, the **API-side CPU floor**: the CPU the API server, etcd and the runner spent in
kueued's run, over the cores this process may use.  No run fits more CPU into its wall than the
cores give, so that is a wall no scheduler making kueued's writes could go under, even one that
used no CPU itself: when it is above 1.15x the floors, the writes (Kueue's Events, pending reasons
and queue status, which the API floor does not make), not the scheduler, stop the first target.

``--scale F`` keeps the tree (cohorts, ClusterQueues, quotas) and multiplies each workload set's
count by F (at least one each), so the arrival span, the work and the lower bound shrink by about F;
Kueue's figures are for scale 1 only.  The lower bound is computed from the trace: the larger of the
busiest cohort's work / quota and the last arrival plus its run time (66 s for the baseline).
The machine is shared: the load average before and after each run is printed with it.
"""

from __future__ import annotations

import argparse
import copy
import heapq
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.kueue_perf import KUEUE, PERF  # noqa: E402
from kueued.generator import GeneratorConfig, build_trace, load_generator  # noqa: E402
from kueued.kube.client import KubeClient  # noqa: E402
from kueued.kube.conditions import merge_conditions  # noqa: E402
from kueued.kube.errors import ApiConflict, ApiError, ApiNotFound  # noqa: E402
from kueued.kube.port import Condition  # noqa: E402
from kueued.model.quantity import parse  # noqa: E402
from kueued.native import engine  # noqa: E402
from kueued.timeline import Trace  # noqa: E402

INFLIGHT = ["--max-requests-inflight=5000", "--max-mutating-requests-inflight=2500"]
TARGETS = {"wall": 1.15, "cpu": 0.50, "p99": 1.0}
CLASSES = ("small", "medium", "large")


# -- the trace ------------------------------------------------------------------------------------

def scaled(config: GeneratorConfig, scale: float) -> GeneratorConfig:
    """The same tree with every workload set's count times ``scale`` (at least one)."""
    rep = msgspec.structs.replace
    return rep(config, cohorts=[rep(c, queues_sets=[rep(q, workloads_sets=[
        rep(s, count=max(1, round(s.count * scale))) for s in q.workloads_sets]) for q in c.queues_sets])
        for c in config.cohorts])


def placed(trace: Trace, *, namespace: str, prefix: str) -> Trace:
    """The trace in ``namespace``, its cluster-scoped objects named ``prefix + name`` (a shared cluster)."""
    def cluster(name: str) -> str:
        return prefix + name
    setup = []
    for obj in copy.deepcopy(trace.setup):
        meta, spec = obj["metadata"], obj.get("spec") or {}
        match obj["kind"]:
            case "Namespace":
                meta["name"] = namespace
            case "ResourceFlavor" | "Cohort":
                meta["name"] = cluster(meta["name"])
            case "ClusterQueue":
                meta["name"] = cluster(meta["name"])
                spec["cohortName"] = cluster(spec["cohortName"])
                for group in spec["resourceGroups"]:
                    for flavor in group["flavors"]:
                        flavor["name"] = cluster(flavor["name"])
            case "LocalQueue":
                meta["namespace"] = namespace
                spec["clusterQueue"] = cluster(spec["clusterQueue"])
        setup.append(obj)
    arrivals = []
    for a in trace.arrivals:
        manifest = copy.deepcopy(a.manifest)
        manifest["metadata"]["namespace"] = namespace
        manifest["metadata"].pop("creationTimestamp", None)  # the API server's, not the generator's
        arrivals.append(msgspec.structs.replace(a, key=f"{namespace}/{manifest['metadata']['name']}",
                                                manifest=manifest))
    return Trace(setup, arrivals, trace.epoch)


@dataclass
class Shape:
    """What the trace implies: per LocalQueue its ClusterQueue, per workload its cpu, the lower bound."""

    cq_of_lq: dict[str, str]
    flavor_of_cq: dict[str, str]
    nominal: dict[str, float]          # ClusterQueue -> nominal cpu
    cpu: dict[str, float]              # workload key -> requested cpu
    runtime: dict[str, float]          # workload key -> seconds
    klass: dict[str, str]
    bound: float


def shape_of(trace: Trace) -> Shape:
    cq_of_lq: dict[str, str] = {}
    flavor_of_cq: dict[str, str] = {}
    nominal: dict[str, float] = {}
    cohort_of: dict[str, str] = {}
    for obj in trace.setup:
        spec = obj.get("spec") or {}
        if obj["kind"] == "LocalQueue":
            cq_of_lq[obj["metadata"]["name"]] = spec["clusterQueue"]
        elif obj["kind"] == "ClusterQueue":
            name = obj["metadata"]["name"]
            flavors = [f for g in spec["resourceGroups"] for f in g["flavors"]]
            flavor_of_cq[name] = flavors[0]["name"]
            nominal[name] = sum(parse(r["nominalQuota"]) for f in flavors for r in f["resources"]) / 1000
            cohort_of[name] = spec.get("cohortName") or name
    cpu: dict[str, float] = {}
    runtime: dict[str, float] = {}
    klass: dict[str, str] = {}
    work: dict[str, float] = {}
    last = 0.0
    for a in trace.arrivals:
        requests = a.manifest["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
        cpu[a.key] = parse(requests["cpu"]) / 1000
        runtime[a.key] = (a.runtime or 0) / 1e6
        klass[a.key] = a.klass
        cq = cq_of_lq[a.manifest["spec"]["queueName"]]
        work[cohort_of[cq]] = work.get(cohort_of[cq], 0.0) + cpu[a.key] * runtime[a.key]
        last = max(last, a.at / 1e6 + runtime[a.key])
    quota: dict[str, float] = {}
    for cq, n in nominal.items():
        quota[cohort_of[cq]] = quota.get(cohort_of[cq], 0.0) + n
    bound = max([last] + [w / quota[c] for c, w in work.items() if quota.get(c)])
    return Shape(cq_of_lq, flavor_of_cq, nominal, cpu, runtime, klass, bound)


# -- one run: runner, recorder, finisher ----------------------------------------------------------

@dataclass
class Result:
    label: str
    wall: float = 0.0
    created: dict[str, float] = field(default_factory=dict)       # key -> seconds after the start
    first_admit: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    admissions: int = 0
    admit_times: list[float] = field(default_factory=list)        # every admission, re-admissions too
    evictions: int = 0
    finish_writes: int = 0
    area: dict[str, float] = field(default_factory=dict)           # ClusterQueue -> reserved cpu x s
    samples: list[tuple[float, float, int]] = field(default_factory=list)  # (t, reserved cpu, pending)
    load: tuple[str, str] = ("", "")
    bench_cpu: float = 0.0
    process: dict[str, float] = field(default_factory=dict)        # kueued: cpu_s, rss_mib, p50, p99, ready_s
    servers_cpu: float | None = None
    writes: dict[str, float] = field(default_factory=dict)         # API writes per resource[/subresource]
    reads: dict[str, float] = field(default_factory=dict)          # API reads per "VERB resource[/subresource]"


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    listed = (obj.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): str(c.get("status")) for c in listed if isinstance(c, dict)}


async def client_for(kubeconfig: Path, *, pool: int = 64) -> KubeClient:
    """kueued's client with a connection pool big enough for the runner's concurrent calls (and,
    as kueued's, not reading ~/.netrc and the proxy variables on every request: the runner and
    the API floor's admitter share the machine with what they measure)."""
    from kubernetes_asyncio.client import ApiClient, Configuration
    from kubernetes_asyncio.config import load_kube_config

    from kueued.kube.connect import stop_env_lookups
    config = Configuration()
    await load_kube_config(config_file=str(kubeconfig), client_configuration=config, persist_config=False)
    config.connection_pool_maxsize = pool
    api = ApiClient(configuration=config)
    stop_env_lookups(api)
    return KubeClient(api)


async def install_setup(client: KubeClient, trace: Trace) -> None:
    for obj in trace.setup:
        try:
            await client.create(obj["kind"], obj)
        except ApiConflict:
            pass  # already there (an earlier run)


async def remove(kubeconfig: Path, trace: Trace, namespace: str) -> None:
    """Delete the run's Workloads and setup objects (not the Namespace: no controller here would finish that)."""
    client = await client_for(kubeconfig)
    async with client:
        await delete_workloads(client, namespace)
        for obj in reversed(trace.setup):
            if obj["kind"] != "Namespace":
                try:
                    await client.delete(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
                except ApiNotFound:
                    pass


async def delete_workloads(client: KubeClient, namespace: str) -> None:
    from kubernetes_asyncio.client import CustomObjectsApi
    await CustomObjectsApi(client.api).delete_collection_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads")
    with anyio.fail_after(300):
        while (await client.list("Workload", namespace))[0]:
            await anyio.sleep(0.5)


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})


async def api_requests(client: KubeClient) -> dict[str, float]:
    """The API server's own count of the requests it answered (``apiserver_request_total``), per
    ``VERB resource[/subresource]``: kueued's writes (and reads) set beside the floor's."""
    from prometheus_client.parser import text_string_to_metric_families
    response = await client.api.call_api("/metrics", "GET", header_params={"Accept": "text/plain"},
                                         auth_settings=["BearerToken"], _preload_content=False)
    async with response:
        text = await response.text()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "apiserver_request_total":
                what = "/".join(x for x in (s.labels.get("resource"), s.labels.get("subresource")) if x)
                key = f"{s.labels.get('verb')} {what}"
                out[key] = out.get(key, 0.0) + s.value
    return out


def _by_kind(before: dict[str, float], after: dict[str, float], *, writes: bool) -> dict[str, float]:
    """The requests made between two counts: writes per ``resource[/subresource]``, or reads per
    ``VERB resource[/subresource]``."""
    out: dict[str, float] = {}
    for key, v in after.items():
        verb, _, what = key.partition(" ")
        if (verb in WRITE_VERBS) != writes or v <= before.get(key, 0.0):
            continue
        k = what if writes else key
        out[k] = out.get(k, 0.0) + v - before.get(key, 0.0)
    return dict(sorted(out.items()))


async def _watch(client: KubeClient, namespace: str, on_event: Callable[[dict[str, Any]], None],
                 version: str) -> None:
    """Every Workload event in ``namespace`` after ``version``, the watch re-opened when the server ends it."""
    while True:
        async with client.watch("Workload", version, timeout_seconds=3000, namespace=namespace) as events:
            async for event in events:
                version = (event["object"].get("metadata") or {}).get("resourceVersion") or version
                if event["type"] != "BOOKMARK":
                    on_event(event["object"])


class Runner:
    """Creates the Workloads on time, records what the watch shows, finishes each after its run time."""

    def __init__(self, trace: Trace, shape: Shape, *, label: str, creators: int, finishers: int,
                 progress: Progress | None) -> None:
        self.trace, self.shape = trace, shape
        self.result = Result(label)
        self.creators, self.finishers = creators, finishers
        self.progress = progress
        self.start = 0.0
        self.total = len(trace.arrivals)
        self.running: dict[str, tuple[int, float]] = {}  # key -> (generation, admitted at) while Admitted
        self.evicted: set[str] = set()
        self.latest: dict[str, dict[str, Any]] = {}      # key -> the object as last seen
        self.held: dict[str, float] = {}                 # ClusterQueue -> reserved cpu now
        self._since = 0.0
        self._due: list[tuple[float, int, str]] = []
        self._wake = anyio.Event()
        self._generation = 0
        self.done = anyio.Event()

    def now(self) -> float:
        return time.monotonic() - self.start

    # --- recorder ---------------------------------------------------------------------------
    def on_event(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if key not in self.shape.cpu or key in self.result.finished:
            return
        self.latest[key] = obj
        cond = _conditions(obj)
        now = self.now()
        cq = ((obj.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if cond.get("Evicted") == "True" and key not in self.evicted:
            self.evicted.add(key)
            self.result.evictions += 1
        if cond.get("Finished") == "True":
            self._release(key, now)
            self.result.finished[key] = now
            if len(self.result.finished) == self.total:
                self.result.wall = now
                self.done.set()
        elif cond.get("Admitted") == "True" and cq and key not in self.running:
            self.evicted.discard(key)
            self._generation += 1
            self.running[key] = (self._generation, now)
            self._hold(cq, self.shape.cpu[key], now)
            self.result.admissions += 1
            self.result.admit_times.append(now)
            self.result.first_admit.setdefault(key, now)
            heapq.heappush(self._due, (now + self.shape.runtime[key], self._generation, key))
            self._wake.set()
        elif cond.get("Admitted") != "True" and key in self.running:
            self._release(key, now)

    def _release(self, key: str, now: float) -> None:
        if key in self.running:
            del self.running[key]
            cq = ((self.latest[key].get("status") or {}).get("admission") or {}).get("clusterQueue")
            self._hold(cq or self.shape.cq_of_lq[self.latest[key]["spec"]["queueName"]], -self.shape.cpu[key], now)

    def _hold(self, cq: str, delta: float, now: float) -> None:
        reserved = sum(self.held.values())
        for name, cpu in self.held.items():
            self.result.area[name] = self.result.area.get(name, 0.0) + cpu * (now - self._since)
        self._since = now
        self.held[cq] = self.held.get(cq, 0.0) + delta
        if not self.result.samples or now - self.result.samples[-1][0] >= 0.1:
            self._sample(now, reserved)

    def _sample(self, now: float, reserved: float) -> None:
        pending = len(self.result.created) - len(self.running) - len(self.result.finished)
        self.result.samples.append((now, reserved, pending))

    # --- runner -----------------------------------------------------------------------------
    async def _create(self, client: KubeClient, worker: int) -> None:
        for a in self.trace.arrivals[worker::self.creators]:
            await anyio.sleep(max(0.0, a.at / 1e6 - self.now()))
            await client.create("Workload", a.manifest)
            self.result.created[a.key] = self.now()

    async def _finish(self, client: KubeClient) -> None:
        limiter = anyio.CapacityLimiter(self.finishers)
        async with anyio.create_task_group() as tg:
            while True:
                while self._due and self._due[0][0] <= self.now():
                    _, generation, key = heapq.heappop(self._due)
                    if self.running.get(key, (None,))[0] == generation:
                        tg.start_soon(self._finish_one, client, limiter, key, generation)
                self._wake = anyio.Event()
                with anyio.move_on_after(self._due[0][0] - self.now() if self._due else 1.0):
                    await self._wake.wait()

    async def _finish_one(self, client: KubeClient, limiter: anyio.CapacityLimiter, key: str,
                          generation: int) -> None:
        """Kueue's runner: ``Finished=True`` (``ByTest``) on the Workload's current version, unless evicted."""
        async with limiter:
            namespace, name = key.split("/", 1)
            obj = self.latest[key]
            for _ in range(10):
                if self.running.get(key, (None,))[0] != generation or key in self.evicted:
                    return  # evicted meanwhile: the run time restarts when it is admitted again
                meta = obj.get("metadata") or {}
                conditions = merge_conditions((obj.get("status") or {}).get("conditions") or [],
                                              [Condition("Finished", "True", "ByTest", "By test runner")],
                                              generation=meta.get("generation"),
                                              now=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                try:
                    await client.patch_status("Workload", namespace, name, {"status": {"conditions": conditions}},
                                              resource_version=meta.get("resourceVersion"))
                    self.result.finish_writes += 1
                    return
                except ApiConflict:
                    obj = await client.get("Workload", namespace, name)
                    if _conditions(obj).get("Admitted") != "True" or _conditions(obj).get("Evicted") == "True":
                        return
                except ApiNotFound:
                    return
                except ApiError:  # throttled or a server error: again on the version the watch shows now
                    await anyio.sleep(0.5)
                    obj = self.latest[key]

    async def _tick(self) -> None:
        """The progress bars, and a sample every half second (a stretch without events shows flat)."""
        progress = self.progress
        tasks = [] if progress is None else [progress.add_task(f"{self.result.label}: {what}", total=self.total)
                                             for what in ("created", "admitted", "finished")]
        while True:
            for task, n in zip(tasks, (self.result.created, self.result.first_admit, self.result.finished),
                               strict=False):
                assert progress is not None
                progress.update(task, completed=len(n))
            self._sample(self.now(), sum(self.held.values()))
            await anyio.sleep(0.5)

    async def run(self, clients: list[KubeClient], namespace: str, *, timeout: float) -> Result:
        watcher, creator, finisher = clients
        _, version = await watcher.list("Workload", namespace)
        self.start = time.monotonic()
        bench_cpu = time.process_time()
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch, watcher, namespace, self.on_event, version)
                tg.start_soon(self._finish, finisher)
                tg.start_soon(self._tick)
                for w in range(self.creators):
                    tg.start_soon(self._create, creator, w)
                await self.done.wait()
                tg.cancel_scope.cancel()
        self.result.bench_cpu = time.process_time() - bench_cpu
        return self.result


# -- the API floor's admitter ---------------------------------------------------------------------

async def admit_everything(client: KubeClient, namespace: str, shape: Shape, *, in_flight: int = 32) -> None:
    """Admit each Workload as soon as the watch shows it, with ``KubePort.admit``'s status patch; no quota."""
    limiter = anyio.CapacityLimiter(in_flight)

    async def admit(obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = f"{namespace}/{meta['name']}"
        cq = shape.cq_of_lq[obj["spec"]["queueName"]]
        async with limiter:
            conditions = merge_conditions(
                (obj.get("status") or {}).get("conditions") or [],
                [Condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"),
                 Condition("Admitted", "True", "Admitted", "The workload is admitted")],
                generation=meta.get("generation"), now=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            cpu = f"{round(shape.cpu[key] * 1000)}m"
            body = {"status": {"conditions": conditions, "admission": {"clusterQueue": cq, "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {"cpu": shape.flavor_of_cq[cq]},
                 "resourceUsage": {"cpu": cpu}}]}}}
            try:
                await client.patch_status("Workload", namespace, meta["name"], body,
                                          resource_version=meta.get("resourceVersion"))
            except ApiConflict:
                pass  # the watch brings the newer version, which is admitted again below

    items, version = await client.list("Workload", namespace)
    async with anyio.create_task_group() as tg:
        def seen(obj: dict[str, Any]) -> None:
            status = obj.get("status") or {}
            if not status.get("admission") and _conditions(obj).get("Finished") != "True":
                tg.start_soon(admit, obj)
        for obj in items:
            seen(obj)
        await _watch(client, namespace, seen, version)


# -- kueued, the process --------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _http(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""
    except (ConnectionError, urllib.error.URLError):
        return 0, ""


def commit_quantiles(text: str, qs: tuple[float, ...] = (0.5, 0.99)) -> list[float]:
    """``histogram_quantile`` over every kind of ``kueued_commit_duration_seconds`` (linear within a bucket)."""
    from prometheus_client.parser import text_string_to_metric_families
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "kueued_commit_duration_seconds_bucket":
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
    ordered = sorted(buckets.items())
    total = ordered[-1][1] if ordered else 0.0
    out = []
    for q in qs:
        rank, lower, below = q * total, 0.0, 0.0
        value = math.nan
        for le, count in ordered:
            if count >= rank and total:
                value = lower if math.isinf(le) else lower + (le - lower) * (rank - below) / max(count - below, 1e-9)
                break
            lower, below = le, count
        out.append(value)
    return out


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Kueued:
    """``kueued run`` against the cluster as user ``kueued``; ``metrics`` scraped from its port."""

    def __init__(self, kubeconfig: Path, log: Path, extra: list[str]) -> None:
        self.port = _free_port()
        self.log = log
        self.argv = [sys.executable, "-m", "kueued.cli", "--log-format", "json", "--log-level", "WARNING", "run",
                     "--kubeconfig", str(kubeconfig), "--metrics-port", str(self.port), "--no-job-integration",
                     *extra]

    async def __aenter__(self) -> Kueued:
        self.out = self.log.open("w")
        began = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stderr=self.out, stdout=subprocess.DEVNULL, cwd=ROOT)
        with anyio.fail_after(120):
            while (await anyio.to_thread.run_sync(_http, self.url("/readyz")))[0] != 200:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"kueued exited ({self.proc.returncode}); its log: {self.log}")
                await anyio.sleep(0.2)
        self.ready_after = time.monotonic() - began  # start-up: the first list of every kind, applied
        return self

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def __aexit__(self, *exc: object) -> None:
        self.proc.terminate()
        await anyio.to_thread.run_sync(self.proc.wait, 30)
        self.out.close()


# -- the three runs -------------------------------------------------------------------------------

@dataclass
class Options:
    namespace: str = "perf"
    prefix: str = ""
    creators: int = 16
    finishers: int = 16
    timeout: float = 3600.0
    api_floor: bool = True
    daemon: bool = True  # kueued's run (off: the API floor's alone, on a control plane of its own)
    kueued_args: list[str] = field(default_factory=list)
    server_pids: list[int] = field(default_factory=list)
    state: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _servers_cpu(pids: list[int]) -> float:
    return sum(_cpu_seconds(p) for p in pids)


async def measure(trace: Trace, *, admin: Path, kueued_kubeconfig: Path, options: Options,
                  progress: Progress | None = None) -> tuple[Result | None, Result | None]:
    """(the API floor's run, kueued's run), each None when ``options`` leaves it out, against a
    cluster with kueued's CRDs installed."""
    shape = shape_of(trace)
    floor = ours = None
    clients = [await client_for(admin) for _ in range(4)]
    try:
        await install_setup(clients[0], trace)

        async def one(label: str, admitter: Callable[[], Any]) -> Result:
            await delete_workloads(clients[0], options.namespace)
            runner = Runner(trace, shape, label=label, creators=options.creators, finishers=options.finishers,
                            progress=progress)
            load, servers = _load(), _servers_cpu(options.server_pids)
            requests = await api_requests(clients[0])
            async with admitter() as proc, anyio.create_task_group() as tg:
                if proc is None:
                    tg.start_soon(admit_everything, clients[3], options.namespace, shape)
                cpu = _cpu_seconds(proc.proc.pid) if proc is not None else 0.0
                result = await runner.run(clients[:3], options.namespace, timeout=options.timeout)
                if proc is not None:  # its CPU over the run, before the scrape below (0.6 s on 1,000 queues)
                    cpu = _cpu_seconds(proc.proc.pid) - cpu
                    _, text = await anyio.to_thread.run_sync(_http, proc.url("/metrics"))
                    p50, p99 = commit_quantiles(text)
                    result.process = {"cpu_s": cpu,
                                      "rss_mib": _peak_rss_mib(proc.proc.pid), "p50": p50, "p99": p99,
                                      "ready_s": proc.ready_after}
                tg.cancel_scope.cancel()
            result.load = (load, _load())
            after = await api_requests(clients[0])
            result.writes = _by_kind(requests, after, writes=True)
            result.reads = _by_kind(requests, after, writes=False)
            if options.server_pids:
                result.servers_cpu = _servers_cpu(options.server_pids) - servers
            return result

        if options.api_floor:
            floor = await one("API floor", _NoDaemon)
        if options.daemon:
            log = options.state / "kueued.log"
            ours = await one("kueued", lambda: Kueued(kueued_kubeconfig, log, options.kueued_args))
    finally:
        for c in clients:
            await c.aclose()
    return floor, ours


class _NoDaemon:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


# -- the report -----------------------------------------------------------------------------------

def usage_percent(result: Result, shape: Shape) -> float:
    nominal = sum(shape.nominal.values())
    return 100 * sum(result.area.values()) / (nominal * result.wall) if result.wall and nominal else 0.0


def waits(result: Result, shape: Shape) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for key, t in result.first_admit.items():
        out.setdefault(shape.klass[key], []).append(t - result.created.get(key, t))
    return {k: sum(v) / len(v) for k, v in out.items()}


def longest_pause(result: Result) -> float:
    """The longest stretch without an admission while workloads were created (a stalled pipeline)."""
    times = sorted(t for t in result.admit_times if t <= max(result.created.values(), default=0.0))
    return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def breakdown(counts: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:,.0f}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def report(config: str, scale: float, shape: Shape, schedule: Any, floor: Result | None, ours: Result,
           chain: tuple[float, Any] | None = None) -> Table:
    """kueued's run beside both floors, Kueue's figures and the lower bound; the targets below."""
    kueue = KUEUE.get(config, {}) if scale == 1 else {}
    t = Table(title=f"{config} x{scale:g} through kube-apiserver: {len(shape.cpu):,} Workloads, "
                    f"kueued as its own process (Kueue's figures at scale 1 only)",
              caption=f"kueued's engine: {engine()} (the daemon runs this install)")
    for col in ("metric", "kueued", "API floor", "schedule floor", "Kueue", "lower bound"):
        t.add_column(col, justify="right")
    blank = "-"
    sched_waits = {k: (v.average_time_to_admission_ms or 0) / 1000 for k, v in schedule.workload_classes.items()}
    sched_usage = schedule.cluster_queue_classes["cq"].cpu_usage_percent if schedule.cluster_queue_classes else 0.0

    def f(x: float | None, fmt: str = ".1f") -> str:
        return blank if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)

    t.add_row("wall (s)", f(ours.wall), f(floor.wall if floor else None), f(schedule.wall_ms / 1000),
              f(kueue.get("wall")), f(shape.bound))
    if chain is not None:
        t.add_row(f"chain floor (s): schedule floor, every link +{chain[0]:.3f} s", "", "",
                  f(chain[1].wall_ms / 1000), "", "")
    t.add_row("cq usage (%)", f(usage_percent(ours, shape)), f(usage_percent(floor, shape) if floor else None),
              f(sched_usage), f(kueue.get("usage")), "100")
    ow, fw = waits(ours, shape), waits(floor, shape) if floor else {}
    for cls in CLASSES:
        t.add_row(f"{cls} wait (s)", f(ow.get(cls), ".2f"), f(fw.get(cls), ".2f"), f(sched_waits.get(cls), ".2f"),
                  f(kueue.get(cls)), "")
    t.add_row("admitted / workloads", f"{len(ours.first_admit):,} / {len(shape.cpu):,}",
              f"{len(floor.first_admit):,}" if floor else blank, f"{len(shape.cpu) - schedule.pending:,}",
              "", "")
    t.add_row("evictions", f"{ours.evictions:,}", f(floor.evictions if floor else None, ","),
              f"{schedule.evictions:,}", "", "")
    def writes(r: Result | None) -> str:
        if r is None:
            return blank
        wl = sum(v for k, v in r.writes.items() if k.startswith("workloads"))
        return f"{sum(r.writes.values()):,.0f} ({wl:,.0f} Workload)"
    t.add_row("API writes", writes(ours), writes(floor), "", "", "")
    t.add_row("longest pause between admissions (s)", f(longest_pause(ours), ".2f"),
              f(longest_pause(floor) if floor else None, ".2f"), "", "", "")
    t.add_row("bench process cpu (s)", f(ours.bench_cpu), f(floor.bench_cpu if floor else None), "", "", "")
    t.add_row("apiserver+etcd cpu (s)", f(ours.servers_cpu), f(floor.servers_cpu if floor else None), "", "", "")
    t.add_row("load average before / after", f"{ours.load[0]} / {ours.load[1]}",
              f"{floor.load[0]} / {floor.load[1]}" if floor else blank, "", "", "")
    return t


def targets(schedule: Any, floor: Result | None, ours: Result, chain: tuple[float, Any] | None = None) -> Table:
    p = ours.process
    rows = [
        ("wall / max(API floor, schedule floor)", ours.wall / larger_floor(floor, schedule.wall_ms / 1000),
         TARGETS["wall"], "{:.2f}"),
        ("kueued cpu / wall", p.get("cpu_s", math.nan) / ours.wall, TARGETS["cpu"], "{:.0%}"),
        ("commit p99 (s)", p.get("p99", math.nan), TARGETS["p99"], "{:.3f}"),
    ]
    t = Table(title="targets")
    for col in ("ratio", "measured", "target", "holds"):
        t.add_column(col, justify="right")
    for name, value, target, fmt in rows:
        t.add_row(name, fmt.format(value), "<= " + fmt.format(target), "yes" if value <= target else "NO")
    if floor is not None and floor.writes and ours.writes:
        # The floor makes only the admission writes; kueued also writes pending reasons, queue status and
        # Events, as Kueue does.  Scaled by the API writes each made, the floor is what those writes cost.
        ratio = sum(ours.writes.values()) / sum(floor.writes.values())
        t.add_row(f"wall / (API floor x {ratio:.2f}, kueued's writes / the floor's)",
                  f"{ours.wall / (floor.wall * ratio):.2f}", "", "")
    if ours.servers_cpu is not None:
        # A hard bound, not an estimate: no run can use more CPU than the cores give it, so the
        # API server's, etcd's and the runner's CPU in kueued's run over the cores is a wall no
        # scheduler making the same writes could go under, however little CPU it used itself.
        cores = len(os.sched_getaffinity(0))
        served = (ours.servers_cpu + ours.bench_cpu) / cores
        t.add_row(f"API-side CPU floor (s): apiserver+etcd+runner cpu of kueued's run / {cores} cores",
                  f"{served:.1f}", "", "")
        t.add_row("  that floor / max(API floor, schedule floor)",
                  f"{served / larger_floor(floor, schedule.wall_ms / 1000):.2f}", "", "")
    if chain is not None:
        # not the target: an estimate of the API server's latency in every finish -> admit link
        t.add_row(f"wall / chain floor (link latency {chain[0]:.3f} s, the API floor's median)",
                  f"{ours.wall / (chain[1].wall_ms / 1000):.2f}", "", "")
    t.add_row("kueued cpu (s) / peak RSS (MiB)", f"{p.get('cpu_s', 0):.1f} / {p.get('rss_mib', 0):.0f}", "", "")
    t.add_row("commit median (s)", f"{p.get('p50', math.nan):.3f}", "", "")
    t.add_row("kueued start-up, launch to /readyz (s)", f"{p.get('ready_s', math.nan):.1f}", "", "")
    return t


def plot(path: Path, shape: Shape, runs: list[Result], schedule_run: Any) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    nominal = sum(shape.nominal.values())
    fig, (usage, pending) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for r, style in zip(runs, ("-", "--"), strict=False):
        ts = [s[0] for s in r.samples]
        usage.plot(ts, [100 * s[1] / nominal for s in r.samples], style, label=r.label)
        pending.plot(ts, [s[2] for s in r.samples], style, label=r.label)
    samples = schedule_run.timeline.samples
    usage.plot([t / 1e6 for t, _ in samples], [100 * sum(h.values()) / 1000 / nominal for _, h in samples], ":",
               label="schedule floor")
    usage.set_ylabel("reserved cpu (% of nominal)")
    pending.set_ylabel("pending workloads")
    pending.set_xlabel("seconds")
    usage.legend()
    pending.legend()
    fig.tight_layout()
    fig.savefig(path)


# -- the command ----------------------------------------------------------------------------------

def load_trace(config: str, scale: float, *, namespace: str, prefix: str) -> Trace:
    generator = load_generator(PERF / f"{config}-generator.yaml")
    return placed(build_trace(scaled(generator, scale)), namespace=namespace, prefix=prefix)


def schedule_floor(trace: Trace) -> Any:
    from actors.simulation import simulate_timed
    return simulate_timed(trace, per_workload=False)


def link_latency(floor: Result) -> float:
    """One scheduling link's latency through this API server, from the API floor's run: the median
    from a Workload's create to the runner seeing it admitted.  That is a write, a watch event to
    the admitter, its admission write and a watch event back: the same four steps as a Finished
    write reaching a scheduler and the admission it frees reaching the runner."""
    lat = [floor.first_admit[k] - floor.created[k] for k in floor.first_admit if k in floor.created]
    return statistics.median_high(lat) if lat else 0.0


def chain_floor(trace: Trace, latency: float) -> Any:
    """The schedule floor of a scheduler as fast as the API floor's admitter, whose every decision
    reaches the runner, and every finish reaches it back, through this API server: the quota of
    each admission is held ``latency`` longer than its run time (decided, seen by the runner, run,
    finished, seen by the scheduler).  Neither floor above holds that latency: the API floor's
    admitter waits for no finish, the schedule floor's links take no time."""
    extra = round(latency * 1e6)
    slower = msgspec.structs.replace(trace, arrivals=[
        a if a.runtime is None else msgspec.structs.replace(a, runtime=a.runtime + extra) for a in trace.arrivals])
    return schedule_floor(slower)


def larger_floor(floor: Result | None, schedule_s: float) -> float:
    """The larger of a pair's API floor (when it ran) and the schedule floor, in seconds."""
    return max(schedule_s, floor.wall) if floor is not None else schedule_s


def median_pair(pairs: list[tuple[Result | None, Result]], schedule_s: float) -> int:
    """The index of the (floor, kueued) pair whose wall / max(floors) is the median of all pairs'
    (the higher middle one of an even count): the pair the report shows with ``--repeat``."""
    ratios = [ours.wall / larger_floor(floor, schedule_s) for floor, ours in pairs]
    ranked = sorted(range(len(pairs)), key=lambda i: ratios[i])
    return ranked[len(ranked) // 2]


def main() -> int:
    from kueued.gc_tuning import tune
    from kueued.logging import configure
    configure(level="WARNING")
    tune()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=list(KUEUE), default="baseline")
    ap.add_argument("--scale", type=float, default=1.0, help="workloads per set times F (the tree is kept)")
    ap.add_argument("--plot", type=Path, metavar="FILE.png", help="usage and pending over time (the plot extra)")
    ap.add_argument("--no-api-floor", dest="api_floor", action="store_false", help="skip the API floor's run")
    ap.add_argument("--creators", type=int, default=16, help="concurrent create calls")
    ap.add_argument("--finishers", type=int, default=16, help="concurrent Finished writes")
    ap.add_argument("--kueued-arg", action="append", default=[], metavar="ARG", help="an extra `kueued run` flag")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="N pairs (floor, then kueued), back to back: the report shows the pair with the median "
                         "ratio, and every pair's ratio is listed (the machine's speed moves between runs)")
    args = ap.parse_args()
    if args.plot is not None:
        import matplotlib  # noqa: F401  (fail now, not after the run: pip install 'kueued[plot]')
    console = Console(width=150)
    trace = load_trace(args.config, args.scale, namespace="perf", prefix="")
    shape = shape_of(trace)
    began = time.monotonic()
    schedule = schedule_floor(trace)
    console.print(f"schedule floor: {schedule.summary.wall_ms / 1000:.1f} s of virtual time "
                  f"({time.monotonic() - began:.1f} s to compute); lower bound {shape.bound:.1f} s")
    from kueued.devcluster.controlplane import ControlPlane
    from kueued.devcluster.versions import binaries
    from kueued.kube.manifests import render
    state = Path(tempfile.mkdtemp(prefix="kueued-perf-api-"))
    ok = False
    floor = ours = None
    pairs: list[tuple[Result | None, Result]] = []
    try:
        # Each run on a control plane of its own: on a shared one the second run began with the
        # first's 15,000 deletions still in etcd and the API server (load average 3.5 at its start).
        for which, n in [(w, n) for n in range(max(1, args.repeat))
                         for w in (["floor"] if args.api_floor else []) + ["kueued"]]:
            with ControlPlane(state_dir=state / f"control-plane-{which}-{n}", apiserver_args=INFLIGHT) as cp:
                def kubectl(*argv: str, stdin: str | None = None) -> None:
                    subprocess.run([str(binaries().kubectl), f"--kubeconfig={cp.kubeconfig}", *argv],
                                   input=stdin, text=True, check=True, capture_output=True)
                kubectl("apply", "--server-side", "-f", "-", stdin=render(user="kueued"))
                kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
                options = Options(api_floor=which == "floor", daemon=which == "kueued", creators=args.creators,
                                  finishers=args.finishers, kueued_args=args.kueued_arg, server_pids=cp.pids,
                                  state=state)
                with Progress(console=console, transient=True, disable=len(trace.arrivals) < 2000) as progress:
                    result = anyio.run(partial(measure, trace, admin=cp.kubeconfig,
                                               kueued_kubeconfig=cp.user_kubeconfig("kueued"),
                                               options=options, progress=progress))
                floor, ours = (result[0], ours) if which == "floor" else (floor, result[1])
            if which == "kueued":
                assert ours is not None
                pairs.append((floor, ours))
        floor, ours = pairs[median_pair(pairs, schedule.summary.wall_ms / 1000)]
        ok = True
    finally:
        if ok:
            shutil.rmtree(state, ignore_errors=True)
        else:
            console.print(f"kept for a look: {state} (kueued.log, control-plane/logs/)")
    chain = None
    if floor is not None:
        latency = link_latency(floor)
        chain = (latency, chain_floor(trace, latency).summary)
    console.print(report(args.config, args.scale, shape, schedule.summary, floor, ours, chain))
    console.print(targets(schedule.summary, floor, ours, chain))
    for r in (ours, floor):
        if r is not None:
            console.print(f"API writes, {r.label}: {breakdown(r.writes)}")
            console.print(f"API reads, {r.label}: {breakdown(r.reads)}")
    if len(pairs) > 1:
        floors = [larger_floor(f, schedule.summary.wall_ms / 1000) for f, _ in pairs]
        listed = ", ".join(f"{o.wall:.1f} / {b:.1f} s = {o.wall / b:.2f}x"
                           for (_, o), b in zip(pairs, floors, strict=True))
        console.print(f"{len(pairs)} pairs, in the order run (kueued / the larger floor): {listed}; "
                      f"the tables show the median pair")
    if args.plot is not None:
        plot(args.plot, shape, [r for r in (ours, floor) if r is not None], schedule)
        console.print(f"plot: {args.plot}")
    return 0 if all(len(o.first_admit) == len(trace.arrivals) for _, o in pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
