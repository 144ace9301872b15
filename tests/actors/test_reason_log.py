"""What the daemon says about a workload that waits: the Pending condition it hands the port and
Kueue's ``Pending`` warning Event, once per change; and the Event of an eviction that is not a
preemption (``EvictedDueTo<reason>``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from actors.harness import LiveEngine
from actors.reasons import ReasonLog
from kueued.kube.port import InMemoryPort
from tests.actors.test_drains import _world
from tests.builders import workload


class Events:
    """A Recorder that keeps (kind, workload, reason or message) of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    @staticmethod
    def _key(wl: Mapping[str, Any]) -> str:
        return f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"

    def quota_reserved(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float) -> bool:
        self.calls.append(("quota_reserved", self._key(workload), cluster_queue))
        return True

    def admitted(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float = 0.0) -> bool:
        return True

    def preempted(self, victim: Mapping[str, Any], *, preemptor: Mapping[str, Any], reason: str, message: str,
                  cluster_queue: str, priorities: str) -> bool:
        return True

    def deactivating(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool:
        return True

    def evicted(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool:
        self.calls.append(("evicted", self._key(workload), reason))
        return True

    def pending(self, workload: Mapping[str, Any], message: str) -> bool:
        self.calls.append(("pending", self._key(workload), message))
        return True


def test_a_workload_that_cannot_fit_gets_one_pending_warning_per_new_reason() -> None:
    world, port, events, log = _world(), InMemoryPort(), Events(), ReasonLog()
    with LiveEngine(world, port=port) as engine:
        engine.coordinator.recorder = events
        engine.apply(workload("big", "ns", "lq", cpu="3"))
        engine.apply(workload("lost", "ns", "nowhere", cpu="1"))
        engine.run()
        engine._call(log.update, engine.coordinator, port)
        engine._call(log.update, engine.coordinator, port)  # nothing changed: nothing said again
    warnings = [c for c in events.calls if c[0] == "pending"]
    assert len(warnings) == 1 and warnings[0][1] == "ns/big"
    assert warnings[0][2].startswith("couldn't assign flavors to pod set main: ")
    assert port.pending_reasons["ns/lost"].startswith("LocalQueue nowhere doesn't exist")  # condition, no Event


def test_a_drained_workload_gets_kueue_s_evicted_due_to_event() -> None:
    world, events = _world(), Events()
    running = workload("running", "ns", "lq", cpu="1")
    with LiveEngine(world, port=InMemoryPort()) as engine:
        engine.coordinator.recorder = events
        engine.apply(running)
        engine.run()
        off = copy.deepcopy(running)
        off["spec"]["active"] = False
        engine.apply(off)
        engine.run()
    assert ("evicted", "ns/running", "Deactivated") in events.calls


def test_a_workload_already_waiting_says_its_queue_is_inactive_once_it_stops() -> None:
    from tests.builders import cluster_queue, quotas
    world, port, log = _world(), InMemoryPort(), ReasonLog()
    with LiveEngine(world, port=port) as engine:
        engine.apply(workload("big", "ns", "lq", cpu="3"))
        engine.run()
        engine._call(log.update, engine.coordinator, port)
        assert port.pending_reasons["ns/big"].startswith("couldn't assign flavors")
        stopped = cluster_queue("cq", quotas("default", cpu="2"))
        stopped["spec"]["stopPolicy"] = "Hold"
        engine.apply(stopped)
        engine.run()
        engine._call(log.update, engine.coordinator, port)
    assert port.pending_reasons["ns/big"].startswith("ClusterQueue cq is inactive")


def test_a_workload_no_round_judged_yet_is_not_said_to_wait_behind_a_strict_fifo_head() -> None:
    from structlog.testing import capture_logs

    from actors.reasons import NOT_JUDGED
    from kueued.scheduling.explain import STRICT_FIFO_WAIT
    from tests.builders import cluster_queue, local_queue, quotas
    world, port, log = _world(), InMemoryPort(), ReasonLog()
    with LiveEngine(world, port=port) as engine:
        engine.apply(cluster_queue("strict", quotas("default", cpu="2"), strategy="StrictFIFO"))
        engine.apply(local_queue("slq", "ns", "strict"))
        engine.apply(workload("fresh", "ns", "lq", cpu="1"))  # arrived after the last round (none ran)
        engine.apply(workload("queued", "ns", "slq", cpu="1"))
        with capture_logs() as logs:
            engine._call(log.update, engine.coordinator, port)
    said = {e["workload"]: e["reason"] for e in logs if e["event"] == "workload_pending"}
    assert said == {"ns/fresh": NOT_JUDGED, "ns/queued": STRICT_FIFO_WAIT}
    assert not port.pending_reasons  # no verdict yet: no condition is written for either
