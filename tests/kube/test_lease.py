"""Leader election: client-go's rules on a fake Lease, time from an injected monotonic clock.

Every expiry is measured on the elector's own clock, so each test moves that clock and calls
:meth:`LeaderElector.step` (one try) itself; only the ``run`` tests use real time, and they
wait on the elector's events, never on a sleep.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from structlog.testing import capture_logs

from kueued.kube.client import LEASE, Kind
from kueued.kube.errors import ApiConflict, ApiError, ApiNotFound, ApiUnavailable
from kueued.kube.lease import LeaderElector

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeLeases:
    """One Lease with resourceVersions: a stale PUT is a 409, a second create is a 409."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.calls: list[str] = []
        self.fail: ApiError | None = None
        self.blocked = False
        self.before: Callable[[str], None] | None = None  # runs as a request arrives (a slow one moves the clock)

    async def _arrive(self, what: str) -> None:
        self.calls.append(what)
        await anyio.lowlevel.checkpoint()
        if self.before is not None:
            self.before(what)
        if self.blocked:
            await anyio.sleep_forever()
        if self.fail is not None:
            raise self.fail

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        assert kind == LEASE and (namespace, name) == ("kueued-system", "kueued")
        await self._arrive("get")
        if self.lease is None:
            raise ApiNotFound(404, "NotFound")
        return copy.deepcopy(self.lease)

    async def create(self, kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
        await self._arrive("create")
        if self.lease is not None:
            raise ApiConflict(409, "AlreadyExists")
        return self.store(body)

    async def replace(self, kind: Kind, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._arrive("replace")
        if self.lease is None:
            raise ApiNotFound(404, "NotFound")
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiConflict(409, "Conflict")
        return self.store(body)

    def store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.lease = obj
        return copy.deepcopy(obj)

    def held_by(self, holder: str, *, renewed: str = "2000-01-01T00:00:00.000000Z", duration: int = 15,
                transitions: int = 3) -> None:
        """Another process writes the Lease (its clock says ``renewed``; nobody should believe it)."""
        meta = dict(self.lease["metadata"]) if self.lease else {"name": "kueued", "namespace": "kueued-system"}
        self.store({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                    "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": renewed,
                             "renewTime": renewed, "leaseTransitions": transitions}})

    def touched(self) -> None:
        """Someone changes the Lease without touching the election (a label)."""
        assert self.lease is not None
        self.lease["metadata"].setdefault("labels", {})["touched"] = "yes"
        self.store(self.lease)

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        return self.lease["spec"]


def elector(api: FakeLeases, clock: Clock, identity: str = "me", **options: Any) -> LeaderElector:
    return LeaderElector(api, identity=identity, clock=clock, wall=lambda: EPOCH + timedelta(seconds=clock.now),
                         rng=lambda: 0.0, **options)


def events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == name]


