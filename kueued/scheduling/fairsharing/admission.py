"""Admission fair sharing (KEP-4136): order a ClusterQueue's queue by its tenants' usage.

A ClusterQueue with ``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing``
serves its LocalQueues by how much each has consumed lately, when the Configuration
sets ``admissionFairSharing`` and the gate AdmissionFairSharing is on (Kueue's
``pkg/util/admissionfairsharing``, ``pkg/controller/core/localqueue_controller.go``):

* each LocalQueue's *consumed* usage is an exponential moving average, seeded from
  ``status.fairSharing.admissionFairSharingStatus.consumedResources`` (taken as current
  when the ledger is made) and sampled every ``usageSamplingInterval`` of engine time,
  at ``made + k * interval``: ``consumed = consumed * (1 - a) + held * a`` with
  ``a = 1 - 0.5 ** (interval / halfLife)``, ``held`` being what the LocalQueue's
  admitted workloads held at that instant;
* every admission pushes an *entry penalty*, the workload's total requests times
  ``a``, onto its LocalQueue at once, so the next pick in the same burst prefers
  another tenant; the next sample adds the penalties to consumed (as Kueue does) and
  clears them;
* a LocalQueue's usage is ``sum_r resourceWeights[r] (default 1) * (consumed + penalty)``
  in resource units, divided by ``spec.fairSharing.weight`` (default 1); a weight of 0
  or less makes it +Inf, so such a queue goes last.

Sampling does not depend on who reads the ledger, or when.  Kueue's LocalQueue
controller samples every LocalQueue on a timer, whether or not anything is pending.
Here the engine calls :meth:`AdmissionFairSharing.observe` at the start of every round:
the ledger first takes every sample that fell due since the last observation, each
with the usage held then (what it recorded at the last observation, plus the
admissions it was told of since), then records what the World's admitted workloads
hold now.  Usage only changes in rounds and at events between them, and a round
follows every event, so on the virtual clock each sample sees exactly what was held
just before its instant, however long nothing was read; any read (the queue's
ordering, preemption, the status publisher) first takes the samples due.  On the
real clock a change is seen at the round after it, a few milliseconds late.

Pending workloads of such a ClusterQueue are ordered by their LocalQueue's usage, then
priority, then creation time (``PendingQueue(usage_of=...)``).  Preemption, classical
or fair sharing, uses the same usage to prefer victims of busier LocalQueues within
one ClusterQueue (:meth:`AdmissionFairSharing.local_queue_usage`).

Defaults.  Kueue defaults ``usageHalfLifeTime`` to 0, where ``a`` is 0: no penalty and
no decay, so consumed usage never changes and AFS stops reacting to admissions.  Here
an unset (or zero) half-life means :data:`DEFAULT_HALF_LIFE`, one week, the value
Kueue's documentation uses; the sampling interval defaults to Kueue's 5 minutes.

State.  The coordinator owns one :class:`AdmissionFairSharing` (its World, its clock,
its ledger); nothing here is module-level.  The ledger is kept while the
Configuration's ``admissionFairSharing`` stays equal (by value), so re-applying the
same Configuration keeps the history; :meth:`AdmissionFairSharing.consumed_usage` is
what the API layer writes back to each LocalQueue's status, and the seed reads it
again at start-up, so the history survives a restart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from kueued.model import api
from kueued.model.quantity import parse
from kueued.model.settings import Settings
from kueued.scheduling.cycle import Entry
from kueued.scheduling.fairsharing import gates
from kueued.scheduling.snapshot import ClusterQueueSnapshot
from kueued.scheduling.view import WorldView as World
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["DEFAULT_HALF_LIFE", "DEFAULT_SAMPLING_INTERVAL", "alpha", "UsageLedger", "AdmissionFairSharing",
           "afs_enabled", "current_usage"]

DEFAULT_HALF_LIFE = 7 * 24 * 3600.0
"""Seconds; used when the Configuration leaves ``usageHalfLifeTime`` unset or 0."""

DEFAULT_SAMPLING_INTERVAL = 300.0
"""Seconds; Kueue's default ``usageSamplingInterval``."""

