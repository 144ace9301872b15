"""The metrics of each decision the port cannot count: :class:`DecisionRecorder` stands in front of
the coordinator's Event recorder and feeds :class:`~kueued.metrics.Metrics` (module notes there)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kueued.metrics_local_queue import gated

if TYPE_CHECKING:
    from kueued.kube.port import Recorder
    from kueued.metrics import Metrics

__all__ = ["DecisionRecorder"]


class DecisionRecorder:
    """In front of the coordinator's :class:`~kueued.kube.port.Recorder` (Kubernetes Events on a
    cluster, ``None`` offline): each committed admission's wait and each committed preemption
    by the preemptor's ClusterQueue go to ``metrics``, and the call goes on to ``inner``.

    ``cluster_queue_of(manifest)`` is the ClusterQueue a (pending) Workload queues in;
    ``local_queue_metrics()`` whether the LocalQueueMetrics gate is on now: then each admission
    and eviction also counts for the Workload's LocalQueue (:mod:`kueued.metrics_local_queue`).
    """

    def __init__(self, metrics: Metrics, inner: Recorder | None, *,
                 cluster_queue_of: Callable[[Mapping[str, Any]], str | None],
                 local_queue_metrics: Callable[[], bool] = lambda: False) -> None:
        self.metrics = metrics
        self.inner = inner
        self.cluster_queue_of = cluster_queue_of
        self.local_queue_metrics = local_queue_metrics

    def quota_reserved(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float) -> bool:
        self.metrics.admission(cluster_queue, waited)
        lq = gated(self.metrics, self.local_queue_metrics())
        if lq is not None:
            lq.admission(workload, waited)
        return self.inner is not None and self.inner.quota_reserved(workload, cluster_queue=cluster_queue,
                                                                    waited=waited)

    def admitted(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float = 0.0) -> bool:
        return self.inner is not None and self.inner.admitted(workload, cluster_queue=cluster_queue, waited=waited)

    def preempted(self, victim: Mapping[str, Any], *, preemptor: Mapping[str, Any], reason: str, message: str,
                  cluster_queue: str, priorities: str) -> bool:
        preempting = self.cluster_queue_of(preemptor)
        if preempting is not None:
            self.metrics.preemption(preempting, reason)
        return self.inner is not None and self.inner.preempted(victim, preemptor=preemptor, reason=reason,
                                                               message=message, cluster_queue=cluster_queue,
                                                               priorities=priorities)

    def evicted(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool:
        """Every committed eviction, a preemption's too (reason ``Preempted``)."""
        lq = gated(self.metrics, self.local_queue_metrics())
        if lq is not None:
            lq.eviction(workload, reason)
        return self.inner is not None and self.inner.evicted(workload, reason=reason, message=message)

    def deactivating(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool:
        return self.inner is not None and self.inner.deactivating(workload, reason=reason, message=message)

    def pending(self, workload: Mapping[str, Any], message: str) -> bool:
        return self.inner is not None and self.inner.pending(workload, message)
