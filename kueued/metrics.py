"""Prometheus metrics of a running daemon, with Kueue's names so its dashboards carry over.

Where a number means what Kueue's does, it has Kueue's name and labels
(``pkg/metrics/metrics.go``): ``kueue_pending_workloads{cluster_queue,status}``,
``kueue_admitted_workloads_total``, ``kueue_cluster_queue_nominal_quota{cohort,cluster_queue,
flavor,resource}``, ...  What only kueued has is ``kueued_``: commit latency, watch restarts,
leadership, actor mailboxes, scheduling rounds.  Each :class:`Metrics` has its own registry
(tests make several); ``kueued.health`` serves it beside ``/healthz`` and ``/readyz``.

Where the numbers come from, all read between scheduling passes, never during a round:

- **Counters of commits** from the API port's ``counts`` (every port keeps them, by (kind,
  ClusterQueue, reason); ``kueued.kube.port.count_commit``), brought up to the port's totals
  after each pass, so only what reached the API counts.  kueued has no admission checks, so a
  quota reservation is an admission: ``kueue_quota_reserved_workloads_total`` and
  ``kueue_admitted_workloads_total`` move together, as ``reserving`` and ``admitted`` active
  workloads, ``resource_reservation`` and ``resource_usage``, and the two wait-time histograms do.
  Every eviction kueued writes is a preemption (``Evicted`` reason ``Preempted``), Kueue's
  ``reason`` label; the preemption's own reason (``InClusterQueue``, ...) labels
  ``kueue_preempted_workloads_total``.  A workload's first eviction with a given (reason, cause)
  is also counted as ``evict_once`` (``kueue_evicted_workloads_once_total``; on a cluster, from
  its ``status.schedulingStats``).
- **Per-decision numbers** the port cannot know (the preemptor's ClusterQueue, how long an
  admitted workload waited since its creation) from :class:`~kueued.metrics_recorder.DecisionRecorder`, which the
  daemon puts in front of the coordinator's Event recorder: the coordinator calls it for
  every committed admission and preemption, with a cluster or without.
- **Per-cycle numbers** the coordinator keeps until read: admission attempts and, per cycle that
  had any, the preemptors skipped because another entry took their victims (Kueue's
  ``skippedPreemptions``; as in Kueue only those queues are set, so a queue shows its last such cycle).
- **Gauges** from each ClusterQueue actor's statistics record (``Sample``), the quota forest
  (limits per (flavor, resource), whether a queue is active) and the World (a ClusterQueue
  with a ``deletionTimestamp`` is ``terminating``).
- ``kueue_build_info`` once, from the package metadata (:func:`build_labels`).
- **Per LocalQueue** (``kueue_local_queue_*``, while the LocalQueueMetrics gate is on) in
  :mod:`kueued.metrics_local_queue`, from the same sources.
- **kueued's own** from the port's ``timings`` (each admit/evict call, drained), the
  cluster source's per-kind ``restarts`` and ``relists``, the actors' mailboxes, the
  coordinators' round counts, and ``Health.leader``.

Amounts are in Kubernetes units (cores, bytes), as Kueue reports them; a limit that is not
set is ``+Inf`` (Kueue's cache does the same).  The series of a ClusterQueue that is gone
are removed, counters included (Kueue's ``ClearClusterQueueMetrics``): a ClusterQueue made
again starts from zero, which Prometheus reads as a counter reset.
"""

from __future__ import annotations

import importlib.metadata
import math
import platform
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kueued.kube.port import EVICTED_ONCE
from kueued.kube.workload_state import deactivation_cause
from kueued.native import compiled

if TYPE_CHECKING:
    from kueued.metrics_local_queue import LocalQueueMetrics
    from kueued.scheduling.snapshot import ClusterQueueSnapshot

__all__ = ["Metrics", "QueueSample", "WAIT_BUCKETS", "EVICTED_BY_PREEMPTION", "build_labels"]

WAIT_BUCKETS = (1.0, *(2.5 * 2 ** i for i in range(13)))
"""Kueue's ``generateExponentialBuckets(14)``: 1 s, then 2.5 s doubling up to about 2.8 hours."""

COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""One status write is milliseconds on a quiet API server and seconds on a throttled one."""

EVICTED_BY_PREEMPTION = "Preempted"
DRAINED = frozenset({"Deactivated", "ClusterQueueStopped", "LocalQueueStopped"})
"""Evictions that are not preemptions (``actors.drains``), counted under their own reason."""
"""The ``Evicted`` condition's reason on every eviction kueued writes (Kueue's WorkloadEvictedByPreemption)."""

def _eviction_labels(reason: str) -> tuple[str, str]:
    """(reason, underlying_cause) of an eviction, as Kueue reports it: a drain's reason is the Evicted
    condition's, a deactivation with a cause (``DeactivatedDueToX``) is ``Deactivated`` caused by ``X``,
    anything else a preemption's ``Preempted``."""
    base, cause = deactivation_cause(reason)
    return (base if base in DRAINED else EVICTED_BY_PREEMPTION), cause


CQ_STATUSES = ("pending", "active", "terminating")

BUILD_LABELS = ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform")
"""Kueue's ``kueue_build_info`` labels (``version.Get()``)."""


def build_labels() -> dict[str, str]:
    """What kueued can say for each of Kueue's build labels: its version from the package metadata
    (``v`` first, as Kueue's git tags), the interpreter as ``compiler`` (``+ mypyc`` when the engine's
    hot modules run compiled: :mod:`kueued.native`) and ``os/arch`` as Go spells it; no git commit,
    build date or Go version is recorded in a Python package, so those are empty."""
    try:
        version = "v" + importlib.metadata.version("kueued")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        version = ""
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return {"git_version": version, "git_commit": "", "build_date": "", "go_version": "",
            "compiler": f"{platform.python_implementation()} {platform.python_version()}"
                        + (" + mypyc" if compiled() else ""),
            "platform": f"{sys.platform}/{machine}"}


class QueueSample:
    """What one ClusterQueue actor reports: heap, parked, admitted and usage per (flavor, resource);
    when asked, per LocalQueue ``ns/name`` too: (heap, parked) (``local_queues``) and its admitted
    workloads here, (how many, their usage) (``holdings``).  ``changes``: the actor's count of
    messages handled that may have changed it, when it answered (``Actor.changes``,
    ``Actor.unchanged_since``: whether the answer still holds)."""

    __slots__ = ("name", "active", "inadmissible", "admitted", "usage", "mailbox", "local_queues", "holdings",
                 "changes")

    def __init__(self, name: str, *, active: int, inadmissible: int, admitted: int,
                 usage: dict[tuple[str, str], int], mailbox: int,
                 local_queues: dict[str, tuple[int, int]] | None = None,
                 holdings: dict[str, tuple[int, dict[tuple[str, str], int]]] | None = None,
                 changes: int = -1) -> None:
        self.name = name
        self.active = active
        self.inadmissible = inadmissible
        self.admitted = admitted
        self.usage = usage
        self.mailbox = mailbox
        self.local_queues = local_queues or {}
        self.holdings = holdings or {}
        self.changes = changes


class _Series:
    """The label sets this process gave one metric, so that those no longer reported can go.

    A gauge also remembers the value it was given: each round reports every queue's gauges,
    and on a large tree most have not moved, so only what moved reaches the client library
    (its ``labels(...).set`` was a tenth of the daemon's CPU through the API server)."""

    __slots__ = ("metric", "live", "groups")

    def __init__(self, metric: Any) -> None:  # a labelled Gauge, Counter or Histogram
        self.metric = metric
        self.live: dict[tuple[str, ...], float | None] = {}  # labels -> the gauge's value (None: not a gauge's)
        self.groups: dict[str, dict[tuple[str, ...], float]] = {}  # replace_group's: group -> its series

    def replace(self, values: Mapping[tuple[str, ...], float]) -> None:
        """A gauge: exactly these series, with these values."""
        live = self.live
        for labels, value in values.items():
            if live.get(labels) != value:
                self.metric.labels(*labels).set(value)
        for labels in live.keys() - values.keys():
            self.metric.remove(*labels)
        self.live = dict(values)

    def replace_group(self, group: str, values: Mapping[tuple[str, ...], float]) -> None:
        """A gauge whose series fall into groups (one a queue: its name is in each of their labels):
        exactly these series for ``group``, with these values; the other groups' are left as they are."""
        live, old = self.live, self.groups.get(group, {})
        for labels, value in values.items():
            if live.get(labels) != value:
                self.metric.labels(*labels).set(value)
                live[labels] = value
        for labels in old.keys() - values.keys():
            self.metric.remove(*labels)
            del live[labels]
        if values:
            self.groups[group] = dict(values)
        else:
            self.groups.pop(group, None)

    def child(self, *labels: str) -> Any:
        self.live.setdefault(labels, None)
        return self.metric.labels(*labels)

    def forget(self, keep: Callable[[tuple[str, ...]], bool]) -> None:
        for labels in [ls for ls in self.live if not keep(ls)]:
            self.metric.remove(*labels)
            del self.live[labels]


