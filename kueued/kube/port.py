"""The API port: the one edge through which decisions leave the engine.

The coordinator commits an admission or an eviction through an :class:`ApiPort`; the
Kubernetes implementation (a later issue, ``kueued.kube.client``) patches the Workload
with its resourceVersion, and a conflict makes the commit fail, so the coordinator
releases the reservation and requeues.  :class:`InMemoryPort` is the twin ``simulate``
and the tests use; it can be told to refuse commits to exercise that path.

The ElasticQuota side also writes status, as Koordinator's scheduler does
(``elasticquota/controller.go``): each group's request and runtime as annotations on its
ElasticQuota (``quota.scheduling.koordinator.sh/request``, ``.../runtime``, JSON resource
lists), written only when a value changed; and a condition on an ElasticQuota that
validation refused (Koordinator's webhook would have refused the apply itself; kueued
reads objects from a source that cannot be refused, so it says so on the object).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import msgspec

__all__ = ["ApiPort", "InMemoryPort", "NoStatus", "Recorder", "StatusPublisher", "Committed", "Condition",
           "QuotaStatus", "count_commit", "EVICTED_ONCE"]


class Committed(msgspec.Struct, frozen=True):
    kind: str            # "admit" | "evict"
    workload: str        # namespace/name
    cluster_queue: str
    detail: str = ""


class Condition(msgspec.Struct, frozen=True):
    """A status condition, as metav1.Condition spells one."""

    type: str
    status: str          # "True" | "False"
    reason: str
    message: str = ""


class QuotaStatus(msgspec.Struct, frozen=True):
    """One status write to an ElasticQuota: annotations merged in, or a condition set."""

    quota: str
    namespace: str
    annotations: dict[str, str] = {}
    condition: Condition | None = None
    used: dict[str, str | None] | None = None  # merged into status.used, when this write set it


class ApiPort(Protocol):
    @property
    def echoes(self) -> bool:
        """Whether what the port writes comes back as a new version of the object (a cluster's watch);
        in-process the coordinator applies its own changes to the World."""
        ...

    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int], counts: dict[str, int] | None = None) -> bool: ...

    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str,
                    preempted: bool = True) -> bool:
        """Evict an admitted workload.  ``preempted``: by a preemptor (``reason`` is Kueue's
        preemption reason: Evicted=Preempted and Preempted=``reason``); else ``reason`` is the
        Evicted condition's own (Deactivated, ClusterQueueStopped, LocalQueueStopped)."""
        ...

    async def deactivate(self, workload: str, *, reason: str, message: str) -> bool:
        """Deactivate an admitted workload as Kueue's workload controller does: the ``DeactivationTarget``
        condition (``reason``, ``message``), no accumulated execution time, and ``spec.active: false``;
        whether it was written (a Workload changed meanwhile refuses it)."""
        ...

    async def annotate_quota(self, quota: str, *, namespace: str, annotations: dict[str, str]) -> bool:
        """Merge these annotations into the ElasticQuota (a merge patch); False when refused."""
        ...

    async def set_quota_condition(self, quota: str, *, namespace: str, condition: Condition) -> bool:
        """Set (replace by type) a condition in the ElasticQuota's status; False when refused."""
        ...

    async def quota_used(self, quota: str, *, namespace: str, used: dict[str, str | None]) -> bool:
        """Merge ``used`` into the ElasticQuota's ``status.used`` (a ResourceList; None removes a
        resource); False when refused."""
        ...

    def pending(self, workload: str, message: str) -> None:
        """Why ``workload`` waits now (written by :meth:`flush_pending` where status is kept)."""
        ...

    def forget(self, workload: str) -> None:
        """``workload`` is gone: drop whatever is kept for it."""
        ...

    async def flush_pending(self, *, busy: Callable[[], bool] | None = None) -> int:
        """Write the due pending conditions; ``busy()``, asked between batches, stops early (the rest
        stay due) while changes wait for the next scheduling pass."""
        ...

    async def finish_evictions(self) -> list[str]:
        """Complete evictions whose second phase (the reservation cleared) is still to write."""
        ...

    def resume_eviction(self, workload: str, message: str) -> None:
        """A Workload found evicted but still holding its reservation (a restart between the phases)."""
        ...

    def released(self, workload: str) -> bool:
        """Whether an eviction committed for ``workload`` has also cleared its reservation (phase
        two): only then may its quota go to someone else."""
        ...


class NoStatus:
    """What a port that keeps no Workload status does with it: nothing (simulate, timed runs)."""

    echoes = False  # nothing comes back: the coordinator applies a deactivation to the World itself

    async def deactivate(self, workload: str, *, reason: str, message: str) -> bool:
        return True

    def pending(self, workload: str, message: str) -> None:
        pass

    def forget(self, workload: str) -> None:
        pass

    async def flush_pending(self, *, busy: Callable[[], bool] | None = None) -> int:
        return 0

    async def finish_evictions(self) -> list[str]:
        return []

    def resume_eviction(self, workload: str, message: str) -> None:
        pass

    def released(self, workload: str) -> bool:
        return True  # no status kept: the second phase is the first


class Recorder(Protocol):
    """Kubernetes Events about decisions (``kueued.kube.events.EventRecorder``); fire and forget,
    each says whether it was queued."""

    def quota_reserved(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float) -> bool: ...

    def admitted(self, workload: Mapping[str, Any], *, cluster_queue: str, waited: float = 0.0) -> bool: ...

    def preempted(self, victim: Mapping[str, Any], *, preemptor: Mapping[str, Any], reason: str, message: str,
                  cluster_queue: str, priorities: str) -> bool: ...

    def evicted(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool: ...

    def deactivating(self, workload: Mapping[str, Any], *, reason: str, message: str) -> bool: ...

    def pending(self, workload: Mapping[str, Any], message: str) -> bool: ...


class StatusPublisher(Protocol):
    """The status of the tree and of refused objects (``kueued.kube.status_publisher``); the actors
    see only this, never the client behind it."""

    @property
    def recorder(self) -> Recorder | None: ...

    async def run(self, *, task_status: Any = ...) -> None: ...

    async def publish(self, coord: Any) -> int: ...

    def put_off(self) -> float: ...

    def validated(self, manifest: Mapping[str, Any], reason: str | None) -> bool: ...

    def in_force(self, manifest: Mapping[str, Any], held: Mapping[str, Any] | None, *, refused: bool) -> None: ...

    def forget(self, key: str) -> None: ...


EVICTED_ONCE = "evict_once"
"""The kind counted beside ``evict`` for a workload's first eviction with that reason and cause
(Kueue's ``workloadEvictionStateInc`` answering true: ``kueue_evicted_workloads_once_total``)."""


def count_commit(counts: Counter, commit: Committed, *, first: bool = False) -> None:
    """Commits by (kind, ClusterQueue, reason): what metrics count, on every port.  ``first``: an
    eviction that is the workload's first with its reason and cause, also counted as ``EVICTED_ONCE``."""
    reason = commit.detail.split(":", 1)[0]
    counts[(commit.kind, commit.cluster_queue, reason)] += 1
    if first:
        counts[(EVICTED_ONCE, commit.cluster_queue, reason)] += 1


class InMemoryPort(NoStatus):
    """Records every commit and status write; ``refuse`` decides which admissions fail (a conflict)."""

    instant = True  # answers without waiting: the coordinator need not commit concurrently

    def __init__(self, *, refuse: Callable[[str], bool] | None = None, keep: int | None = None) -> None:
        # ``keep`` bounds what is remembered (a daemon runs for months; a test reads it all)
        self.log: deque[Committed] = deque(maxlen=keep)
        self.quota_status: deque[QuotaStatus] = deque(maxlen=keep)
        self.counts: Counter = Counter()
        self.pending_reasons: dict[str, str] = {}
        self.refuse = refuse
        # the Evicted reasons each workload was evicted for (its status.schedulingStats.evictions on a cluster)
        self.evicted_for: dict[str, set[str]] = {}

    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int], counts: dict[str, int] | None = None) -> bool:
        if self.refuse is not None and self.refuse(workload):
            return False
        self._commit(Committed("admit", workload, cluster_queue))
        self.pending_reasons.pop(workload, None)
        return True

    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str,
                    preempted: bool = True) -> bool:
        seen = self.evicted_for.setdefault(workload, set())
        key = "Preempted" if preempted else reason
        first = key not in seen
        seen.add(key)
        self._commit(Committed("evict", workload, cluster_queue, f"{reason}: {message}"), first=first)
        return True

    async def deactivate(self, workload: str, *, reason: str, message: str) -> bool:
        self._commit(Committed("deactivate", workload, "", f"{reason}: {message}"))
        return True

    def _commit(self, commit: Committed, *, first: bool = False) -> None:
        self.log.append(commit)
        count_commit(self.counts, commit, first=first)

    def pending(self, workload: str, message: str) -> None:
        self.pending_reasons[workload] = message

    def forget(self, workload: str) -> None:
        self.pending_reasons.pop(workload, None)
        self.evicted_for.pop(workload, None)

    async def annotate_quota(self, quota: str, *, namespace: str, annotations: dict[str, str]) -> bool:
        self.quota_status.append(QuotaStatus(quota, namespace, dict(annotations)))
        return True

    async def set_quota_condition(self, quota: str, *, namespace: str, condition: Condition) -> bool:
        self.quota_status.append(QuotaStatus(quota, namespace, condition=condition))
        return True

    async def quota_used(self, quota: str, *, namespace: str, used: dict[str, str | None]) -> bool:
        self.quota_status.append(QuotaStatus(quota, namespace, used=dict(used)))
        return True

    # --- what a test reads -----------------------------------------------------------------
    def annotations(self, quota: str) -> dict[str, str]:
        """The annotations written to ``quota`` so far, later writes over earlier ones."""
        out: dict[str, str] = {}
        for s in self.quota_status:
            if s.quota == quota:
                out.update(s.annotations)
        return out

    def condition(self, quota: str, type_: str) -> Condition | None:
        """The last condition of this type set on ``quota``."""
        found = None
        for s in self.quota_status:
            if s.quota == quota and s.condition is not None and s.condition.type == type_:
                found = s.condition
        return found
