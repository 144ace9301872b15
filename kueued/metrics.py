"""Prometheus metrics of a running daemon, refreshed after every settled change.

Names follow Kueue's (``kueue_pending_workloads``, ``kueue_admitted_active_workloads``,
``kueue_cluster_queue_resource_usage``) with a ``kueued_`` prefix, so dashboards carry
over.  Each :class:`Metrics` has its own registry (tests make several); the daemon
serves it with prometheus-client's HTTP server when ``--metrics-port`` is set.

Counters are fed from the API port's commit counts (admissions and evictions that
actually reached the API, on every port), gauges from the actors' own statistics records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["Metrics", "QueueSample"]


class QueueSample:
    """What one ClusterQueue actor reports: heap, parked, admitted and usage per (flavor, resource)."""

    __slots__ = ("name", "active", "inadmissible", "admitted", "usage", "mailbox")

    def __init__(self, name: str, *, active: int, inadmissible: int, admitted: int,
                 usage: dict[tuple[str, str], int], mailbox: int) -> None:
        self.name = name
        self.active = active
        self.inadmissible = inadmissible
        self.admitted = admitted
        self.usage = usage
        self.mailbox = mailbox


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pending = Gauge("kueued_pending_workloads", "Pending workloads per ClusterQueue",
                             ["cluster_queue", "status"], registry=r)
        self.admitted = Gauge("kueued_admitted_active_workloads", "Admitted workloads per ClusterQueue",
                              ["cluster_queue"], registry=r)
        self.usage = Gauge("kueued_cluster_queue_resource_usage", "Quota used per ClusterQueue, flavor, resource "
                           "(Kubernetes units)", ["cluster_queue", "flavor", "resource"], registry=r)
        self.mailbox = Gauge("kueued_actor_mailbox_depth", "Messages waiting in an actor's mailbox",
                             ["actor"], registry=r)
        self.admissions = Counter("kueued_admissions", "Admissions committed to the API",
                                  ["cluster_queue"], registry=r)
        self.evictions = Counter("kueued_evictions", "Evictions committed to the API",
                                 ["cluster_queue", "reason"], registry=r)
        self.rounds = Counter("kueued_scheduling_rounds", "Scheduling rounds run", registry=r)
        self._seen: dict[tuple[str, str, str], int] = {}

    def observe_queues(self, samples: Iterable[QueueSample]) -> None:
        for s in samples:
            self.pending.labels(s.name, "active").set(s.active)
            self.pending.labels(s.name, "inadmissible").set(s.inadmissible)
            self.admitted.labels(s.name).set(s.admitted)
            self.mailbox.labels(s.name).set(s.mailbox)
            for (flavor, resource), milli in s.usage.items():
                self.usage.labels(s.name, flavor, resource).set(milli / 1000)

    def observe_commits(self, counts: Mapping[tuple[str, str, str], int]) -> None:
        """Bring the counters up to the port's commit counts (``ApiPort.counts``; any port)."""
        for key, total in counts.items():
            delta = total - self._seen.get(key, 0)
            if delta <= 0:
                continue
            kind, cluster_queue, reason = key
            if kind == "admit":
                self.admissions.labels(cluster_queue).inc(delta)
            else:
                self.evictions.labels(cluster_queue, reason).inc(delta)
            self._seen[key] = total
