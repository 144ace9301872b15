"""The event recorder: Kueue's reasons and sentences, never blocking, repeats folded, failures counted."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
from structlog.testing import capture_logs

from kueued.kube.errors import ApiError, ApiForbidden
from kueued.kube.events import EventRecorder
from kueued.kube.pending_reasons import preemption_message, priorities
from tests.builders import workload


class FakeClient:
    def __init__(self, fail: ApiError | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.patches: list[tuple[str, str | None, str, int]] = []
        self.fail = fail

    async def create_event(self, regarding: dict[str, Any], *, reason: str, message: str, type: str = "Normal",
                           action: str = "", reporter: str = "kueued") -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        if self.fail is not None:
            raise self.fail
        self.events.append({"object": regarding, "type": type, "reason": reason, "message": message})
        return {"metadata": {"name": f"e{len(self.events)}", "namespace": "ns"}}

    async def patch(self, kind: Any, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        self.patches.append((kind.kind, namespace, name, body["count"]))
        return {}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def wl(name: str = "a", uid: str = "u-a", **labels: str) -> dict[str, Any]:
    manifest = workload(name, "ns", "lq", cpu="1")
    manifest["metadata"].update(uid=uid, labels=labels, resourceVersion="7")
    return manifest


def drain(recorder: EventRecorder) -> None:
    """Run the writers until every queued Event is written, then stop them."""
    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(recorder.run)
            while recorder.pending_events():
                await anyio.lowlevel.checkpoint()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    anyio.run(main)


def test_admission_and_preemption_events_use_kueue_s_reasons_and_sentences() -> None:
    client = FakeClient()
    recorder = EventRecorder(client)
    recorder.quota_reserved(wl(), cluster_queue="cq", waited=12.4)
    recorder.admitted(wl(), cluster_queue="cq")
    high = wl("high", "u-high", **{"kueue.x-k8s.io/job-uid": "j1"})
    message = preemption_message(high, "InClusterQueue", "/org/cq", "/org/cq")
    recorder.preempted(wl("low", "u-low"), preemptor=high, reason="InClusterQueue", message=message,
                       cluster_queue="cq", priorities=priorities((100, 0), (5, 2)))
    recorder.evicted(wl("low", "u-low"), reason="Preempted", message=message)
    recorder.pending(wl("b", "u-b"), "couldn't assign flavors to pod set main")
    drain(recorder)
    assert [(e["object"]["metadata"]["name"], e["type"], e["reason"], e["message"]) for e in client.events] == [
        ("a", "Normal", "QuotaReserved", "Quota reserved in ClusterQueue cq, wait time since queued was 12s"),
        ("a", "Normal", "Admitted", "Admitted by ClusterQueue cq, wait time since reservation was 0s"),
        ("high", "Normal", "PreemptedWorkload", "Preempted workload ns/low (UID: u-low) in ClusterQueue cq; "
                                                "preemptor effective priority: 100 (base: 100, boost: 0); "
                                                "preemptee effective priority: 5 (base: 3, boost: 2)"),
        ("low", "Normal", "Preempted", "Preempted to accommodate a workload (UID: u-high, JobUID: j1) due to "
                                       "prioritization in the ClusterQueue; preemptor path: /org/cq; preemptee "
                                       "path: /org/cq; preemptor effective priority: 100 (base: 100, boost: 0); "
                                       "preemptee effective priority: 5 (base: 3, boost: 2)"),
        ("low", "Normal", "EvictedDueToPreempted", message),
        ("b", "Warning", "Pending", "couldn't assign flavors to pod set main"),
    ]
    # the Event names its object, not a copy of it
    assert client.events[0]["object"] == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                          "metadata": {"name": "a", "namespace": "ns", "uid": "u-a",
                                                       "resourceVersion": "7"}}
    assert recorder.counts["written"] == 6


def test_an_identical_event_within_the_window_is_recorded_once() -> None:
    clock = Clock()
    recorder = EventRecorder(FakeClient(), window=60.0, clock=clock)
    assert recorder.validation_failed(wl(), "spec.queueName: Required value") is True
    clock.now = 30.0
    assert recorder.validation_failed(wl(), "spec.queueName: Required value") is False
    assert recorder.validation_failed(wl(), "spec.podSets: Required value") is True  # another message
    assert recorder.validation_failed(wl("b", "u-b"), "spec.queueName: Required value") is True  # another object
    clock.now = 61.0
    assert recorder.validation_failed(wl(), "spec.queueName: Required value") is True
    assert recorder.counts["deduplicated"] == 1


def test_a_repeat_is_counted_on_the_event_already_written() -> None:
    """As client-go's correlator: the Event written gets count and lastTimestamp, so ``kubectl describe``
    shows "x3"; repeats that come before a patch is written ride on it."""
    client, clock = FakeClient(), Clock()
    recorder = EventRecorder(client, window=600.0, clock=clock)
    recorder.admitted(wl(), cluster_queue="cq")
    recorder.admitted(wl(), cluster_queue="cq")  # before its create is answered: nothing to patch yet
    drain(recorder)
    assert len(client.events) == 1 and client.patches == []
    recorder.admitted(wl(), cluster_queue="cq")
    recorder.admitted(wl(), cluster_queue="cq")
    drain(recorder)
    assert client.patches == [("Event", "ns", "e1", 4)]  # one patch, the count so far
    clock.now = 601.0  # past the window: a new Event
    recorder.admitted(wl(), cluster_queue="cq")
    drain(recorder)
    assert len(client.events) == 2 and recorder.counts["counted"] == 1


def test_a_full_queue_drops_and_counts_never_blocks() -> None:
    recorder = EventRecorder(FakeClient(), capacity=2)
    with capture_logs() as logs:
        queued = [recorder.pending(wl(f"w{i}", f"u{i}"), "waits") for i in range(5)]
    assert queued == [True, True, False, False, False]
    assert recorder.counts["dropped"] == 3
    assert [e["event"] for e in logs] == ["events_dropped"]  # once per overflow, not once per Event


def test_a_refused_write_is_counted_and_logged_once() -> None:
    recorder = EventRecorder(FakeClient(fail=ApiForbidden(403, "Forbidden", "events is forbidden")))
    for i in range(3):
        recorder.pending(wl(f"w{i}", f"u{i}"), "waits")
    with capture_logs() as logs:
        drain(recorder)
    assert recorder.counts["failed"] == 3 and recorder.counts["written"] == 0
    assert [(e["event"], e["error"]) for e in logs] == [("event_write_failed", "ApiForbidden")]


def test_events_recorded_while_the_writers_run_are_written() -> None:
    client = FakeClient()
    recorder = EventRecorder(client, workers=2)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(recorder.run)
            for i in range(6):
                recorder.admitted(wl(f"w{i}", f"u{i}"), cluster_queue="cq")
                await anyio.lowlevel.checkpoint()
            while recorder.pending_events():
                await anyio.lowlevel.checkpoint()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    anyio.run(main)
    assert sorted(e["object"]["metadata"]["name"] for e in client.events) == [f"w{i}" for i in range(6)]


def test_a_follower_s_fenced_events_are_counted_but_not_logged_as_failures() -> None:
    from kueued.kube.fencing import NotLeader
    recorder = EventRecorder(FakeClient(fail=NotLeader("create_event")))
    for i in range(3):
        recorder.pending(wl(f"w{i}", f"u{i}"), "waits")
    with capture_logs() as logs:
        drain(recorder)
    assert recorder.counts["fenced"] == 3 and recorder.counts["failed"] == 0
    assert not [e for e in logs if e["event"] == "event_write_failed"]  # the leader records them
