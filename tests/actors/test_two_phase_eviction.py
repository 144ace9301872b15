"""Evictions in Kueue's two phases: a victim keeps its quota until its reservation is cleared.

The port commits an eviction's first phase (``Evicted``/``Preempted``) and says when the second
(the reservation cleared) is done (``ApiPort.released``).  Until then the victim's quota stays
where it is, so its preemptor cannot be admitted beside it: the API never shows more admitted
than the tree allows.  In ``simulate`` the second phase follows the first at once.
"""

from __future__ import annotations

import copy

from actors.harness import LiveEngine
from kueued.kube.port import InMemoryPort
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

FR = ("default", "cpu")


class SlowRelease(InMemoryPort):
    """Evictions commit at once; their reservation clears only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.held: set[str] = set()

    async def evict(self, workload: str, **kw) -> bool:
        ok = await super().evict(workload, **kw)
        if ok:
            self.held.add(workload)
        return ok

    def released(self, workload: str) -> bool:
        return workload not in self.held

    def resume_eviction(self, workload: str, message: str) -> None:
        self.held.add(workload)  # found evicted: its second phase too waits for the test


def _world() -> World:
    world = World()
    for m in [namespace("ns"), flavor("default"),
              cluster_queue("q", quotas("default", cpu="2"),
                            preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}),
              local_queue("lq", "ns", "q"), workload("low", "ns", "lq", cpu="2", priority=0, created=1)]:
        world.apply(m)
    return world


def _high_preempts_low(engine: LiveEngine) -> None:
    """``low`` admitted, then ``high`` arrives and evicts it (phase one)."""
    engine.run()
    engine.apply(workload("high", "ns", "lq", cpu="2", priority=10, created=2))
    engine.run()


def test_a_preemptor_waits_until_its_victims_reservation_is_cleared() -> None:
    world, port = _world(), SlowRelease()
    with LiveEngine(world, port=port) as engine:
        engine.run()
        assert "ns/low" in world.placed
        engine.apply(workload("high", "ns", "lq", cpu="2", priority=10, created=2))
        engine.run()
        assert [c.workload for c in port.log if c.kind == "evict"] == ["ns/low"]  # phase one committed
        assert "ns/low" in world.placed and "ns/high" not in world.placed
        assert engine.state.cluster_queues["q"].node.usage[FR] == 2000  # the victim still holds it
        port.held.clear()  # the reservation is cleared (on a cluster: the watch brings it)
        engine.run()
        assert "ns/high" in world.placed and "ns/low" not in world.placed
        assert engine.state.cluster_queues["q"].node.usage[FR] == 2000
        assert engine.coordinator.evicted["ns/low"] == 1
    assert [c.workload for c in port.log if c.kind == "evict"] == ["ns/low"]  # evicted once, not twice


def test_a_victim_already_evicted_is_not_evicted_again_by_another_preemptor() -> None:
    """Kueue's IssuePreemptions: a target that already says Evicted (its reservation not yet
    cleared) is counted for the new preemptor, not evicted a second time."""
    world, port = _world(), SlowRelease()
    with LiveEngine(world, port=port) as engine:
        _high_preempts_low(engine)
        engine.apply(workload("higher", "ns", "lq", cpu="2", priority=20, created=3))
        engine.run()  # higher targets low too, whose eviction is still in its first phase
        assert [c.workload for c in port.log if c.kind == "evict"] == ["ns/low"]
        port.held.clear()
        engine.run()
        assert "ns/higher" in world.placed and "ns/low" not in world.placed and "ns/high" not in world.placed
        assert engine.coordinator.evicted["ns/low"] == 1
    assert [c.workload for c in port.log if c.kind == "evict"] == ["ns/low"]


def test_without_status_the_second_phase_follows_the_first() -> None:
    world, port = _world(), InMemoryPort()
    with LiveEngine(world, port=port) as engine:
        _high_preempts_low(engine)
        assert "ns/high" in world.placed and "ns/low" not in world.placed


def test_a_victim_deleted_before_its_reservation_clears_is_forgotten() -> None:
    world, port = _world(), SlowRelease()
    with LiveEngine(world, port=port) as engine:
        _high_preempts_low(engine)
        engine.delete(workload("low", "ns", "lq", cpu="2", priority=0, created=1))
        engine.run()
        assert "ns/high" in world.placed
        assert engine.coordinator._evicting == {}
        assert engine.state.cluster_queues["q"].node.usage[FR] == 2000


def _echo(manifest: dict, *, admitted: bool) -> dict:
    """The API server's copy of a victim after an eviction's first phase (admission still held)
    or its second (admission cleared), as the watch delivers it."""
    m = copy.deepcopy(manifest)
    conditions = [{"type": "Evicted", "status": "True", "reason": "Preempted", "message": "",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"},
                  {"type": "QuotaReserved", "status": "True" if admitted else "False",
                   "reason": "QuotaReserved" if admitted else "Pending", "message": "",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    m["status"] = {"conditions": conditions}
    if admitted:
        m["status"]["admission"] = {"clusterQueue": "q", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}, "count": 1}]}
    return m


def test_the_echoes_of_both_phases_leave_the_victim_pending_and_its_quota_free() -> None:
    """On a cluster the watch brings the victim back twice after kueued has evicted it: holding
    its admission with Evicted=True (the first phase), then without it (the second).  Neither
    may charge its quota again: before, the first echo re-adopted it and the second kept that
    admission, so every preemption leaked the victim's quota (4 cpu held in a 2-cpu queue)."""
    world = _world()
    low = workload("low", "ns", "lq", cpu="2", priority=0, created=1)
    with LiveEngine(world) as engine:
        _high_preempts_low(engine)
        assert "ns/high" in world.placed
        engine.apply(_echo(low, admitted=True))
        engine.apply(_echo(low, admitted=False))
        engine.run()
        assert engine.state.cluster_queues["q"].node.usage[FR] == 2000
        assert [w.key for w in engine.pending("q")] == ["ns/low"]
        assert "ns/low" not in world.placed


