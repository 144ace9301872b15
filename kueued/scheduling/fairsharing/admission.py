"""Admission fair sharing (KEP-4136): order a ClusterQueue's queue by its tenants' usage.

A ClusterQueue with ``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing``
serves its LocalQueues by how much each has consumed lately, when the Configuration
sets ``admissionFairSharing`` and the gate AdmissionFairSharing is on (Kueue's
``pkg/util/admissionfairsharing``, ``pkg/cache/queue/afs``):

* each LocalQueue's *consumed* usage is an exponential moving average, seeded from
  ``status.fairSharing.admissionFairSharingStatus.consumedResources`` (taken as current
  when the engine starts) and updated every ``usageSamplingInterval`` of engine time:
  ``consumed = consumed * (1 - a) + current * a`` with ``a = 1 - 0.5 ** (dt / halfLife)``,
  ``current`` being what the LocalQueue's admitted workloads hold now;
* every admission pushes an *entry penalty*, the workload's total requests times
  ``a(usageSamplingInterval)``, onto its LocalQueue at once, so the next pick in the
  same burst prefers another tenant; the next sample folds penalties into consumed;
* a LocalQueue's usage is ``sum_r resourceWeights[r] (default 1) * (consumed + penalty)``
  in resource units, divided by ``spec.fairSharing.weight`` (default 1); a weight of 0
  or less makes it +Inf, so such a queue goes last.

Pending workloads of such a ClusterQueue are ordered by their LocalQueue's usage, then
priority, then creation time (``PendingQueue(usage_of=...)``).  Preemption uses the
same usage to prefer victims of busier LocalQueues within one ClusterQueue.

Defaults.  Kueue defaults ``usageHalfLifeTime`` to 0, where ``a`` is 0: no penalty and
no decay, so consumed usage never changes and AFS stops reacting to admissions.  Here
an unset (or zero) half-life means :data:`DEFAULT_HALF_LIFE`, one week, the value
Kueue's documentation uses; the sampling interval defaults to Kueue's 5 minutes.

State.  Each engine owns one :class:`AdmissionFairSharing` (its World, its clock, its
ledger); nothing here is module-level, so two engines in one process never share
usage.  The engine calls :meth:`~AdmissionFairSharing.usage_hook` when it builds a
ClusterQueue's queue, :meth:`~AdmissionFairSharing.record_admission` after each
admission, and hands the object to its preemptor factory for
:meth:`~AdmissionFairSharing.local_queue_usage`.
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
           "afs_enabled"]

DEFAULT_HALF_LIFE = 7 * 24 * 3600.0
"""Seconds; used when the Configuration leaves ``usageHalfLifeTime`` unset or 0."""

DEFAULT_SAMPLING_INTERVAL = 300.0
"""Seconds; Kueue's default ``usageSamplingInterval``."""

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