async def test_an_absent_lease_is_created_and_held() -> None:
    api, clock = FakeLeases(), Clock(100.0)
    e = elector(api, clock)
    changes: list[bool] = []
    e.on_change(changes.append)
    with capture_logs() as logs:
        wait = await e.step()
    assert e.is_leader() and e.fence() and changes == [True]
    assert api.calls == ["get", "create"]
    assert api.spec == {"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                        "acquireTime": "2026-01-01T00:01:40.000000Z", "renewTime": "2026-01-01T00:01:40.000000Z"}
    assert wait == 2.0
    (acquired,) = events(logs, "leader_acquired")
    assert acquired["lease"] == "kueued-system/kueued" and acquired["previous"] is None
    stats = e.stats()
    assert (stats.leader, stats.fenced, stats.holder, stats.acquired, stats.transitions) == (True, True, "me", 1, 0)


async def test_the_leader_renews_every_retry_period_on_the_version_it_holds() -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock)
    await e.step()
    clock.now = 2.0
    api.calls.clear()
    assert await e.step() == 2.0
    assert api.calls == ["replace"]  # no read first: client-go's fast path
    assert api.spec["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert api.spec["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    assert api.spec["leaseTransitions"] == 0
    assert e.last_renewal == 2.0 and e.remaining() == e.valid_for == 10.0


@pytest.mark.parametrize("renewed", [
    pytest.param("2000-01-01T00:00:00.000000Z", id="renew-time-long-past"),
    pytest.param("2999-01-01T00:00:00.000000Z", id="renew-time-in-the-future"),
])
async def test_a_stale_lease_is_taken_only_a_lease_duration_after_we_saw_it_last_change(renewed: str) -> None:
    api, clock = FakeLeases(), Clock(100.0)
    api.held_by("other", renewed=renewed)
    e = elector(api, clock)
    with capture_logs() as logs:
        await e.step()
        assert not e.is_leader() and e.holder == "other"
        clock.now = 114.9
        await e.step()
        assert not e.is_leader()
        clock.now = 115.0
        await e.step()
    assert e.is_leader()
    assert api.spec["holderIdentity"] == "me" and api.spec["leaseTransitions"] == 4
    assert api.spec["acquireTime"] == api.spec["renewTime"] == "2026-01-01T00:01:55.000000Z"
    assert [x["holder"] for x in events(logs, "leader_observed")] == ["other"]
    (acquired,) = events(logs, "leader_acquired")
    assert acquired["previous"] == "other" and acquired["transitions"] == 4


async def test_a_holder_that_keeps_renewing_is_never_taken_from() -> None:
    api, clock = FakeLeases(), Clock()
    api.held_by("other", renewed="2026-01-01T00:00:00.000000Z")
    e = elector(api, clock)
    await e.step()
    api.held_by("other", renewed="2026-01-01T00:00:10.000000Z")  # renewed; we see it at our next try
    clock.now = 10.0
    await e.step()
    for now in (16.0, 24.9):
        clock.now = now
        await e.step()
        assert not e.is_leader()
    clock.now = 25.0
    await e.step()
    assert e.is_leader()


async def test_the_holder_s_own_lease_duration_is_what_we_wait() -> None:
    api, clock = FakeLeases(), Clock()
    api.held_by("other", duration=40)
    e = elector(api, clock)
    await e.step()
    clock.now = 39.9
    await e.step()
    assert not e.is_leader()
    clock.now = 40.0
    await e.step()
    assert e.is_leader()


async def test_a_follower_wakes_when_the_lease_it_watches_would_expire() -> None:
    api, clock = FakeLeases(), Clock()
    api.held_by("other")
    e = elector(api, clock)
    assert await e.step() == 2.0   # a retry period (rng 0: no jitter)
    clock.now = 14.0
    assert await e.step() == pytest.approx(1.01)  # not 2 s: the lease runs out in 1


async def test_a_conflict_on_renewal_reads_again_and_renews_what_is_still_ours() -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock)
    await e.step()
    api.touched()
    api.calls.clear()
    clock.now = 2.0
    await e.step()
    assert api.calls == ["replace", "get", "replace"]
    assert e.is_leader() and e.fence() and e.last_renewal == 2.0


async def test_a_conflict_on_renewal_that_shows_another_holder_steps_down_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock)
    changes: list[bool] = []
    e.on_change(changes.append)
    await e.step()
    api.held_by("usurper")
    clock.now = 2.0
    with capture_logs() as logs:
        await e.step()
    assert not e.is_leader() and not e.fence() and changes == [True, False]
    (lost,) = events(logs, "leader_lost")
    assert lost["reason"] == "taken_over" and lost["holder"] == "usurper" and lost["log_level"] == "warning"
    assert api.spec["holderIdentity"] == "usurper"  # nothing written over the new holder