_SLACK = 1e-6
"""Seconds: an instant this close to a sampling boundary counts as on it (float epoch times)."""

Usage = dict[str, float]  # resource name -> amount in resource units (cpu "500m" is 0.5)


def alpha(elapsed: float, half_life: float) -> float:
    """The weight of the newest sample after ``elapsed`` seconds: ``1 - 0.5 ** (dt / halfLife)``."""
    if half_life <= 0:
        return 0.0
    return 1.0 - 0.5 ** (elapsed / half_life)


def _duration(text: str, default: float) -> float:
    if not text:
        return default
    from kueued.model.validation.configuration import parse_duration
    try:
        seconds = parse_duration(text)
    except ValueError:
        return default
    return seconds if seconds > 0 else default


def _units(milli: Mapping[str, int]) -> Usage:
    return {r: v / 1000 for r, v in milli.items()}


def _mix(old: Mapping[str, float], new: Mapping[str, float], a: float) -> Usage:
    return {r: old.get(r, 0.0) * (1 - a) + new.get(r, 0.0) * a for r in {*old, *new}}


class UsageLedger:
    """Per LocalQueue: decayed consumed usage, entry penalties not yet sampled, usage held now.

    Samples fall at ``made + k * sampling``; :meth:`catch_up` takes those due, each with
    ``held``, so the result depends only on the instants and the usage, not on the reads.
    """

    def __init__(self, config: api.AdmissionFairSharingConfig, *, now: float,
                 seed: Mapping[str, Usage] | None = None, held: Mapping[str, Usage] | None = None) -> None:
        self.config = config
        self.half_life = _duration(config.usage_half_life_time, DEFAULT_HALF_LIFE)
        self.sampling = _duration(config.usage_sampling_interval, DEFAULT_SAMPLING_INTERVAL)
        self.resource_weights = dict(config.resource_weights)
        self.consumed: dict[str, Usage] = {k: dict(v) for k, v in (seed or {}).items()}
        self.penalty: dict[str, Usage] = {}
        self.held: dict[str, Usage] = {k: dict(v) for k, v in (held or {}).items()}
        self.last_sample = now

    @property
    def entry_alpha(self) -> float:
        return alpha(self.sampling, self.half_life)

    def add_penalty(self, lq: str, requests: Mapping[str, float]) -> None:
        a = self.entry_alpha
        pending = self.penalty.setdefault(lq, {})
        for r, v in requests.items():
            pending[r] = pending.get(r, 0.0) + v * a

    def hold(self, lq: str, usage: Mapping[str, float], *, sign: int = 1) -> None:
        """An admission (or, ``sign=-1``, a release) between observations."""
        held = self.held.setdefault(lq, {})
        for r, v in usage.items():
            held[r] = held.get(r, 0.0) + sign * v

    def catch_up(self, now: float) -> int:
        """Take every sample due by ``now`` (module notes); how many were taken."""
        due = math.floor((now - self.last_sample) / self.sampling + _SLACK / self.sampling)
        if due <= 0:
            return 0
        self.sample(self.held, elapsed=self.sampling)
        if due > 1:  # the same usage held all along: the samples after the first fold into one
            a = alpha((due - 1) * self.sampling, self.half_life)
            for lq in {*self.consumed, *self.held}:
                self.consumed[lq] = _mix(self.consumed.get(lq, {}), self.held.get(lq, {}), a)
        self.last_sample += due * self.sampling
        return due

    def observe(self, now: float, held: Mapping[str, Usage]) -> None:
        """Take the samples due by ``now`` with the usage held until now, then record ``held``."""
        self.catch_up(now)
        self.held = {k: dict(v) for k, v in held.items()}

    def sample(self, current: Mapping[str, Usage], *, elapsed: float) -> None:
        """Decay consumed usage towards what is held, then add the entry penalties to it (Kueue
        consolidates them into the consumed usage at the sample) and clear them."""
        a = alpha(elapsed, self.half_life)
        for lq in {*self.consumed, *current, *self.penalty}:
            mixed = _mix(self.consumed.get(lq, {}), current.get(lq, {}), a)
            for r, v in self.penalty.get(lq, {}).items():
                mixed[r] = mixed.get(r, 0.0) + v
            self.consumed[lq] = mixed
        self.penalty.clear()

    def weighted(self, lq: str) -> float:
        """``sum_r weight_r * (consumed_r + penalty_r)``, before the LocalQueue's own weight."""
        consumed, penalty = self.consumed.get(lq, {}), self.penalty.get(lq, {})
        return sum(self.resource_weights.get(r, 1.0) * (consumed.get(r, 0.0) + penalty.get(r, 0.0))
                   for r in set(consumed) | set(penalty))

    def usage(self, lq: str, weight: float) -> float:
        if weight <= 0:
            return math.inf
        return self.weighted(lq) / weight


