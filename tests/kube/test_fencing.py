"""Fenced writes: a follower's port and client refuse every write and keep the bookkeeping."""

from __future__ import annotations

import math
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from structlog.testing import capture_logs

from kueued.kube.errors import ApiError
from kueued.kube.fencing import FencedClient, FencedPort, FencedStatus, NotLeader, run_while_leading
from kueued.kube.port import Condition, InMemoryPort


class Fence:
    """The elector as the writers see it: how long the fence stays open, and waits on leadership."""

    def __init__(self, remaining: float = 0.0) -> None:
        self.open_for = remaining
        self.leader = remaining > 0
        self.changed = anyio.Event()

    def remaining(self) -> float:
        return self.open_for

    async def wait_leading(self, leading: bool = True) -> None:
        while self.leader != leading:
            await self.changed.wait()

    def lead(self, leading: bool = True) -> None:
        self.leader, self.open_for = leading, 10.0 if leading else 0.0
        self.changed.set()
        self.changed = anyio.Event()


class EvictingPort(InMemoryPort):
    def __init__(self) -> None:
        super().__init__()
        self.resumed: list[str] = []

    def resume_eviction(self, workload: str, message: str) -> None:
        self.resumed.append(workload)


class HangingPort(InMemoryPort):
    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int]) -> bool:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def _admit(port: FencedPort, workload: str = "ns/w") -> bool:
    return await port.admit(workload, cluster_queue="cq", flavors={"main": {"cpu": "f"}}, usage={("f", "cpu"): 1000})


async def test_a_follower_writes_nothing_and_counts_each_refusal() -> None:
    inner = EvictingPort()
    port = FencedPort(inner, Fence(), hold=0)
    port.pending("ns/w", "waits for quota")
    with capture_logs() as logs:
        assert await _admit(port) is False
        assert await port.evict("ns/v", cluster_queue="cq", reason="InClusterQueue", message="m") is False
        assert await port.annotate_quota("q", namespace="ns", annotations={"a": "1"}) is False
        assert await port.set_quota_condition("q", namespace="ns",
                                              condition=Condition("Accepted", "False", "Invalid")) is False
        assert await port.flush_pending() == 0
        assert await port.finish_evictions() == []
    assert not inner.log and not inner.quota_status and not inner.counts
    assert port.refusals == {"admit": 1, "evict": 1, "annotate_quota": 1, "set_quota_condition": 1,
                             "flush_pending": 1, "finish_evictions": 1}
    assert [e["event"] for e in logs] == ["commits_fenced"]  # once, not per refusal
    # bookkeeping goes through, for the day this process leads
    assert inner.pending_reasons == {"ns/w": "waits for quota"}
    port.resume_eviction("ns/v", "Preempted")
    assert inner.resumed == ["ns/v"]
    port.forget("ns/w")
    assert inner.pending_reasons == {}


async def test_the_leader_s_writes_go_through_and_its_counts_are_the_port_s() -> None:
    inner = InMemoryPort()
    port = FencedPort(inner, Fence(10.0))
    assert await _admit(port) is True
    assert await port.evict("ns/v", cluster_queue="cq", reason="InClusterQueue", message="m") is True
    assert [c.kind for c in port.log] == ["admit", "evict"]
    assert port.counts is inner.counts and sum(port.counts.values()) == 3  # admit, evict, evict_once (its first)
    assert not port.refusals


async def test_a_refusal_is_held_until_the_hold_runs_out() -> None:
    port = FencedPort(InMemoryPort(), Fence(), hold=0.05)
    with anyio.fail_after(5):
        assert await _admit(port) is False


async def test_a_held_refusal_answers_as_soon_as_this_process_leads() -> None:
    fence = Fence()
    port = FencedPort(InMemoryPort(), fence, hold=3600)
    answers: list[bool] = []

    async def admit() -> None:
        answers.append(await _admit(port))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(admit)
            await anyio.wait_all_tasks_blocked()
            fence.lead()
    assert answers == [False]  # decided as a follower: decided again, now as the leader
    assert await _admit(port) is True


async def test_a_decision_in_flight_when_the_fence_closes_is_cut_off() -> None:
    port = FencedPort(HangingPort(), Fence(0.05))
    with capture_logs() as logs, anyio.fail_after(5):
        assert await _admit(port) is False
    assert port.refusals == {"admit:cut": 1}
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["commit_cut_off"]