async def test_losing_the_race_to_create_reads_the_winner() -> None:
    api, clock = FakeLeases(), Clock()

    def someone_else_first(what: str) -> None:
        if what == "create":
            api.held_by("quicker", renewed="2026-01-01T00:00:00.000000Z", transitions=0)
    api.before = someone_else_first
    e = elector(api, clock)
    await e.step()
    assert api.calls == ["get", "create", "get"]
    assert not e.is_leader() and e.holder == "quicker"


async def test_the_fence_closes_at_the_renew_deadline_even_before_the_loop_notices() -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock)
    changes: list[bool] = []
    e.on_change(changes.append)
    await e.step()
    api.fail = ApiUnavailable(503, "ServiceUnavailable", "etcd is slow")
    clock.now = 2.0
    with capture_logs() as logs:
        assert await e.step() == 2.0
        assert e.is_leader() and e.fence()
        (failed,) = events(logs, "leader_renew_failed")
        assert failed["error"] == "ApiUnavailable" and failed["deadline_in"] == 8.0
        clock.now = 9.99
        assert e.fence()
        clock.now = 10.0
        assert e.is_leader() and not e.fence()  # the loop has not run: fence() reads the clock itself
        await e.step()
    assert not e.is_leader() and changes == [True, False]
    (lost,) = events(logs, "leader_lost")
    assert lost["reason"] == "renew_deadline"


async def test_a_failing_leader_tries_again_no_later_than_its_deadline() -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock)
    await e.step()
    api.fail = ApiUnavailable(None, "ConnectionError")
    clock.now = 9.5
    assert await e.step() == pytest.approx(0.5)


async def test_the_fence_counts_from_before_the_renewal_was_sent() -> None:
    api, clock = FakeLeases(), Clock()

    def slow(what: str) -> None:
        if what == "create":
            clock.now += 3.0  # three seconds on the way: the lease may be as old as that already
    api.before = slow
    e = elector(api, clock)
    await e.step()
    assert e.last_renewal == 0.0 and e.remaining() == pytest.approx(7.0)


@pytest.mark.parametrize(("options", "open_until"), [
    pytest.param({}, 10.0, id="default-the-renew-deadline"),
    pytest.param({"lease_duration": 15, "renew_deadline": 14, "safety_margin": 2, "max_drift": 0.01}, 12.85,
                 id="lease-less-margin-and-drift"),
    pytest.param({"lease_duration": 3, "renew_deadline": 2, "retry_period": 0.5, "safety_margin": 1}, 1.97,
                 id="short"),
])
async def test_the_fence_is_open_for_the_lease_less_its_margins_and_never_past_the_deadline(
        options: dict[str, Any], open_until: float) -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock, **options)
    await e.step()
    assert e.valid_for == pytest.approx(open_until)
    clock.now = open_until - 0.001
    assert e.fence()
    clock.now = open_until + 0.001
    assert not e.fence()


async def test_a_hung_renewal_is_cut_off_at_the_renew_deadline() -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock)
    await e.step()
    api.blocked = True
    clock.now = 9.95  # 50 ms (real time) left until the deadline
    with capture_logs() as logs, anyio.fail_after(5):
        await e.step()
    (failed,) = events(logs, "leader_renew_failed")
    assert failed["error"] == "ApiUnavailable" and "no answer" in failed["detail"]
    api.blocked, api.fail = False, ApiUnavailable(None, "ConnectionError")
    clock.now = 10.0
    await e.step()
    assert not e.is_leader()
    api.fail = None  # the API answers again and the Lease still names us: nobody took it, we take it back
    clock.now = 10.5
    with capture_logs() as logs:
        await e.step()
    assert e.is_leader() and e.stats().acquired == 2 and api.spec["leaseTransitions"] == 0
    assert events(logs, "leader_acquired")[0]["previous"] == "me"