def afs_enabled(settings: Settings | None, cq: ClusterQueueSnapshot | api.ClusterQueueSpec) -> bool:
    spec = cq.spec if isinstance(cq, ClusterQueueSnapshot) else cq
    scope = spec.admission_scope
    return (settings is not None and settings.admission_fair_sharing is not None
            and gates.enabled(settings, "AdmissionFairSharing")
            and scope is not None and scope.admission_mode == "UsageBasedAdmissionFairSharing")


def seed_from(world: World) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for key, lq in world.local_queues.items():
        fs = lq.status.fair_sharing
        status = fs.admission_fair_sharing_status if fs is not None else None
        if status is not None and status.consumed_resources:
            out[key] = {r: parse(q) / 1000 for r, q in status.consumed_resources.items()}
    return out


def current_usage(world: World) -> dict[str, Usage]:
    """What each LocalQueue's admitted workloads hold now, per resource name."""
    out: dict[str, Usage] = {}
    for key, placed in world.placed.items():
        spec = world.workloads.get(key)
        if spec is None:
            continue
        used = out.setdefault(spec.local_queue, {})
        for (_, res), v in placed.usage.items():
            used[res] = used.get(res, 0.0) + v / 1000
    return out


def local_queue_weight(world: World, lq: str) -> float:
    obj = world.local_queues.get(lq)
    fs = obj.spec.fair_sharing if obj is not None else None
    if fs is None or fs.weight is None:
        return 1.0
    return parse(fs.weight) / 1000