class UsageLedger:
    """Per LocalQueue: decayed consumed usage and entry penalties not yet sampled."""

    def __init__(self, config: api.AdmissionFairSharingConfig, *, now: float,
                 seed: Mapping[str, Usage] | None = None) -> None:
        self.config = config
        self.half_life = _duration(config.usage_half_life_time, DEFAULT_HALF_LIFE)
        self.sampling = _duration(config.usage_sampling_interval, DEFAULT_SAMPLING_INTERVAL)
        self.resource_weights = dict(config.resource_weights)
        self.consumed: dict[str, Usage] = {k: dict(v) for k, v in (seed or {}).items()}
        self.penalty: dict[str, Usage] = {}
        self.last_sample = now

    @property
    def entry_alpha(self) -> float:
        return alpha(self.sampling, self.half_life)

    def add_penalty(self, lq: str, requests: Mapping[str, float]) -> None:
        a = self.entry_alpha
        pending = self.penalty.setdefault(lq, {})
        for r, v in requests.items():
            pending[r] = pending.get(r, 0.0) + v * a

    def advance(self, now: float, current: Callable[[], Mapping[str, Usage]]) -> bool:
        """Sample if a sampling interval has passed since the last sample; True if it did."""
        elapsed = now - self.last_sample
        if elapsed < self.sampling:
            return False
        self.sample(current(), elapsed=elapsed)
        self.last_sample = now
        return True

    def sample(self, current: Mapping[str, Usage], *, elapsed: float) -> None:
        """Decay consumed usage towards what is held now, then fold the entry penalties in (Kueue adds
        them to the consumed usage at the sample and takes them off the pending penalties)."""
        a = alpha(elapsed, self.half_life)
        for lq in set(self.consumed) | set(current) | set(self.penalty):
            old, now_used, penalty = self.consumed.get(lq, {}), current.get(lq, {}), self.penalty.get(lq, {})
            self.consumed[lq] = {r: old.get(r, 0.0) * (1 - a) + now_used.get(r, 0.0) * a + penalty.get(r, 0.0)
                                 for r in set(old) | set(now_used) | set(penalty)}
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
    for wl in world.workloads.values():
        if not wl.admitted:
            continue
        used = out.setdefault(wl.local_queue, {})
        for (_, res), v in wl.usage.items():
            used[res] = used.get(res, 0.0) + v / 1000
    return out


def local_queue_weight(world: World, lq: str) -> float:
    obj = world.local_queues.get(lq)
    fs = obj.spec.fair_sharing if obj is not None else None
    if fs is None or fs.weight is None:
        return 1.0
    return parse(fs.weight) / 1000


class AdmissionFairSharing:
    """One engine's admission fair sharing: its ledger, on its clock, over its World.

    Each engine (the sync :class:`~kueued.engine.sync.Engine`, the actors'
    coordinator) makes one in its ``__init__`` and hands it to whatever needs LocalQueue
    usage: the pending queues' ordering hook, the fair-sharing preemptor, and its own
    admission step.  The ledger is made on first use (seeded from the LocalQueues'
    status, sampling from that instant) and made afresh when the Configuration's
    ``admissionFairSharing`` changes; it is dropped when the Configuration unsets it.
    """

    __slots__ = ("world", "clock", "_ledger")

    def __init__(self, world: World, *, clock: Callable[[], float]) -> None:
        self.world = world
        self.clock = clock
        self._ledger: UsageLedger | None = None

    @property
    def ledger(self) -> UsageLedger | None:
        """The ledger for the current Configuration (made if missing or stale); None if AFS is unset."""
        config = self.world.settings.admission_fair_sharing
        if config is None:
            self._ledger = None
            return None
        if self._ledger is None or self._ledger.config != config:  # by value: re-applying the same one keeps history
            self._ledger = UsageLedger(config, now=self.clock(), seed=seed_from(self.world))
        return self._ledger

    def _usage(self, ledger: UsageLedger, lq: str) -> float:
        ledger.advance(self.clock(), lambda: current_usage(self.world))
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
        """Push the entry penalty of an admitted workload onto its LocalQueue."""
        cq = self.world.cluster_queues.get(e.cq)
        if cq is None or not afs_enabled(self.world.settings, cq.spec):
            return
        ledger = self.ledger
        if ledger is not None:
            ledger.add_penalty(e.wl.local_queue, _units(e.wl.total_requests()))

    def local_queue_usage(self) -> Callable[[WorkloadInfo], float | None] | None:
        """For preemption ordering: an admitted workload's LocalQueue usage where AFS applies.

        None until a queue hook or an admission has made the ledger: preemption reads
        usage, it does not start the sampling clock.
        """
        settings = self.world.settings
        ledger = self._ledger
        if settings.admission_fair_sharing is None or ledger is None:
            return None

        def usage(wl: WorkloadInfo) -> float | None:
            cq = self.world.cluster_queues.get(wl.cluster_queue or "")
            if cq is None or not afs_enabled(settings, cq.spec):
                return None
            return self._usage(ledger, wl.local_queue)
        return usage
