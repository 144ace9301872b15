"""ClusterSource against a real kube-apiserver: the initial sync, live events, idle streams,
cut connections and an etcd compaction.

Names carry a random suffix and assertions look only at this test's objects, so the tests
share the session's control plane with the others.  The compaction test gets a control
plane of its own with the watch cache off (``--watch-cache=false``): with the cache on,
the apiserver answers a resumed watch from memory and never notices what etcd compacted.
Nothing sleeps to wait: each wait is for an event, a counter or a log line, bounded.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from kueued.kube.backoff import Backoff
from kueued.kube.client import Kind, KubeClient
from kueued.kube.connect import connect
from kueued.kube.watch import ClusterSource
from kueued.kube.watch_state import Change, WatchEvents
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
from tests.integration.conftest import Cluster
from tests.integration.kube_crds import install_crds

WAIT_S = 30.0
CONFIG_MAP = Kind("ConfigMap", "", "v1", "configmaps", True)  # not watched
ORDER = ["Namespace", "Node", "ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ElasticQuota", "ClusterQueue",
         "LocalQueue", "Workload"]


@pytest.fixture(scope="module")
def cluster(control_plane: Cluster) -> Cluster:
    install_crds(control_plane)
    return control_plane


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}


def _elastic_quota(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": ns}, "spec": {"min": {"cpu": "1"}, "max": {"cpu": "2"}}}


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def _wl(name: str, ns: str) -> dict[str, Any]:
    manifest = workload(name, ns, "lq", cpu="1")
    del manifest["metadata"]["creationTimestamp"]  # the server's to set
    return manifest


@asynccontextmanager
async def following(client: Any, **options: Any) -> AsyncIterator[ClusterSource]:
    """A running source, synced; cancelled on the way out."""
    options.setdefault("backoff", Backoff(base=0.05, cap=0.5))
    source = ClusterSource(client, **options)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(WAIT_S):
            await tg.start(source.run)
        yield source
        tg.cancel_scope.cancel()


async def collect(source: ClusterSource, enough: Callable[[list[Change]], bool], *,
                  keep: Callable[[Change], bool] = lambda _: True) -> list[Change]:
    """The changes ``keep`` selects, gathered until ``enough`` of them have come."""
    out: list[Change] = []
    with anyio.fail_after(WAIT_S):
        while not enough(out):
            out += [c for c in await source.next_batch() if keep(c)]
    return out


async def quiet_until(source: ClusterSource, done: Callable[[], bool]) -> list[Change]:
    """Everything that arrives until ``done()`` holds (checked between short waits for changes)."""
    out: list[Change] = []
    with anyio.fail_after(WAIT_S):
        while not done():
            with anyio.move_on_after(0.2):
                out += await source.next_batch()
    return out


def _named(suffix: str) -> Callable[[Change], bool]:
    return lambda change: suffix in change[1]["metadata"]["name"]


def _summary(changes: list[Change]) -> list[tuple[str, str, str]]:
    return [(verb, m["kind"], m["metadata"]["name"]) for verb, m in changes]


async def test_objects_made_before_start_arrive_in_the_initial_sync_in_dependency_order(cluster: Cluster) -> None:
    s = _suffix()
    ns = f"watch-a-{s}"
    async with await connect(cluster.kubeconfig) as kube:
        await kube.create("Namespace", namespace(ns))
        # Made in the reverse of the order they must be applied in.
        made = [await kube.create(kind, manifest) for kind, manifest in [
            ("Workload", _wl(f"wl-{s}", ns)),
            ("LocalQueue", local_queue(f"lq-{s}", ns, f"cq-{s}")),
            ("ClusterQueue", cluster_queue(f"cq-{s}", quotas(f"rf-{s}", cpu="4"), cohort=f"co-{s}")),
            ("ElasticQuota", _elastic_quota(f"eq-{s}", ns)),
            ("Cohort", cohort(f"co-{s}")),
            ("WorkloadPriorityClass", _priority_class(f"pc-{s}", 100)),
            ("ResourceFlavor", flavor(f"rf-{s}")),
            ("Node", _node(f"node-{s}")),
        ]]
        async with following(kube) as source:
            initial = await source.initial_sync()
    ours = [(verb, m) for verb, m in initial if s in m["metadata"]["name"]]
    assert [m["kind"] for _, m in ours] == ORDER
    assert {verb for verb, _ in ours} == {"apply"}
    by_kind = {m["kind"]: m for _, m in ours}
    for server in made:
        seen = by_kind[server["kind"]]
        assert seen["apiVersion"] == server["apiVersion"]
        assert seen["metadata"]["resourceVersion"] == server["metadata"]["resourceVersion"]
        assert "managedFields" not in seen["metadata"]
    assert by_kind["ClusterQueue"]["spec"]["cohortName"] == f"co-{s}"
    assert by_kind["Workload"]["metadata"]["namespace"] == ns
    assert len(initial) == len({(m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"])
                                for _, m in initial})  # each object once


async def test_create_update_delete_after_start_arrive_as_apply_apply_delete(cluster: Cluster) -> None:
    s = _suffix()
    ns = f"watch-b-{s}"
    async with await connect(cluster.kubeconfig) as kube:
        await kube.create("Namespace", namespace(ns))
        async with following(kube, kinds=("ResourceFlavor", "Workload")) as source:
            await source.initial_sync()
            created = await kube.create("ResourceFlavor", flavor(f"rf-{s}"))
            labelled = await kube.patch("ResourceFlavor", None, f"rf-{s}", {"metadata": {"labels": {"tier": "gold"}}})
            await kube.delete("ResourceFlavor", None, f"rf-{s}")
            wl = await kube.create("Workload", _wl(f"wl-{s}", ns))
            changes = await collect(source, lambda out: len(out) == 4, keep=_named(s))
            assert source.resource_version(f"Workload/{ns}/wl-{s}") == wl["metadata"]["resourceVersion"]
            assert source.resource_version(f"ResourceFlavor/rf-{s}") is None
            # A status write (what kueued's own admissions are) comes back as an apply too: its echo.
            written = await kube.patch_status("Workload", ns, f"wl-{s}", {"status": {"conditions": [{
                "type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "waiting",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, resource_version=wl["metadata"]["resourceVersion"])
            echo = await collect(source, lambda out: len(out) == 1, keep=_named(s))
    assert _summary(changes) == [("apply", "ResourceFlavor", f"rf-{s}"), ("apply", "ResourceFlavor", f"rf-{s}"),
                                 ("delete", "ResourceFlavor", f"rf-{s}"), ("apply", "Workload", f"wl-{s}")]
    assert changes[0][1]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert changes[1][1]["metadata"]["labels"] == {"tier": "gold"}
    assert changes[1][1]["metadata"]["resourceVersion"] == labelled["metadata"]["resourceVersion"]
    assert _summary(echo) == [("apply", "Workload", f"wl-{s}")]
    assert echo[0][1]["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert echo[0][1]["status"]["conditions"][0]["reason"] == "Pending"


async def _advance_the_revision(kube: KubeClient) -> None:
    """Move etcd's revision on without touching a watched kind, and have the watch cache notice.

    An idle apiserver sends a bookmark only when its watch cache's resourceVersion has moved
    past the watcher's; a write elsewhere plus a consistent list makes it move.
    """
    await kube.create(CONFIG_MAP, {"metadata": {"generateName": "watch-c-", "namespace": "default"}})
    await kube.list("ResourceFlavor")
    await kube.list("Namespace")


async def test_bookmarks_and_idle_streams_make_no_events(cluster: Cluster) -> None:
    s = _suffix()
    async with await connect(cluster.kubeconfig) as kube:
        await kube.create("ResourceFlavor", flavor(f"rf-{s}"))
        # Streams the server ends after 3 to 4.5 s, idle: each resumes at once, no failure.
        async with following(kube, kinds=("ResourceFlavor", "Namespace"), watch_timeout=3) as source:
            initial = await source.initial_sync()
            rv = source.resource_version(f"ResourceFlavor/rf-{s}")
            await _advance_the_revision(kube)
            spurious = await quiet_until(source, lambda: source.watches["ResourceFlavor"] >= 3
                                         and source.bookmarks["ResourceFlavor"] >= 1
                                         and source.bookmarks["Namespace"] >= 1)
            assert source.resource_version(f"ResourceFlavor/rf-{s}") == rv
            restarts = dict(source.restarts)
    assert (f"rf-{s}") in {m["metadata"]["name"] for _, m in initial}
    assert spurious == []
    assert restarts == {"ResourceFlavor": 0, "Namespace": 0}  # a stream the server ends is no failure


async def test_a_cut_connection_resumes_without_losing_or_repeating_events(cluster: Cluster) -> None:
    s = _suffix()
    ns = f"watch-d-{s}"
    async with await connect(cluster.kubeconfig) as kube:
        await kube.create("Namespace", namespace(ns))
        async with following(kube, kinds=("Workload",)) as source:
            await source.initial_sync()
            _, before = await kube.list("Workload", ns)
            await kube.create("Workload", _wl(f"wl1-{s}", ns))
            first = await collect(source, lambda out: len(out) == 1, keep=_named(s))

            source.interrupt("Workload")  # cut mid-run; a change made right away is not lost
            await kube.create("Workload", _wl(f"wl2-{s}", ns))
            second = await collect(source, lambda out: len(out) == 1, keep=_named(s))

            # Resuming from an older version makes the server send wl1 and wl2 again: dropped.
            source.interrupt("Workload", resume_from=before)
            await kube.create("Workload", _wl(f"wl3-{s}", ns))
            third = await collect(source, lambda out: len(out) == 1, keep=_named(s))
            await kube.delete("Workload", ns, f"wl1-{s}")
            fourth = await collect(source, lambda out: len(out) == 1, keep=_named(s))
            counts = (source.restarts["Workload"], source.replays["Workload"], source.relists["Workload"])
    assert _summary(first + second + third + fourth) == [
        ("apply", "Workload", f"wl1-{s}"), ("apply", "Workload", f"wl2-{s}"), ("apply", "Workload", f"wl3-{s}"),
        ("delete", "Workload", f"wl1-{s}")]
    restarts, replays, relists = counts
    assert restarts >= 2 and replays >= 2 and relists == 0


class Gate:
    """A client whose requests wait while the gate is shut: a network partition, on cue."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._open = anyio.Event()
        self._open.set()
        self.waiting = anyio.Event()

    def shut(self) -> None:
        self._open = anyio.Event()
        self.waiting = anyio.Event()

    def open(self) -> None:
        self._open.set()

    async def _pass(self) -> None:
        if not self._open.is_set():
            self.waiting.set()
            await self._open.wait()

    async def list(self, kind: Any, namespace: str | None = None, *,
                   page_size: int = 500) -> tuple[list[dict[str, Any]], str]:
        await self._pass()
        return await self.kube.list(kind, namespace, page_size=page_size)

    @asynccontextmanager
    async def watch(self, kind: Any, resource_version: str, **options: Any) -> AsyncIterator[WatchEvents]:
        await self._pass()
        async with self.kube.watch(kind, resource_version, **options) as stream:
            yield stream


