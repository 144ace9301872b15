"""Leader election on a real API server: two electors in this process, each with its own client,
authenticated as user ``kueued`` and bound only to the RBAC ``kueued manifests`` prints.

Durations are short (lease 3 s, renew deadline 2 s, retry 0.5 s, no jitter) so a takeover
takes seconds; every wait is on an elector's event, times come from the monotonic clock
both electors share, and each test competes for a Lease of its own name.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus

from kueued.kube.client import KubeClient
from kueued.kube.commits import KubePort
from kueued.kube.connect import connect
from kueued.kube.fencing import FencedPort
from kueued.kube.lease import LeaderElector
from kueued.kube.lease_record import KubeLeases
from tests.builders import namespace, workload
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.control_plane

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
FAST: dict[str, Any] = {"lease_duration": LEASE, "renew_deadline": RENEW, "retry_period": RETRY,
                        "safety_margin": 1.0, "jitter": 0.0}
ROUND_TRIPS = 0.5
"""A read and a write to a local API server on a busy two-core machine: well under this."""


@asynccontextmanager
async def clients(cluster: Cluster) -> AsyncIterator[tuple[KubeClient, KubeClient]]:
    kubeconfig = cluster.user_kubeconfig("kueued")
    async with await connect(kubeconfig) as a, await connect(kubeconfig) as b:
        yield a, b


class Gated(KubeLeases):
    """The Lease calls of one elector, which a test can make hang (a partition, a stalled process)."""

    def __init__(self, kube: KubeClient) -> None:
        super().__init__(kube)
        self.blocked = False
        self.renewals = 0
        self.renewed = anyio.Event()

    async def get(self, kind: Any, namespace: str | None, name: str) -> dict[str, Any]:
        if self.blocked:
            await anyio.sleep_forever()
        return await super().get(kind, namespace, name)

    async def replace(self, kind: Any, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.blocked:
            await anyio.sleep_forever()
        written = await super().replace(kind, namespace, name, body)
        self.renewals += 1
        if self.renewals >= 2:
            self.renewed.set()
        return written


class Killable:
    """An elector's loop in a cancel scope of its own: cancelling it is the process dying (no release)."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector
        self.scope = anyio.CancelScope()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with self.scope:
            await self.elector.run(task_status=task_status)


def _name() -> str:
    return f"lease-{uuid.uuid4().hex[:8]}"