class AdmissionFairSharing:
    """The coordinator's admission fair sharing: its ledger, on its clock, over its World.

    The coordinator makes one in its ``__init__``, calls :meth:`observe` once per round
    and :meth:`record_admission` after each committed admission, and hands it to the
    pending queues' ordering hook and to its preemptor factory.  The ledger is made
    when a ClusterQueue first uses admission fair sharing (seeded from the LocalQueues'
    status, sampling from that instant) and made afresh when the Configuration's
    ``admissionFairSharing`` changes value; it is dropped when the Configuration unsets it.

    ``epoch`` counts observations (rounds): a cache of anything admitted usage decides,
    such as the ``fair`` LocalQueue policy's, is good until it moves.
    """

    __slots__ = ("world", "clock", "_ledger", "epoch")

    def __init__(self, world: World, *, clock: Callable[[], float]) -> None:
        self.world = world
        self.clock = clock
        self._ledger: UsageLedger | None = None
        self.epoch = 0

    @property
    def ledger(self) -> UsageLedger | None:
        """The ledger for the current Configuration (made if missing or stale); None if AFS is unset."""
        config = self.world.settings.admission_fair_sharing
        if config is None:
            self._ledger = None
            return None
        if self._ledger is None or self._ledger.config != config:  # by value: re-applying the same one keeps history
            self._ledger = UsageLedger(config, now=self.clock(), seed=seed_from(self.world),
                                       held=current_usage(self.world))
        return self._ledger

    def in_use(self) -> bool:
        """Does some ClusterQueue use admission fair sharing under the current Configuration?"""
        settings = self.world.settings
        return settings.admission_fair_sharing is not None and any(
            afs_enabled(settings, cq.spec) for cq in self.world.cluster_queues.values())

    def observe(self) -> None:
        """Once per round, before its queues pop: take the samples due, record the usage held now."""
        self.epoch += 1
        if self._ledger is None and not self.in_use():
            return
        ledger = self.ledger
        if ledger is not None:
            ledger.observe(self.clock(), current_usage(self.world))

    def _usage(self, ledger: UsageLedger, lq: str) -> float:
        ledger.catch_up(self.clock())
        return ledger.usage(lq, local_queue_weight(self.world, lq))

    def usage_hook(self, cq: ClusterQueueSnapshot) -> Callable[[WorkloadInfo], float] | None:
        """The ``usage_of`` ordering hook for ``cq``'s pending queue, or None if AFS is off there."""
        if not afs_enabled(self.world.settings, cq):
            return None
        ledger = self.ledger
        if ledger is None:  # pragma: no cover - afs_enabled implies a config
            return None
        return lambda wl: self._usage(ledger, wl.local_queue)

    def record_admission(self, e: Entry) -> None:
        """A committed admission: its usage is held from now on and, where AFS applies, its
        entry penalty is pushed onto its LocalQueue."""
        if self._ledger is None and not self.in_use():
            return
        ledger = self.ledger
        if ledger is None:
            return
        ledger.catch_up(self.clock())
        if e.assignment is not None:
            ledger.hold(e.wl.local_queue, _units({res: v for (_, res), v in e.assignment.usage.items()}))
        cq = self.world.cluster_queues.get(e.cq)
        if cq is not None and afs_enabled(self.world.settings, cq.spec):
            ledger.add_penalty(e.wl.local_queue, _units(e.wl.total_requests()))

    def consumed_usage(self) -> tuple[dict[str, Usage], float] | None:
        """For the API layer: each LocalQueue's consumed usage (with the entry penalties not yet
        sampled) and the instant of the last sample, Kueue's ``admissionFairSharingStatus``
        ``consumedResources`` and ``lastUpdate``; None while the Configuration does not set
        ``admissionFairSharing``.  Kueue's LocalQueue controller keeps every LocalQueue's once it
        is set, whether or not its ClusterQueue orders by it yet."""
        if self.world.settings.admission_fair_sharing is None:
            return None
        ledger = self.ledger
        if ledger is None:  # pragma: no cover - in_use implies a config
            return None
        ledger.catch_up(self.clock())
        out: dict[str, Usage] = {}
        for lq in {*ledger.consumed, *ledger.penalty}:
            used = dict(ledger.consumed.get(lq, {}))
            for res, v in ledger.penalty.get(lq, {}).items():
                used[res] = used.get(res, 0.0) + v
            out[lq] = used
        return out, ledger.last_sample

    def local_queue_usage(self) -> Callable[[WorkloadInfo], float | None] | None:
        """For preemption ordering: an admitted workload's LocalQueue usage where AFS applies;
        None when no ClusterQueue uses admission fair sharing."""
        if self._ledger is None or not self.in_use():
            return None
        ledger = self.ledger
        if ledger is None:  # pragma: no cover - in_use implies a config
            return None
        settings = self.world.settings

        def usage(wl: WorkloadInfo) -> float | None:
            cq = self.world.cluster_queues.get(wl.cluster_queue or "")
            if cq is None or not afs_enabled(settings, cq.spec):
                return None
            return self._usage(ledger, wl.local_queue)
        return usage
