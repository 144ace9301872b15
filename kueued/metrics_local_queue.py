"""Kueue's ``kueue_local_queue_*`` metrics, exported while the LocalQueueMetrics gate is on.

Kueue registers these families at start-up when the gate is on (beta, on by default since 0.17;
``pkg/metrics/metrics.go``'s ``RegisterLQMetrics``) and labels each series with the LocalQueue's
``name`` and ``namespace``.  kueued reads the gate from the running Configuration's
``featureGates`` (``Settings.feature_gates``, Kueue's default and ``AllBeta`` for what it leaves
out) each time it reports, so a reload that turns the gate off takes the families out of the
registry, and one that turns it on puts them back, from zero.

Where the numbers come from (the ClusterQueue families' notes in :mod:`kueued.metrics` hold):

- **Counters** from :class:`~kueued.metrics_recorder.DecisionRecorder`, which sees every committed
  admission and eviction with the Workload's manifest: its ``metadata.namespace`` and
  ``spec.queueName`` are the LocalQueue (Kueue's ``LQRefFromWorkload``).  Without admission checks
  a quota reservation is the admission, so ``quota_reserved`` and ``admitted`` move together, as
  their wait-time histograms do.  An eviction's ``reason`` and ``underlying_cause`` are the
  ClusterQueue family's.
- **Gauges** after a round, as the queues' status says them (:mod:`kueued.kube.tree_status`):
  reserving and admitted workloads and their usage per (flavor, resource) of the LocalQueue's own
  ClusterQueue, ``local_queue_status`` from the LocalQueue's ``Active`` condition.  Pending
  workloads are split as each ClusterQueue actor holds them (heap: ``active``; parked:
  ``inadmissible``; all ``inadmissible`` while the ClusterQueue is inactive, Kueue's
  ``reportLQPendingWorkloads``); a stopped LocalQueue's count nowhere, as in its status.

Not exported: the admission-check and PodsReady wait times (kueued has neither), and Kueue's
newer ``priority_class`` and ``replica_role`` labels (the ClusterQueue families lack them too).
The series of a LocalQueue that is gone are removed, counters included (Kueue's
``ClearLocalQueueMetrics``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kueued.kube.tree_status import covered, local_queue_active
from kueued.metrics import WAIT_BUCKETS, Metrics, QueueSample, _eviction_labels, _Series
from kueued.model.validation.configuration_gates import gates_of

if TYPE_CHECKING:
    from kueued.model.settings import Settings
    from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
    from kueued.world import World

__all__ = ["GATE", "LocalQueueMetrics", "gated", "enabled"]

GATE = "LocalQueueMetrics"
LQ_STATUSES = ("True", "False", "Unknown")
"""Kueue's ``ConditionStatusValues``: ``local_queue_status`` has one series of each, one of them 1."""

_EVICTION_HELP = (
    "The number of evicted workloads per 'local_queue', 'reason' (Preempted: to make room for another "
    "workload; ClusterQueueStopped, LocalQueueStopped, Deactivated: drained) and 'underlying_cause' (why a "
    "workload was deactivated, e.g. MaximumExecutionTimeExceeded)")


def enabled(settings: Settings) -> bool:
    """Whether the running Configuration turns the LocalQueueMetrics gate on (module notes)."""
    return gates_of(settings.feature_gates)(GATE)


def gated(metrics: Metrics, on: bool) -> LocalQueueMetrics | None:
    """The LocalQueue families of ``metrics`` when the gate is ``on`` (registered the first time),
    else None (and unregistered, if they were)."""
    lq = metrics.local_queues
    if on and lq is None:
        lq = LocalQueueMetrics(metrics.registry)
    elif not on and lq is not None:
        lq.unregister()
        lq = None
    metrics.local_queues = lq
    return lq


