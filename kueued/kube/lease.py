"""Leader election on a coordination.k8s.io/v1 Lease, and the fence that keeps a follower's hands off.

Why.  Two kueued processes deciding for one cluster (a standby, a rolling update, a node that
looks dead but is not) would both admit against the same quota.  As Kueue does (controller-
runtime, client-go's ``leaderelection``), they compete for one Lease, ``kueued-system/kueued``:
its holder commits; the others keep watching and deciding, so a takeover starts with warm
caches, but write nothing (:mod:`kueued.kube.fencing` stands in front of every writer).

How: client-go's ``tryAcquireOrRenew``, written again.  One loop, leader or not, calls
:meth:`LeaderElector.step` every retry period:

- **No remote clock is trusted.**  The Lease's ``renewTime`` is written for people.  Whether
  the Lease expired is measured on this process's monotonic clock from when we last saw its
  record (holder, times, duration, transitions) change: ``observed_at + leaseDurationSeconds``.
  A holder that keeps renewing keeps changing the record and is never taken from; one that
  stops is taken from a full lease duration after we last saw it move.  An absent Lease is
  created, one without a holder or expired is taken, ours is renewed.  A follower wakes when
  the lease it watches would expire rather than up to a jittered retry period later.
- **Optimistic concurrency.**  Every write is a create or a PUT that carries the
  resourceVersion read (RBAC grants ``get``, ``create`` and ``update``, nothing more): of two
  candidates one wins, the other gets 409, reads again and sees the winner.  A leader renews on
  the version it holds without reading first (client-go's fast path); a 409 makes it read.
  ``leaseTransitions`` counts changes of holder.
- **Stepping down.**  A leader that has not renewed for ``renew_deadline`` (each try is cut off
  there too: a hung request does not keep us leader), that reads another holder, that
  releases, or whose loop stops, is a follower at once and logs ``leader_lost`` with why.
- **Fencing.**  :meth:`LeaderElector.fence` is true only while we lead and our last successful
  renewal, timed *before* its request was sent, is younger than ``min(renew_deadline,
  lease_duration × (1 − max_drift) − safety_margin)``.  A follower takes over no sooner than a
  lease duration after it saw that renewal, which it saw after we sent it; the margin is for a
  write still on its way when the fence closes, the drift for a follower whose clock runs fast.
  ``fence()`` reads the clock itself, so it closes on time even when this loop is starved.
- **Release** (client-go's ReleaseOnCancel): on shutdown, once nothing commits any more,
  :meth:`LeaderElector.release` writes the Lease with no holder and a one-second duration, so a
  follower takes over at its next try instead of a lease duration later.

What it does not promise: the Lease is the only arbiter, so deleting it by hand lets a
follower create it at once while the old holder is still inside its fence; and a write
already sent lands up to its latency after it was sent.  What a late write can do is bounded
by the resourceVersion every decision carries (a stale admission is a 409).

Logs are facts: ``leader_election_started``, ``leader_observed`` (a new holder seen),
``leader_acquired``, ``leader_renew_failed``, ``leader_lost``, ``leader_released``; never a
token or a header, only the Lease's name and identities.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from kueued.kube.client import LEASE
from kueued.kube.errors import ApiConflict, ApiError, ApiNotFound, ApiUnavailable
from kueued.kube.lease_record import (
    JITTER,
    ElectionStats,
    LeaderRecord,
    LeaseClient,
    check_timings,
    default_identity,
    utcnow,
    with_spec,
)

__all__ = ["LeaderElector"]

log = structlog.get_logger("kueued.kube.lease")

_WAKE_LATE = 0.01
"""A follower woken for an expiry sleeps this much past it (an event loop may wake a hair early)."""


class LeaderElector:
    """Competes for one Lease; :meth:`run` in the daemon's task group, :meth:`fence` before every write."""

    def __init__(self, client: LeaseClient, *, namespace: str = "kueued-system", name: str = "kueued",
                 identity: str | None = None, lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, safety_margin: float = 2.0, max_drift: float = 0.01,
                 jitter: float = JITTER, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = utcnow, rng: Callable[[], float] = random.random) -> None:
        self.valid_for = check_timings(lease_duration=lease_duration, renew_deadline=renew_deadline,
                                       retry_period=retry_period, safety_margin=safety_margin, max_drift=max_drift,
                                       jitter=jitter)
        """Seconds after a renewal was sent that commits stay allowed."""
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.jitter = jitter
        self.clock = clock    # monotonic seconds: every expiry and deadline
        self.wall = wall      # only the Lease's acquireTime and renewTime
        self.rng = rng
        # written to the Lease: what we ask followers to wait, never less than what the fence assumes
        self._duration_s = max(1, math.ceil(lease_duration))
        self._leader = False
        self._closed = False             # released: competes no more
        self._renewed_at: float | None = None  # clock() just before the last successful acquire/renew was sent
        self._since = 0.0                # clock() when we last became leader
        self._lease: dict[str, Any] | None = None  # the Lease as last read or written (its resourceVersion)
        self._observed: LeaderRecord | None = None
        self._observed_at = 0.0          # clock() when the record last changed, as far as we saw
        self._failing: str | None = None  # a follower's error, logged once until a try succeeds
        self._callbacks: list[Callable[[bool], None]] = []
        self._changed: anyio.Event | None = None
        self._lock: anyio.Lock | None = None
        self.acquired = 0
        self.lost = 0
        self.renew_failures = 0

    @property
    def lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    # --- what the daemon asks ----------------------------------------------------------------------
    def is_leader(self) -> bool:
        """Whether this process holds the lease, as far as it knows (see :meth:`fence` before writing)."""
        return self._leader

    def remaining(self) -> float:
        """Seconds the fence stays open from now (0 when closed): how long a write begun now may take."""
        if not self._leader or self._closed or self._renewed_at is None:
            return 0.0
        return max(0.0, self._renewed_at + self.valid_for - self.clock())

    def fence(self) -> bool:
        """True only while we lead and our last renewal is young enough that nobody else can have taken over."""
        return self.remaining() > 0.0

    @property
    def holder(self) -> str:
        """The holder last observed ("" for none, or nothing read yet)."""
        return self._observed.holder if self._observed is not None else ""

    @property
    def last_renewal(self) -> float | None:
        """clock() just before the request of the last successful acquire or renew was sent."""
        return self._renewed_at

    def on_change(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(leading)`` whenever this process becomes leader or stops being one."""
        self._callbacks.append(callback)

    async def wait_leading(self, leading: bool = True) -> None:
        """Return once this process leads (with ``leading=False``: once it does not)."""
        while self._leader != leading:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    def stats(self) -> ElectionStats:
        observed = self._observed or LeaderRecord()
        return ElectionStats(lease=self.lease, identity=self.identity, leader=self._leader, fenced=self.fence(),
                             holder=observed.holder, transitions=observed.transitions, acquired=self.acquired,
                             lost=self.lost, renew_failures=self.renew_failures)

    # --- the loop -----------------------------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Compete until cancelled or released; started once the first try is done (leader or not)."""
        log.info("leader_election_started", lease=self.lease, identity=self.identity,
                 lease_duration=self.lease_duration, renew_deadline=self.renew_deadline,
                 retry_period=self.retry_period, fence=round(self.valid_for, 3))
        try:
            wait = await self.step()
            task_status.started()
            while not self._closed:
                await anyio.sleep(wait)
                wait = await self.step()
        finally:
            self._lose("stopped")  # writes nothing: release() does, once nothing commits any more

    async def step(self) -> float:
        """One try to acquire or renew (client-go's tryAcquireOrRenew); the seconds to wait before the next."""
        if self._closed:
            return self.retry_period
        async with self._get_lock():
            if self._closed:
                return self.retry_period
            self._check_deadline()
            budget = self._deadline() - self.clock() if self._leader else self.renew_deadline
            error: ApiError | None = None
            with anyio.move_on_after(max(0.0, budget)) as scope:
                try:
                    await self._try()
                except ApiError as exc:
                    error = exc
            if scope.cancelled_caught:
                error = ApiUnavailable(None, "Timeout", f"no answer within {max(0.0, budget):.2f}s")
            if error is not None:
                self._failed(error)
            else:
                self._failing = None
            self._check_deadline()
            return self._wait()

    async def release(self, *, timeout: float | None = None) -> bool:
        """Stop competing and give the Lease up if we hold it (True once written).

        The fence closes first.  Call it once nothing commits any more (client-go's warning
        for ReleaseOnCancel): a follower may take over as soon as this write lands.  Shielded
        from cancellation, bounded by ``timeout`` (default: the lease duration, longer than a
        try in flight may take).
        """
        self._closed = True
        self._lose("released")
        lock = self._get_lock()
        if not lock.locked() and not self._holds_record():
            return False  # a follower with no try in flight: nothing to give up
        with anyio.move_on_after(self.lease_duration if timeout is None else timeout, shield=True):
            async with lock:  # a try in flight ends first (it is bounded by the renew deadline)
                return await self._release()
        log.warning("leader_release_failed", lease=self.lease, identity=self.identity, error="Timeout")
        return False

    # --- one try ------------------------------------------------------------------------------------
    async def _try(self) -> None:
        if self._leader and self._lease is not None and self._observed is not None:
            try:  # the fast path: renew on the version we hold, without reading first
                await self._put(self._lease, self._next(self._observed), previous=self.identity)
                return
            except ApiConflict:
                pass  # someone wrote it since: read what they wrote
            except ApiNotFound:
                self._lose("lease_deleted")  # whoever creates it next may lead at once
        try:
            await self._acquire_or_renew()
        except ApiConflict:
            await self._acquire_or_renew()  # lost a race: read again, once, now

    async def _acquire_or_renew(self) -> None:
        try:
            lease = await self.client.get(LEASE, self.namespace, self.name)
        except ApiNotFound:
            self._lease = None
            if self._closed:
                return
            now = self._stamp()
            record = LeaderRecord(self.identity, self._duration_s, now, now, 0)
            body = {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.spec()}
            sent = self.clock()
            self._won(await self.client.create(LEASE, body), sent, previous="")
            return
        self._lease = lease
        record = LeaderRecord.of(lease)
        self._observe(record)
        if record.holder and record.holder != self.identity and not self._expired(record):
            self._lose("taken_over", holder=record.holder)
            return
        if not self._closed:
            await self._put(lease, self._next(record), previous=record.holder)

    def _next(self, record: LeaderRecord) -> LeaderRecord:
        """The record that renews ours, or takes over ``record`` (a new holder: one more transition)."""
        now = self._stamp()
        if record.holder == self.identity:
            return LeaderRecord(self.identity, self._duration_s, record.acquired or now, now, record.transitions)
        return LeaderRecord(self.identity, self._duration_s, now, now, record.transitions + 1)

    async def _put(self, lease: dict[str, Any], record: LeaderRecord, *, previous: str) -> None:
        body = with_spec(lease, record)
        sent = self.clock()  # before the request: the fence counts from here
        self._won(await self.client.replace(LEASE, self.namespace, self.name, body), sent, previous=previous)

    def _won(self, written: dict[str, Any], sent: float, *, previous: str) -> None:
        self._lease = written
        record = LeaderRecord.of(written)
        self._observe(record)
        if self._closed or record.holder != self.identity:
            return  # released meanwhile: the write stands, but we lead no more
        self._renewed_at = sent
        if not self._leader:
            self._leader = True
            self._since = self.clock()
            self.acquired += 1
            log.info("leader_acquired", lease=self.lease, identity=self.identity, previous=previous or None,
                     transitions=record.transitions)
            self._notify(True)

    def _holds_record(self) -> bool:
        return self._lease is not None and self._observed is not None and self._observed.holder == self.identity

    async def _release(self) -> bool:
        for attempt in range(2):
            record = self._observed
            if self._lease is None or record is None or not self._holds_record():
                return False  # not ours (any more): nothing to give up
            now = self._stamp()
            gone = LeaderRecord("", 1, now, now, record.transitions)  # client-go's release record
            body = with_spec(self._lease, gone)
            try:
                self._lease = await self.client.replace(LEASE, self.namespace, self.name, body)
            except ApiConflict:
                if attempt:
                    break
                try:  # renewed or taken since we last wrote: read, and release only what is still ours
                    self._lease = await self.client.get(LEASE, self.namespace, self.name)
                except ApiError as exc:
                    return self._release_failed(exc)
                self._observe(LeaderRecord.of(self._lease))
                continue
            except ApiError as exc:
                return self._release_failed(exc)
            self._observed, self._observed_at = gone, self.clock()  # our own write: no leader_observed
            log.info("leader_released", lease=self.lease, identity=self.identity)
            return True
        return self._release_failed(ApiConflict(409, "Conflict", "the Lease kept changing"))

    def _release_failed(self, exc: ApiError) -> bool:
        log.warning("leader_release_failed", lease=self.lease, identity=self.identity, error=type(exc).__name__,
                    detail=str(exc)[:200])
        return False

    # --- time ---------------------------------------------------------------------------------------
    def _observe(self, record: LeaderRecord) -> None:
        """Start the expiry clock whenever the record changes (client-go's observedTime)."""
        if record == self._observed:
            return
        if record.holder != self.identity and (self._observed is None or record.holder != self._observed.holder):
            log.info("leader_observed", lease=self.lease, holder=record.holder or None,
                     transitions=record.transitions)
        self._observed = record
        self._observed_at = self.clock()

    def _expired(self, record: LeaderRecord) -> bool:
        return self.clock() >= self._observed_at + (record.duration or self.lease_duration)

    def _deadline(self) -> float:
        return (self._renewed_at or 0.0) + self.renew_deadline

    def _check_deadline(self) -> None:
        if self._leader and self.clock() >= self._deadline():
            self._lose("renew_deadline")

    def _wait(self) -> float:
        now = self.clock()
        if self._leader:  # renew every retry period; when failing, try again at the deadline at the latest
            return max(0.0, min(self.retry_period, self._deadline() - now))
        wait = self.retry_period * (1.0 + self.rng() * self.jitter)
        record = self._observed
        if record is not None and record.holder and record.holder != self.identity:
            expires = self._observed_at + (record.duration or self.lease_duration)
            if expires > now:  # wake when it would expire rather than up to a period later
                wait = min(wait, expires - now + _WAKE_LATE)
        return wait

    def _stamp(self) -> str:
        """A MicroTime, as the API server writes them."""
        return self.wall().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    # --- transitions --------------------------------------------------------------------------------
    def _failed(self, error: ApiError) -> None:
        what = type(error).__name__
        if self._leader:
            self.renew_failures += 1
            log.warning("leader_renew_failed", lease=self.lease, identity=self.identity, error=what,
                        detail=str(error)[:200], deadline_in=round(self._deadline() - self.clock(), 3))
        elif self._failing != what:
            log.warning("leader_election_failed", lease=self.lease, identity=self.identity, error=what,
                        detail=str(error)[:200])
            self._failing = what

    def _lose(self, reason: str, **fields: Any) -> None:
        if not self._leader:
            return
        self._leader = False
        self.lost += 1
        say = log.info if reason in ("released", "stopped") else log.warning
        say("leader_lost", lease=self.lease, identity=self.identity, reason=reason,
            held_for=round(self.clock() - self._since, 3), **fields)
        self._notify(False)

    def _notify(self, leading: bool) -> None:
        for callback in list(self._callbacks):
            try:
                callback(leading)
            except Exception:  # a listener's bug must not stop the election
                log.exception("leader_callback_failed", lease=self.lease)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _get_lock(self) -> anyio.Lock:
        if self._lock is None:  # made in the event loop, not at construction
            self._lock = anyio.Lock()
        return self._lock
