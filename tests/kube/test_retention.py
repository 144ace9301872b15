"""Kueue's object retention for Workloads (KEP-1618): what falls due, and the sweeps that delete it."""

from __future__ import annotations

from typing import Any

import pytest

from kueued.kube.errors import ApiConflict, ApiNotFound
from kueued.kube.retention import DEACTIVATED, FINISHED, Retention, due_deletions
from kueued.model.clock import rfc3339
from kueued.world import World

NOW = 1_800_000_000.0


def _configured(after_finished: str | None = None, after_deactivated: str | None = None) -> World:
    world = World()
    workloads = {k: v for k, v in (("afterFinished", after_finished), ("afterDeactivatedByKueue", after_deactivated))
                 if v is not None}
    world.apply({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                 "objectRetentionPolicies": {"workloads": workloads}})
    assert world.rejected == {}
    return world


def _workload(name: str, *, conditions: list[dict[str, Any]], active: bool = True, job: str | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if job is not None:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"uid-{job}",
                                    "controller": True}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta,
            "spec": {"active": active, "queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": {"conditions": conditions}}


def _finished(seconds_ago: float) -> dict[str, Any]:
    return {"type": "Finished", "status": "True", "reason": "Succeeded",
            "lastTransitionTime": rfc3339(NOW - seconds_ago)}


def _deactivated(seconds_ago: float, reason: str = "DeactivatedDueToMaximumExecutionTimeExceeded") -> dict[str, Any]:
    return {"type": "Evicted", "status": "True", "reason": reason, "lastTransitionTime": rfc3339(NOW - seconds_ago)}


def test_a_finished_workload_is_due_once_its_retention_has_passed() -> None:
    world = _configured(after_finished="1m")
    world.apply(_workload("old", conditions=[_finished(120)]))
    world.apply(_workload("recent", conditions=[_finished(20)]))
    world.apply(_workload("running", conditions=[]))
    due, soonest = due_deletions(world, NOW)
    assert [(kind, t["metadata"]["name"], message) for kind, t, message in due] == [("Workload", "old", FINISHED)]
    assert soonest == pytest.approx(NOW + 40, abs=1)


def test_without_a_policy_nothing_is_ever_due() -> None:
    world = World()
    world.apply(_workload("old", conditions=[_finished(10 ** 6)]))
    assert due_deletions(world, NOW) == ([], None)


def test_the_job_of_a_workload_kueue_deactivated_is_due_not_one_a_user_deactivated() -> None:
    world = _configured(after_deactivated="0s")
    world.apply(_workload("expired", conditions=[_deactivated(5)], active=False, job="train"))
    world.apply(_workload("by-user", conditions=[_deactivated(5, reason="Deactivated")], active=False, job="eval"))
    world.apply(_workload("bare", conditions=[_deactivated(5)], active=False))  # no Job: Kueue's job reconciler's
    due, _ = due_deletions(world, NOW)
    assert [(kind, t["metadata"], message) for kind, t, message in due] == [
        ("Job", {"name": "train", "namespace": "ns", "uid": "uid-train"}, DEACTIVATED)]


class FakeClient:
    def __init__(self, refuse: dict[str, Exception] | None = None) -> None:
        self.deleted: list[tuple[str, str, str, str | None]] = []
        self.refuse = refuse or {}

    async def delete(self, kind: Any, namespace: str | None, name: str, *, propagation: str | None = None) -> None:
        if name in self.refuse:
            raise self.refuse[name]
        self.deleted.append((kind.kind, namespace or "", name, propagation))


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, obj_ref: Any, type: str, reason: str, message: str) -> bool:
        self.recorded.append((obj_ref["metadata"]["name"], reason, message))
        return True


async def test_a_sweep_deletes_what_is_due_and_says_when_the_next_falls_due() -> None:
    world = _configured(after_finished="1m", after_deactivated="10s")
    world.apply(_workload("old", conditions=[_finished(120)]))
    world.apply(_workload("gone", conditions=[_finished(120)]))
    world.apply(_workload("busy", conditions=[_finished(120)]))
    world.apply(_workload("expired", conditions=[_deactivated(30)], active=False, job="train"))
    world.apply(_workload("recent", conditions=[_finished(50)]))
    client = FakeClient(refuse={"gone": ApiNotFound(404, "NotFound", "x"), "busy": ApiConflict(409, "Conflict", "x")})
    events = Events()
    retention = Retention(client, world, events=events, clock=lambda: NOW)
    soonest = await retention.sweep()
    assert client.deleted == [("Workload", "ns", "old", None), ("Job", "ns", "train", "Background")]
    assert events.recorded == [("old", "Deleted", FINISHED), ("train", "Deleted", DEACTIVATED)]
    assert soonest == pytest.approx(NOW + 10, abs=1)  # "recent", in ten seconds
    assert retention.deleted == 2