def _lease(cluster: Cluster, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = cluster.kubectl_json("get", "lease", "-n", "kueued-system", name)["spec"]
    return spec


def _took_over(elector: LeaderElector, other: LeaderElector) -> tuple[anyio.Event, dict[str, Any]]:
    """When ``elector`` becomes leader: the time, and whether ``other`` would still have committed then."""
    done, seen = anyio.Event(), dict[str, Any]()

    def changed(leading: bool) -> None:
        if leading and not done.is_set():
            seen.update(at=time.monotonic(), other_fence=other.fence(), other_leader=other.is_leader())
            done.set()
    elector.on_change(changed)
    return done, seen


async def test_one_leads_and_a_dead_leader_is_replaced_within_a_lease_duration(installed: Cluster) -> None:
    name = _name()
    async with clients(installed) as (ka, kb):
        leases_a = Gated(ka)
        a = LeaderElector(leases_a, name=name, identity="a", **FAST)
        b = LeaderElector(KubeLeases(kb), name=name, identity="b", **FAST)
        took_over, seen = _took_over(b, a)
        killable = Killable(a)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                await tg.start(killable.run)
                await tg.start(b.run)
                assert a.is_leader() and not b.is_leader()  # exactly one
                assert b.holder == "a"
                await leases_a.renewed.wait()  # a renews, b watches it do so
                assert a.is_leader() and not b.is_leader()
                killed = time.monotonic()
                killable.scope.cancel()  # dies without releasing
                await took_over.wait()
                tg.cancel_scope.cancel()
    last_renewal = a.last_renewal
    assert last_renewal is not None
    # b waited a full lease duration after a's last renewal was sent, however late it saw it ...
    assert seen["at"] - last_renewal >= LEASE
    # ... and no longer than a lease and a poll after the death (plus two round trips)
    assert seen["at"] - killed <= LEASE + RETRY + ROUND_TRIPS
    spec = _lease(installed, name)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


async def test_a_released_lease_is_taken_over_at_once(installed: Cluster) -> None:
    name = _name()
    async with clients(installed) as (ka, kb):
        a = LeaderElector(KubeLeases(ka), name=name, identity="a", **FAST)
        b = LeaderElector(KubeLeases(kb), name=name, identity="b", **FAST)
        took_over, seen = _took_over(b, a)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                await tg.start(a.run)
                await tg.start(b.run)
                released = time.monotonic()
                assert await a.release() is True
                await took_over.wait()
                tg.cancel_scope.cancel()
    assert seen["at"] - released <= 2 * RETRY
    assert seen["other_fence"] is False
    spec = _lease(installed, name)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


async def test_a_leader_that_cannot_renew_is_fenced_before_anyone_else_can_lead(installed: Cluster) -> None:
    name = _name()
    async with clients(installed) as (ka, kb):
        leases_a = Gated(ka)
        a = LeaderElector(leases_a, name=name, identity="a", **FAST)
        b = LeaderElector(KubeLeases(kb), name=name, identity="b", **FAST)
        took_over, seen = _took_over(b, a)
        order: list[str] = []
        a.on_change(lambda leading: order.append(f"a {'leads' if leading else 'steps down'}"))
        b.on_change(lambda leading: order.append(f"b {'leads' if leading else 'steps down'}"))
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                await tg.start(a.run)
                await tg.start(b.run)
                await leases_a.renewed.wait()
                leases_a.blocked = True  # a is alive and thinks it leads; its renewals never arrive
                await took_over.wait()
                tg.cancel_scope.cancel()
    assert seen["other_fence"] is False and seen["other_leader"] is False
    assert order[:3] == ["a leads", "a steps down", "b leads"]
    last_renewal = a.last_renewal
    assert last_renewal is not None
    # a's fence had closed (renewal + valid_for) a safety margin before b could take over
    assert last_renewal + a.valid_for + 1.0 <= seen["at"]


async def test_a_follower_s_fenced_port_writes_nothing_and_writes_once_it_leads(installed: Cluster) -> None:
    ns, name = f"lease-{uuid.uuid4().hex[:6]}", _name()
    manifest = workload("w", ns, "lq", cpu="1")
    del manifest["metadata"]["creationTimestamp"]
    installed.kubectl_run("create", "-f", "-", stdin=_yaml(namespace(ns), manifest))
    before = installed.kubectl_json("get", "workload", "-n", ns, "w")

    async with clients(installed) as (ka, kb):
        a = LeaderElector(KubeLeases(ka), name=name, identity="a", **FAST)
        b = LeaderElector(KubeLeases(kb), name=name, identity="b", **FAST)
        seen = {f"{ns}/w": before}
        inner = KubePort(kb, manifest_of=seen.get, requests_of=lambda key: [("main", 1, {"cpu": 1000})])
        port = FencedPort(inner, b, hold=0)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                await tg.start(a.run)
                await tg.start(b.run)
                assert not b.fence()
                assert await port.admit(f"{ns}/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}},
                                        usage={("default", "cpu"): 1000}) is False
                after = installed.kubectl_json("get", "workload", "-n", ns, "w")
                assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
                assert "admission" not in after.get("status", {}) and not after.get("status", {}).get("conditions")
                assert port.refusals == {"admit": 1} and inner.refused == 0  # never sent

                await a.release()
                await b.wait_leading()
                assert await port.admit(f"{ns}/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}},
                                        usage={("default", "cpu"): 1000}) is True
                tg.cancel_scope.cancel()
    admitted = installed.kubectl_json("get", "workload", "-n", ns, "w")
    assert admitted["status"]["admission"]["clusterQueue"] == "cq"


def _yaml(*docs: dict[str, Any]) -> str:
    import yaml
    return yaml.safe_dump_all(docs)