class LocalQueueMetrics:
    """The families, registered in the daemon's registry on creation."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = r = registry
        lq = ["name", "namespace"]
        self.pending = _Series(Gauge(
            "kueue_local_queue_pending_workloads", "The number of pending workloads, per 'local_queue' and "
            "'status' (active: in the admission queue; inadmissible: parked until the cluster changes)",
            [*lq, "status"], registry=r))
        self.quota_reserved = _Series(Counter(
            "kueue_local_queue_quota_reserved_workloads", "The total number of quota reserved workloads per "
            "'local_queue'", lq, registry=r))
        self.quota_reserved_wait = _Series(Histogram(
            "kueue_local_queue_quota_reserved_wait_time_seconds", "The time between a workload was created or "
            "requeued until it got quota reservation, per 'local_queue'", lq, buckets=WAIT_BUCKETS, registry=r))
        self.admitted = _Series(Counter(
            "kueue_local_queue_admitted_workloads", "The total number of admitted workloads per 'local_queue'",
            lq, registry=r))
        self.admission_wait = _Series(Histogram(
            "kueue_local_queue_admission_wait_time_seconds", "The time between a workload was created or "
            "requeued until admission, per 'local_queue'", lq, buckets=WAIT_BUCKETS, registry=r))
        self.evicted = _Series(Counter(
            "kueue_local_queue_evicted_workloads", _EVICTION_HELP, [*lq, "reason", "underlying_cause"], registry=r))
        self.reserving_active = _Series(Gauge(
            "kueue_local_queue_reserving_active_workloads", "The number of Workloads that are reserving quota, "
            "per 'localQueue'", lq, registry=r))
        self.admitted_active = _Series(Gauge(
            "kueue_local_queue_admitted_active_workloads", "The number of admitted Workloads that are active "
            "(unsuspended and not finished), per 'localQueue'", lq, registry=r))
        self.status = _Series(Gauge(
            "kueue_local_queue_status", "Reports 'localQueue' with its 'active' status (with possible values "
            "'True', 'False', or 'Unknown'). For a LocalQueue, the metric only reports a value of 1 for one of "
            "the statuses.", [*lq, "active"], registry=r))
        self.reservation = _Series(Gauge(
            "kueue_local_queue_resource_reservation", "Reports the localQueue's total resource reservation "
            "within all the flavors", [*lq, "flavor", "resource"], registry=r))
        self.usage = _Series(Gauge(
            "kueue_local_queue_resource_usage", "Reports the localQueue's total resource usage within all the "
            "flavors", [*lq, "flavor", "resource"], registry=r))
        # observe's: each LocalQueue, its ClusterQueue's snapshot and sample, and its status, when its
        # series were last worked out
        self._seen: dict[str, tuple[Any, ClusterQueueSnapshot | None, QueueSample | None, str]] = {}
        self._all = (self.pending, self.quota_reserved, self.quota_reserved_wait, self.admitted,
                     self.admission_wait, self.evicted, self.reserving_active, self.admitted_active,
                     self.status, self.reservation, self.usage)

    def unregister(self) -> None:
        for series in self._all:
            self.registry.unregister(series.metric)

    # --- counters (DecisionRecorder) --------------------------------------------------------------------
    def admission(self, workload: Mapping[str, Any], waited: float) -> None:
        """A committed admission: no admission checks, so the reservation is the admission, both waited as long."""
        labels = _local_queue_of(workload)
        if labels is None:
            return
        self.quota_reserved.child(*labels).inc()
        self.admitted.child(*labels).inc()
        self.quota_reserved_wait.child(*labels).observe(max(0.0, waited))
        self.admission_wait.child(*labels).observe(max(0.0, waited))

    def eviction(self, workload: Mapping[str, Any], reason: str) -> None:
        """A committed eviction, with its Evicted condition's reason (``Preempted`` for a preemption)."""
        labels = _local_queue_of(workload)
        if labels is not None:
            self.evicted.child(*labels, *_eviction_labels(reason)).inc()

    # --- gauges ---------------------------------------------------------------------------------------
    def observe(self, world: World, snapshot: Snapshot, samples: Iterable[QueueSample]) -> None:
        """Every LocalQueue of the World; ``snapshot`` gives the ClusterQueues' specs and whether each
        is active (the coordinator's forest: no balances read), ``samples`` each ClusterQueue's pending
        and admitted workloads per LocalQueue (``Sample(local_queues=True)``).

        A LocalQueue's series are worked out again only when it, its ClusterQueue's snapshot or
        sample is another object than last time, or its status moved (as ``Metrics.observe_queues``)."""
        by_name = {s.name: s for s in samples}
        seen = self._seen
        for key, lq in world.local_queues.items():
            cq_name = lq.spec.cluster_queue
            cq = snapshot.cluster_queues.get(cq_name)
            current = local_queue_active(world, snapshot, lq).status
            sample = by_name.get(cq_name)
            last = seen.get(key)
            if last is not None and last[0] is lq and last[1] is cq and last[2] is sample and last[3] == current:
                continue
            seen[key] = (lq, cq, sample, current)
            self._observe_one(key, lq, cq, sample, current)
        for key in [k for k in seen if k not in world.local_queues]:
            del seen[key]
            for series in (self.pending, self.reserving_active, self.admitted_active, self.status,
                           self.reservation, self.usage):
                series.replace_group(key, {})

    def _observe_one(self, key: str, lq: Any, cq: ClusterQueueSnapshot | None, sample: QueueSample | None,
                     current: str) -> None:
        """One LocalQueue's series (:meth:`observe`)."""
        pending: dict[tuple[str, ...], float] = {}
        held: dict[tuple[str, ...], float] = {}
        status: dict[tuple[str, ...], float] = {}
        usage: dict[tuple[str, ...], float] = {}
        labels = (lq.metadata.name, lq.metadata.namespace)
        for s in LQ_STATUSES:
            status[(*labels, s)] = 1.0 if s == current else 0.0
        active, parked = (0, 0)
        if sample is not None and lq.spec.stop_policy in ("", "None"):
            active, parked = sample.local_queues.get(key, (0, 0))
            if cq is not None and not cq.active:  # an inactive queue admits nothing: all of it waits
                active, parked = 0, active + parked
        pending[(*labels, "active")] = active
        pending[(*labels, "inadmissible")] = parked
        count, used = (sample.holdings.get(key) if sample is not None else None) or (0, {})
        held[labels] = count
        if cq is not None:
            for fr in covered(cq.spec.resource_groups):
                usage[(*labels, *fr)] = used.get(fr, 0) / 1000
        self.pending.replace_group(key, pending)
        self.reserving_active.replace_group(key, held)
        self.admitted_active.replace_group(key, held)  # no admission checks: reserving is admitted
        self.status.replace_group(key, status)
        self.reservation.replace_group(key, usage)
        self.usage.replace_group(key, usage)

    def forget(self, local_queues: Collection[str]) -> None:
        """Drop the counters' series of every LocalQueue not in ``local_queues`` (``ns/name``); the
        gauges follow :meth:`observe`."""
        def keep(labels: tuple[str, ...]) -> bool:
            return f"{labels[1]}/{labels[0]}" in local_queues
        for series in (self.quota_reserved, self.quota_reserved_wait, self.admitted, self.admission_wait,
                       self.evicted):
            series.forget(keep)


def _local_queue_of(workload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, namespace) of the LocalQueue a Workload manifest names, if it names one."""
    meta, spec = workload.get("metadata"), workload.get("spec")
    name = spec.get("queueName") if isinstance(spec, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    return name, namespace