async def test_release_gives_the_lease_up_so_a_follower_takes_over_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.step()
    await b.step()
    assert a.is_leader() and not b.is_leader()
    clock.now = 1.0
    with capture_logs() as logs:
        assert await a.release() is True
    assert not a.is_leader() and not a.fence()
    assert api.spec["holderIdentity"] == "" and api.spec["leaseDurationSeconds"] == 1
    assert api.spec["leaseTransitions"] == 0
    assert [x["reason"] for x in events(logs, "leader_lost")] == ["released"]
    assert len(events(logs, "leader_released")) == 1
    await b.step()  # the same instant: no holder, nothing to wait for
    assert b.is_leader() and api.spec["holderIdentity"] == "b" and api.spec["leaseTransitions"] == 1
    api.calls.clear()
    await a.step()  # released: it competes no more
    assert api.calls == [] and not a.is_leader()


async def test_release_by_a_follower_writes_nothing() -> None:
    api, clock = FakeLeases(), Clock()
    api.held_by("other")
    e = elector(api, clock)
    await e.step()
    api.calls.clear()
    assert await e.release() is False
    assert api.calls == []


async def test_release_after_the_lease_changed_releases_only_what_is_still_ours() -> None:
    api, clock = FakeLeases(), Clock()
    e = elector(api, clock)
    await e.step()
    api.touched()
    api.calls.clear()
    assert await e.release() is True
    assert api.calls == ["replace", "get", "replace"] and api.spec["holderIdentity"] == ""


async def test_release_during_a_try_that_takes_the_lease_waits_for_it_and_gives_the_lease_up() -> None:
    api, clock = FakeLeases(), Clock()
    arrived, answer = anyio.Event(), anyio.Event()
    create = api.create

    async def slow_create(kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
        arrived.set()
        await answer.wait()
        return await create(kind, body)
    api.create = slow_create  # type: ignore[method-assign]
    e = elector(api, clock)
    released: list[bool] = []

    async def release() -> None:
        released.append(await e.release())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(e.step)
            await arrived.wait()
            tg.start_soon(release)
            await anyio.wait_all_tasks_blocked()
            answer.set()  # the create lands after release() was asked: the Lease names us
    assert released == [True] and api.spec["holderIdentity"] == ""
    assert not e.is_leader() and e.stats().acquired == 0  # never led: released before the answer came


@pytest.mark.parametrize("options", [
    pytest.param({"lease_duration": 10, "renew_deadline": 10}, id="lease-not-longer-than-deadline"),
    pytest.param({"renew_deadline": 2, "retry_period": 2}, id="deadline-within-a-jittered-retry"),
    pytest.param({"retry_period": 0}, id="no-retry-period"),
    pytest.param({"safety_margin": 14}, id="margin-leaves-no-fence"),
    pytest.param({"max_drift": 1.0}, id="drift-of-100-percent"),
])
def test_timings_that_cannot_work_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        LeaderElector(FakeLeases(), **options)


def test_the_default_identity_is_the_host_and_a_random_suffix() -> None:
    import socket
    a, b = LeaderElector(FakeLeases()), LeaderElector(FakeLeases())
    assert a.identity.startswith(socket.gethostname() + "_") and a.identity != b.identity


async def test_run_starts_after_the_first_try_and_a_follower_wakes_when_the_leader_releases() -> None:
    api = FakeLeases()
    options: dict[str, Any] = {"lease_duration": 1.0, "renew_deadline": 0.8, "retry_period": 0.05,
                               "safety_margin": 0.1, "rng": lambda: 0.0}
    a = LeaderElector(api, identity="a", **options)
    b = LeaderElector(api, identity="b", **options)
    seen: list[tuple[str, bool]] = []
    a.on_change(lambda leading: seen.append(("a", leading)))
    b.on_change(lambda leading: seen.append(("b", leading)))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            assert a.is_leader()  # started once the first try is done
            await tg.start(b.run)
            assert not b.is_leader()
            await a.release()
            await b.wait_leading()
            assert a.stats().lost == 1 and not a.fence()
            tg.cancel_scope.cancel()
    assert seen == [("a", True), ("a", False), ("b", True), ("b", False)]  # b stepped down as its loop stopped