def _units(milli: int | None) -> float:
    return math.inf if milli is None else milli / 1000


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._add_workload_families(self.registry)
        self._add_quota_families(self.registry)
        self._add_own_families(self.registry)
        self._seen: dict[tuple[str, str, str], int] = {}
        self._watch_seen: dict[tuple[str, str], int] = {}
        self.local_queues: LocalQueueMetrics | None = None  # while LocalQueueMetrics is on (kueued.metrics_local_queue)
        # observe_queues': each ClusterQueue's snapshot, sample and status when its series were last worked out
        self._queues: dict[str, tuple[ClusterQueueSnapshot, QueueSample | None, str]] = {}

    # --- the families ----------------------------------------------------------------------------
    def _add_workload_families(self, r: CollectorRegistry) -> None:
        """Kueue's names: workloads pending, admitted, evicted, preempted, per ClusterQueue."""
        cq = ["cluster_queue"]
        self.pending = _Series(Gauge(
            "kueue_pending_workloads", "The number of pending workloads, per 'cluster_queue' and 'status' "
            "(active: in the admission queue; inadmissible: parked until the cluster changes)",
            ["cluster_queue", "status"], registry=r))
        self.admitted = _Series(Counter(
            "kueue_admitted_workloads", "The total number of admitted workloads per 'cluster_queue'", cq, registry=r))
        self.quota_reserved = _Series(Counter(
            "kueue_quota_reserved_workloads", "The total number of quota reserved workloads per 'cluster_queue'",
            cq, registry=r))
        self.admission_wait = _Series(Histogram(
            "kueue_admission_wait_time_seconds", "The time between a workload was created until admission, "
            "per 'cluster_queue'", cq, buckets=WAIT_BUCKETS, registry=r))
        self.quota_reserved_wait = _Series(Histogram(
            "kueue_quota_reserved_wait_time_seconds", "The time between a workload was created or requeued "
            "until it got quota reservation, per 'cluster_queue'", cq, buckets=WAIT_BUCKETS, registry=r))
        self.evicted = _Series(Counter(
            "kueue_evicted_workloads", "The number of evicted workloads per 'cluster_queue', 'reason' "
            "(Preempted: to make room for another workload) and 'underlying_cause' (why a workload was "
            "deactivated, e.g. MaximumExecutionTimeExceeded)", ["cluster_queue", "reason", "underlying_cause"],
            registry=r))
        self.evicted_once = _Series(Counter(
            "kueue_evicted_workloads_once_total", "The number of unique workload evictions per 'cluster_queue', "
            "'reason' and 'underlying_cause' (as kueue_evicted_workloads_total): a workload counts once per "
            "(reason, underlying_cause), its first such eviction (status.schedulingStats.evictions)",
            ["cluster_queue", "reason", "underlying_cause"], registry=r))
        self.preempted = _Series(Counter(
            "kueue_preempted_workloads", "The number of preempted workloads per 'preempting_cluster_queue' and "
            "'reason' (InClusterQueue, InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing)",
            ["preempting_cluster_queue", "reason"], registry=r))
        self.admitted_active = _Series(Gauge(
            "kueue_admitted_active_workloads", "The number of admitted Workloads that are active (unsuspended "
            "and not finished), per 'cluster_queue'", cq, registry=r))
        self.reserving_active = _Series(Gauge(
            "kueue_reserving_active_workloads", "The number of Workloads that are reserving quota, "
            "per 'cluster_queue'", cq, registry=r))
        self.preemption_skips = _Series(Gauge(
            "kueue_admission_cycle_preemption_skips", "The number of Workloads in the ClusterQueue that got "
            "preemption candidates but had to be skipped because other ClusterQueues needed the same resources "
            "in the same cycle (the last cycle that skipped any of its Workloads)", cq, registry=r))

    def _add_quota_families(self, r: CollectorRegistry) -> None:
        """Kueue's names: each ClusterQueue's usage, reservation, quota and limits per flavor, and its status."""
        quota = ["cohort", "cluster_queue", "flavor", "resource"]
        self.usage = _Series(Gauge(
            "kueue_cluster_queue_resource_usage", "Reports the cluster_queue's total resource usage within all "
            "the flavors", quota, registry=r))
        self.reservation = _Series(Gauge(
            "kueue_cluster_queue_resource_reservation", "Reports the cluster_queue's total resource reservation "
            "within all the flavors", quota, registry=r))
        self.nominal = _Series(Gauge(
            "kueue_cluster_queue_nominal_quota", "Reports the cluster_queue's resource nominal quota within all "
            "the flavors", quota, registry=r))
        self.borrowing_limit = _Series(Gauge(
            "kueue_cluster_queue_borrowing_limit", "Reports the cluster_queue's resource borrowing limit within "
            "all the flavors (+Inf: none)", quota, registry=r))
        self.lending_limit = _Series(Gauge(
            "kueue_cluster_queue_lending_limit", "Reports the cluster_queue's resource lending limit within all "
            "the flavors (+Inf: none)", quota, registry=r))
        self.subtree_quota = _Series(Gauge(
            "kueue_cohort_subtree_quota", "Reports the cohort's subtree quota: its own nominal quota and what "
            "its children lend it, per 'flavor' and 'resource'", ["cohort", "flavor", "resource"], registry=r))
        self.cq_share = _Series(Gauge(
            "kueue_cluster_queue_weighted_share", "Reports the cluster_queue's weighted share of the resources "
            "it borrows (status.fairSharing.weightedShare); with fair sharing on", ["cluster_queue"], registry=r))
        self.cohort_share = _Series(Gauge(
            "kueue_cohort_weighted_share", "Reports the cohort's weighted share of the resources it borrows "
            "(status.fairSharing.weightedShare); with fair sharing on", ["cohort"], registry=r))
        self.status = _Series(Gauge(
            "kueue_cluster_queue_status", "Reports 'cluster_queue' with its 'status' (pending, active or "
            "terminating); 1 for the current one", ["cluster_queue", "status"], registry=r))

    def _add_own_families(self, r: CollectorRegistry) -> None:
        """kueued's own: commits, watches, leadership, mailboxes, rounds."""
        self.commit_duration = Histogram(
            "kueued_commit_duration_seconds", "Time one admission or eviction took to write through the API port, "
            "per 'kind' (admit, evict), refused writes included", ["kind"], buckets=COMMIT_BUCKETS, registry=r)
        self.watch_restarts = Counter(
            "kueued_watch_restarts", "Watches re-opened for any reason but the server's timeout, per 'kind'",
            ["kind"], registry=r)
        self.watch_relists = Counter(
            "kueued_watch_relists", "Lists after a kind's first one (a resourceVersion too old), per 'kind'",
            ["kind"], registry=r)
        self.leader = Gauge("kueued_leader", "1 while this process commits decisions (the leader), else 0",
                            registry=r)
        self.mailbox = _Series(Gauge(
            "kueued_actor_mailbox_depth", "Messages waiting in an actor's mailbox, per 'actor' "
            "(ClusterQueue/NAME, Cohort/NAME, ElasticQuota/NAME)", ["actor"], registry=r))
        self.rounds = Counter("kueued_scheduling_rounds", "Scheduling rounds run (both coordinators)", registry=r)
        self.attempts = Counter(
            "kueue_admission_attempts", "The number of attempts to admit workloads (a scheduling cycle with "
            "heads to judge), per 'result' (success: one was admitted at least; inadmissible: none)",
            ["result"], registry=r)
        self.attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds", "The latency of an admission attempt (a scheduling "
            "cycle), per 'result'", ["result"], registry=r)
        self.build_info = Gauge(
            "kueue_build_info", "Kueue build information. 1 labeled by git version, git commit, build date, go "
            "version, compiler, platform (kueued: its package version, the Python that runs it, the platform; "
            "empty where a Python package has no such fact)", list(BUILD_LABELS), registry=r)
        self.build_info.labels(*build_labels().values()).set(1)

    # --- gauges --------------------------------------------------------------------------------------
    def observe_queues(self, samples: Iterable[QueueSample], tree: Mapping[str, ClusterQueueSnapshot], *,
                       terminating: Collection[str] = ()) -> None:
        """Every ClusterQueue of the quota forest (``tree``), with what its actor reported (``samples``);
        the series of a queue, flavor or resource no longer there are removed.

        A queue's series are worked out again only when its sample or its snapshot is another object
        than last time, or its status moved: the gauges' refresh reuses the sample of a queue that
        handled nothing since (``actors.observe``), and on a large tree most queues have not moved."""
        by_name = {s.name: s for s in samples}
        seen = self._queues
        for name, cq in tree.items():
            current = "terminating" if name in terminating else "active" if cq.active else "pending"
            sample = by_name.get(name)
            last = seen.get(name)
            if last is not None and last[0] is cq and last[1] is sample and last[2] == current:
                continue
            seen[name] = (cq, sample, current)
            self._observe_queue(name, cq, sample, current)
        for name in [n for n in seen if n not in tree]:
            del seen[name]
            for series in self._queue_series():
                series.replace_group(name, {})

    def _queue_series(self) -> tuple[_Series, ...]:
        return (self.pending, self.admitted_active, self.reserving_active, self.status, self.usage,
                self.reservation, self.nominal, self.borrowing_limit, self.lending_limit)

    def _observe_queue(self, name: str, cq: ClusterQueueSnapshot, sample: QueueSample | None, current: str) -> None:
        """One ClusterQueue's series (``observe_queues``)."""
        pending: dict[tuple[str, ...], float] = {}
        active: dict[tuple[str, ...], float] = {}
        status: dict[tuple[str, ...], float] = {}
        usage: dict[tuple[str, ...], float] = {}
        nominal: dict[tuple[str, ...], float] = {}
        borrowing: dict[tuple[str, ...], float] = {}
        lending: dict[tuple[str, ...], float] = {}
        for s in CQ_STATUSES:
            status[(name, s)] = 1.0 if s == current else 0.0
        cohort = cq.spec.cohort_name or ""
        used = sample.usage if sample is not None else {}
        if sample is not None and cq.active:
            pending[(name, "active")] = sample.active
            pending[(name, "inadmissible")] = sample.inadmissible
        elif sample is not None:  # an inactive queue admits nothing: all of it waits (reportPendingWorkloads)
            pending[(name, "active")] = 0
            pending[(name, "inadmissible")] = sample.active + sample.inadmissible
        if sample is not None:
            active[(name,)] = sample.admitted
        for fr in cq.node.limits.keys() | used.keys():
            labels = (cohort, name, *fr)
            usage[labels] = used.get(fr, 0) / 1000
        for fr, lim in cq.node.limits.items():
            labels = (cohort, name, *fr)
            nominal[labels] = _units(lim.nominal)
            borrowing[labels] = _units(lim.borrowing_limit)
            lending[labels] = _units(lim.lending_limit)
        self.pending.replace_group(name, pending)
        self.admitted_active.replace_group(name, active)
        self.reserving_active.replace_group(name, active)  # no admission checks: reserving is admitted
        self.status.replace_group(name, status)
        self.usage.replace_group(name, usage)
        self.reservation.replace_group(name, usage)
        self.nominal.replace_group(name, nominal)
        self.borrowing_limit.replace_group(name, borrowing)
        self.lending_limit.replace_group(name, lending)

    def observe_cohorts(self, cohorts: Mapping[str, Any]) -> None:
        """Each Cohort's subtree quota (``Snapshot.cohorts``: its node's ``subtree``, milli-units)."""
        self.subtree_quota.replace({(name, *fr): v / 1000 for name, co in cohorts.items()
                                    for fr, v in co.node.subtree.items()})

    def observe_shares(self, cluster_queues: Mapping[str, int], cohorts: Mapping[str, int]) -> None:
        """Fair sharing's weighted shares, as the queues' status shows them ({} when it is off)."""
        self.cq_share.replace({(name,): float(v) for name, v in cluster_queues.items()})
        self.cohort_share.replace({(name,): float(v) for name, v in cohorts.items()})

    def observe_attempts(self, attempts: Iterable[tuple[bool, float]]) -> None:
        """Scheduling cycles that had heads to judge: (whether one was admitted, seconds it took)."""
        for admitted, seconds in attempts:
            result = "success" if admitted else "inadmissible"
            self.attempts.labels(result).inc()
            self.attempt_duration.labels(result).observe(seconds)

    def observe_mailboxes(self, depths: Mapping[str, int]) -> None:
        self.mailbox.replace({(actor,): depth for actor, depth in depths.items()})

    # --- counters --------------------------------------------------------------------------------------
    def observe_commits(self, counts: Mapping[tuple[str, str, str], int]) -> None:
        """Bring the counters up to the port's commit counts (``ApiPort.counts``; any port)."""
        for key, total in list(counts.items()):
            delta = total - self._seen.get(key, 0)
            if delta <= 0:
                continue
            kind, cluster_queue, _reason = key
            if kind == "admit":
                self.admitted.child(cluster_queue).inc(delta)
                self.quota_reserved.child(cluster_queue).inc(delta)
            elif kind == "evict":
                self.evicted.child(cluster_queue, *_eviction_labels(_reason)).inc(delta)
            elif kind == EVICTED_ONCE:
                self.evicted_once.child(cluster_queue, *_eviction_labels(_reason)).inc(delta)
            self._seen[key] = total

    def observe_timings(self, timings: Iterable[tuple[str, float]]) -> None:
        """(kind, seconds) of each commit call since the last time (the port's ``timings``)."""
        for kind, seconds in timings:
            self.commit_duration.labels(kind).observe(seconds)

    def observe_watches(self, restarts: Mapping[str, int], relists: Mapping[str, int]) -> None:
        """Up to the cluster source's per-kind totals; every kind watched has its series, 0 included."""
        for counter, what, totals in ((self.watch_restarts, "restarts", restarts),
                                      (self.watch_relists, "relists", relists)):
            for kind, total in list(totals.items()):
                seen = self._watch_seen.get((what, kind), 0)
                counter.labels(kind).inc(max(0, total - seen))
                self._watch_seen[(what, kind)] = max(total, seen)

    def admission(self, cluster_queue: str, waited: float) -> None:
        """No admission checks: the quota reservation is the admission, both waited as long."""
        self.quota_reserved_wait.child(cluster_queue).observe(max(0.0, waited))
        self.admission_wait.child(cluster_queue).observe(max(0.0, waited))

    def observe_preemption_skips(self, cycles: Iterable[Mapping[str, int]]) -> None:
        """Per cycle, the ClusterQueues whose preemptors were skipped and how many (Kueue's
        ``reportSkippedPreemptions``: only those are set, so a queue shows its last such cycle)."""
        for skips in cycles:
            for cluster_queue, count in skips.items():
                self.preemption_skips.child(cluster_queue).set(count)

    def preemption(self, preempting_cluster_queue: str, reason: str) -> None:
        self.preempted.child(preempting_cluster_queue, reason).inc()

    def forget(self, names: Collection[str]) -> None:
        """Drop the counters' series of every queue not in ``names`` (ClusterQueues and ElasticQuotas
        that exist); the gauges follow ``observe_queues``."""
        for series in (self.admitted, self.quota_reserved, self.admission_wait, self.quota_reserved_wait,
                       self.evicted, self.evicted_once, self.preempted, self.preemption_skips):
            series.forget(lambda labels: labels[0] in names)