def test_an_admission_cleared_by_hand_on_a_cluster_is_not_carried() -> None:
    """A version with a status and no admission means the reservation is gone (here: cleared by
    hand); only a manifest file's edit, which has no status, keeps the admission it had."""
    world = _world()
    low = workload("low", "ns", "lq", cpu="2", priority=0, created=1)
    with LiveEngine(world) as engine:
        engine.run()
        assert "ns/low" in world.placed
        relabelled = copy.deepcopy(low)
        relabelled["metadata"]["labels"] = {"team": "a"}
        engine.apply(relabelled)  # a file's edit: no status, the admission is kept
        assert "ns/low" in world.placed
        cleared = copy.deepcopy(low)
        cleared["status"] = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                             "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        engine.apply(cleared)
        assert engine.state.cluster_queues["q"].node.usage.get(FR, 0) == 0
        engine.run()  # and it is admitted again, as a new decision
        assert "ns/low" in world.placed


def test_the_first_phase_echo_while_the_second_is_pending_keeps_the_victim_evicting() -> None:
    """The watch shows the victim evicted but still admitted while its reservation is still to be
    cleared (here its echo even reads a different usage, as a rounded quantity would): the queue
    keeps holding it with the quota it reserved, and releases exactly that once the second
    phase lands.  Before, the echo released and re-adopted it, no longer evicting: once the
    reservation was cleared, nothing released it, and its quota leaked."""
    world, port = _world(), SlowRelease()
    low = workload("low", "ns", "lq", cpu="2", priority=0, created=1)
    with LiveEngine(world, port=port) as engine:
        _high_preempts_low(engine)
        echo = _echo(low, admitted=True)
        echo["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] = "3"
        engine.apply(echo)
        engine.run()
        assert engine.state.cluster_queues["q"].node.usage[FR] == 2000 and "ns/high" not in world.placed
        port.held.clear()
        engine.run()
        assert "ns/high" in world.placed and "ns/low" not in world.placed
        assert engine.state.cluster_queues["q"].node.usage[FR] == 2000


class RefusesFirstEviction(InMemoryPort):
    """The API server refuses the first eviction (a 409, or a write lost on the way)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 1

    async def evict(self, workload: str, **kw) -> bool:
        if self.refusals:
            self.refusals -= 1
            return False
        return await super().evict(workload, **kw)


def test_an_eviction_the_api_refused_is_tried_again() -> None:
    """A refused eviction did not happen: the victim still runs, so its preemptor may choose it
    again.  Before, the preemptor remembered it as evicted once (the no-flopping rule: never
    evict the same workload twice) and waited forever behind a lower-priority workload (seen
    under API faults: b1-108 pending while b1-107 stayed admitted)."""
    world, port = _world(), RefusesFirstEviction()
    with LiveEngine(world, port=port) as engine:
        _high_preempts_low(engine)
        assert port.refusals == 0
        assert "ns/high" in world.placed and "ns/low" not in world.placed
        assert [c.workload for c in port.log if c.kind == "evict"] == ["ns/low"]


def test_a_daemon_s_run_ends_on_a_refused_commit_so_the_watch_is_read_before_deciding_again() -> None:
    """A 409 means the World holds a stale version: deciding again on it is refused again.  The
    daemon's coordinator stops the run there (the daemon applies what the watch brought, then
    runs again); before, a new leader re-committed a stale admission 74 times in 1.3 s."""
    from actors.harness import LiveEngine
    from kueued.kube.port import InMemoryPort
    from tests.actors.test_drains import _world
    from tests.builders import workload

    ran = {}
    for stop in (False, True):
        with LiveEngine(_world(), port=InMemoryPort(refuse=lambda key: True)) as engine:
            engine.coordinator.stop_on_refusal = stop
            engine.apply(workload("w", "ns", "lq", cpu="1"))
            ran[stop] = engine._call(engine.coordinator.run_to_quiescence, max_rounds=50, until=lambda: False)
            assert not engine.coordinator.quiescent
    assert ran == {False: 50, True: 1}