@pytest.fixture(scope="module")
def compacting(cp_binaries: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane of our own without the watch cache, so a resumed watch reads etcd's history."""
    if cp_binaries is None:
        pytest.skip("an external cluster: no local binaries for a second control plane")
    from kueued.devcluster.controlplane import ControlPlane

    with ControlPlane(binaries=cp_binaries, apiserver_args=["--watch-cache=false"]) as cp:
        cluster = Cluster(kubeconfig=cp.kubeconfig, kubectl=cp_binaries.kubectl, server=cp.server,
                          admin_cert=cp.admin.cert, admin_key=cp.admin.key,
                          cache_dir=tmp_path_factory.mktemp("kubectl-cache-compacting"), control_plane=cp)
        install_crds(cluster)
        yield cluster


def _compact(etcd_url: str, revision: int) -> None:
    """Compact etcd's history below ``revision`` (its JSON gateway: no client, no TLS on this port)."""
    body = json.dumps({"revision": revision, "physical": True}).encode()
    request = urllib.request.Request(f"{etcd_url}/v3/kv/compaction", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


async def test_a_compacted_resource_version_relists_and_reports_exactly_the_gap(compacting: Cluster) -> None:
    s = _suffix()
    async with await connect(compacting.kubeconfig) as kube:
        for name in ("kept", "changed", "gone"):
            await kube.create("ResourceFlavor", flavor(f"{name}-{s}"))
        gate = Gate(kube)
        with capture_logs() as logs:
            async with following(gate, kinds=("ResourceFlavor",)) as source:
                initial = await source.initial_sync()
                gate.shut()
                source.interrupt("ResourceFlavor")
                with anyio.fail_after(WAIT_S):
                    await gate.waiting.wait()  # disconnected: what happens now, the source misses
                await kube.patch("ResourceFlavor", None, f"changed-{s}", {"metadata": {"labels": {"v": "2"}}})
                await kube.delete("ResourceFlavor", None, f"gone-{s}")
                latest = await kube.create("ResourceFlavor", flavor(f"new-{s}"))
                await anyio.to_thread.run_sync(_compact, compacting.control_plane.etcd_url,
                                               int(latest["metadata"]["resourceVersion"]))
                gate.open()
                gap = await collect(source, lambda out: len(out) == 3)
                later = await quiet_until(source, lambda: source.watches["ResourceFlavor"] >= 3)
                relists = source.relists["ResourceFlavor"]
    rf = "ResourceFlavor"
    assert sorted(_summary(initial)) == sorted(("apply", rf, f"{n}-{s}") for n in ("kept", "changed", "gone"))
    assert sorted(_summary(gap)) == [("apply", rf, f"changed-{s}"), ("apply", rf, f"new-{s}"),
                                     ("delete", rf, f"gone-{s}")]
    assert next(m for _, m in gap if m["metadata"]["name"] == f"changed-{s}")["metadata"]["labels"] == {"v": "2"}
    assert later == []
    assert relists == 1
    assert any(e["event"] == "watch_restarted" and e["reason"] == "gone" for e in logs)
    relisted = [e for e in logs if e["event"] == "watch_relisted"]
    assert [(e["kind"], e["reason"], e["applies"], e["deletes"]) for e in relisted] == [(rf, "gone", 2, 1)]