async def test_commits_allowed_and_fenced_are_logged_once_per_change() -> None:
    fence = Fence(10.0)
    port = FencedPort(InMemoryPort(), fence, hold=0)
    with capture_logs() as logs:
        await _admit(port, "ns/a")
        await _admit(port, "ns/b")
        fence.open_for = 0.0
        await _admit(port, "ns/c")
        await _admit(port, "ns/d")
        fence.open_for = 10.0
        await _admit(port, "ns/e")
    assert [e["event"] for e in logs] == ["commits_allowed", "commits_fenced", "commits_allowed"]
    assert logs[-1]["refused"] == 2


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def _call(self, what: str) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        self.calls.append(what)
        return {}

    async def get(self, *args: Any) -> dict[str, Any]:
        return await self._call("get")

    async def list(self, *args: Any) -> tuple[list[dict[str, Any]], str]:
        await self._call("list")
        return [], "1"

    async def create(self, *args: Any) -> dict[str, Any]:
        return await self._call("create")

    async def delete(self, *args: Any) -> dict[str, Any]:
        return await self._call("delete")

    async def patch(self, *args: Any) -> dict[str, Any]:
        return await self._call("patch")

    async def patch_status(self, *args: Any, **options: Any) -> dict[str, Any]:
        return await self._call("patch_status")

    async def replace_status(self, *args: Any) -> dict[str, Any]:
        return await self._call("replace_status")

    async def create_event(self, regarding: dict[str, Any], **options: Any) -> dict[str, Any]:
        return await self._call("create_event")


WRITES = {
    "create": ("Workload", {"metadata": {}}),
    "delete": ("Workload", "ns", "w"),
    "patch": ("ElasticQuota", "ns", "q", {}),
    "patch_status": ("ClusterQueue", None, "cq", {"status": {}}),
    "replace_status": ("ClusterQueue", None, "cq", {"status": {}}),
    "create_event": ({"kind": "Workload"},),
}


@pytest.mark.parametrize("write", list(WRITES))
async def test_a_fenced_client_refuses_writes_as_an_api_error_the_writers_already_handle(write: str) -> None:
    inner, fence = FakeClient(), Fence()
    client = FencedClient(inner, fence)
    with pytest.raises(NotLeader) as refused:
        await getattr(client, write)(*WRITES[write])
    assert isinstance(refused.value, ApiError) and refused.value.reason == "NotLeader"
    assert inner.calls == [] and client.refusals == {write: 1}
    fence.lead()
    await getattr(client, write)(*WRITES[write])
    assert inner.calls == [write]


async def test_a_fenced_client_reads_whoever_leads() -> None:
    inner = FakeClient()
    client = FencedClient(inner, Fence())
    await client.get("Workload", "ns", "w")
    assert await client.list("Workload") == ([], "1")
    assert inner.calls == ["get", "list"] and not client.refusals


async def test_a_leader_only_task_runs_fresh_in_each_term_and_stops_when_the_term_ends() -> None:
    fence = Fence()
    terms: list[str] = []
    running = anyio.Event()

    async def controller() -> None:
        nonlocal running
        terms.append("started")
        running.set()
        try:
            await anyio.sleep_forever()
        finally:
            terms.append("stopped")
            running = anyio.Event()

    with capture_logs() as logs, anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_while_leading, fence, controller)
            await anyio.wait_all_tasks_blocked()
            assert terms == []  # a follower runs none
            fence.lead()
            await running.wait()
            fence.lead(False)
            await fence.wait_leading(False)
            await anyio.wait_all_tasks_blocked()
            assert terms == ["started", "stopped"]
            fence.lead()
            await running.wait()
            tg.cancel_scope.cancel()
    assert terms == ["started", "stopped", "started", "stopped"]
    assert [e["event"] for e in logs] == ["leader_task_started", "leader_task_stopped", "leader_task_started"]


class Publisher:
    def __init__(self) -> None:
        self.recorder = None
        self.calls: list[str] = []

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    async def publish(self, coord: Any) -> int:
        self.calls.append("publish")
        return 3

    def put_off(self) -> float:
        return 0.5  # statuses put off by their pace: due in half a second

    def validated(self, manifest: Any, reason: str | None) -> bool:
        self.calls.append(f"validated {reason}")
        return True

    def forget(self, key: str) -> None:
        self.calls.append(f"forget {key}")


async def test_a_follower_s_status_publisher_does_not_even_try_but_keeps_its_bookkeeping() -> None:
    inner, fence = Publisher(), Fence()
    status = FencedStatus(inner, fence)
    assert await status.publish(object()) == 0 and status.skipped == 1
    assert status.put_off() == math.inf  # nothing to wake a follower for
    assert status.validated({"kind": "ClusterQueue"}, "spec.cohort: invalid") is True
    status.forget("ClusterQueue/cq")
    assert inner.calls == ["validated spec.cohort: invalid", "forget ClusterQueue/cq"]
    fence.lead()
    assert await status.publish(object()) == 3 and status.recorder is None
    assert status.put_off() == 0.5


def test_a_follower_s_refused_admission_reads_as_following_not_as_the_api_server_s() -> None:
    from actors.harness import LiveEngine
    from tests.actors.test_drains import _world
    from tests.builders import workload

    for leading, reason in ((False, "this process follows: the leader admits it"),
                            (True, "the API server refused the admission; retrying")):
        port = FencedPort(InMemoryPort(refuse=lambda key: True), Fence(10.0 if leading else 0.0), hold=0.0)
        with LiveEngine(_world(), port=port) as engine:
            engine.apply(workload("w", "ns", "lq", cpu="1"))
            engine._call(engine.coordinator.run_to_quiescence, max_rounds=1)
            assert engine.coordinator.reasons["ns/w"] == reason
