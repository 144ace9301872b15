"""A Workload as the scheduler sees it: exact per-pod-set requests, priority, order keys.

``WorkloadInfo`` is built once per Workload version from the decoded API object
(``kueued.model.api.Workload``) and is what queues, flavor assignment and preemption
pass around.  Pod requests follow Kubernetes: per container ``requests`` (a limit
stands in for a missing request), init containers take the max, pod overhead adds on;
a pod set asks ``count`` times that.  Resources requested at zero (``cpu: 0``, or any
resource of a pod set with ``count: 0``) are kept apart in ``zeros``: they count for no
quota, but flavor assignment still gives a covered one its group's flavor (Kueue keeps
zero entries in a pod set's requests and skips them only where the ClusterQueue does not
cover the resource).
"""

from __future__ import annotations

import functools
from datetime import datetime

from kueued.model import api
from kueued.model.quantity import parse
from kueued.quota.node import FR

__all__ = ["PodSetRequest", "WorkloadInfo", "pod_requests", "timestamp"]


def timestamp(text: str | None) -> float:
    """RFC 3339 to epoch seconds; a missing stamp sorts first."""
    if not text:
        return 0.0
    return _epoch(text)


@functools.lru_cache(maxsize=4096)
def _epoch(text: str) -> float:
    """Remembered: workloads created in the same second share their stamp, and a burst of
    arrivals is many workloads a second."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pod_requests(spec: api.PodSpec) -> dict[str, int]:
    """One pod's effective requests in milli-units."""
    total: dict[str, int] = {}
    for c in spec.containers:
        resources = c.resources
        if resources.limits:
            for name, value in _container_requests(c).items():
                total[name] = total.get(name, 0) + value
        else:  # the usual container: requests alone, no limit to stand in for one
            for name, q in resources.requests.items():
                total[name] = total.get(name, 0) + parse(q)
    for c in spec.init_containers:
        for name, value in _container_requests(c).items():
            total[name] = max(total.get(name, 0), value)
    for name, q in spec.overhead.items():
        total[name] = total.get(name, 0) + parse(q)
    return total


def _container_requests(c: api.Container) -> dict[str, int]:
    out = {name: parse(q) for name, q in c.resources.limits.items()}
    out.update({name: parse(q) for name, q in c.resources.requests.items()})
    return out


class PodSetRequest:
    __slots__ = ("name", "count", "requests", "spec", "zeros")

    def __init__(self, name: str, count: int, requests: dict[str, int], spec: api.PodSpec,
                 zeros: tuple[str, ...] = ()) -> None:
        self.name = name
        self.count = count
        self.requests = requests  # total for all `count` pods, zero entries dropped
        self.spec = spec
        self.zeros = zeros  # resources requested at zero in total, sorted


class WorkloadInfo:
    """Scheduler-side view of one Workload."""

    __slots__ = ("key", "obj", "namespace", "name", "uid", "queue_name", "priority", "created",
                 "pod_sets", "cluster_queue", "usage", "assigned_flavors", "reserved_at", "evictions",
                 "local_queue", "preempting", "victims", "shape", "limits_error")

    def __init__(self, obj: api.Workload, *, priority: int) -> None:
        meta = obj.metadata
        self.obj = obj
        self.namespace = meta.namespace
        self.name = meta.name
        self.key = f"{meta.namespace}/{meta.name}"
        self.uid = meta.uid or self.key
        self.queue_name = obj.spec.queue_name
        self.local_queue = f"{meta.namespace}/{obj.spec.queue_name}"
        self.priority = priority
        self.created = timestamp(meta.creation_timestamp)
        self.pod_sets = []
        for ps in obj.spec.pod_sets:
            pod = ps.template.spec
            count = ps.count
            per_pod = pod_requests(pod)
            self.pod_sets.append(PodSetRequest(
                ps.name, count, {r: v * count for r, v in sorted(per_pod.items()) if v * count}, pod,
                tuple(r for r, v in sorted(per_pod.items()) if not v * count)))
        self.cluster_queue: str | None = None
        self.usage: dict[FR, int] = {}
        self.assigned_flavors: dict[str, dict[str, str]] = {}
        self.reserved_at = 0.0
        self.evictions = 0
        self.preempting = False  # issued evictions and waits for them (its queue records the round's outcome)
        self.victims: set[str] = set()  # workloads it evicted (committed; its queue records them): never twice
        self.shape: bytes | None = None  # kueued.scheduling.verdicts.shape_of, computed on first use
        self.limits_error: str | None = None  # cycle._requests_exceed_limits, computed on first use
        adm = obj.status.admission
        if adm is not None and adm.cluster_queue:
            self.admit(adm.cluster_queue, _usage_of(adm), _flavors_of(adm), at=_reserved_time(obj))

    def admit(self, cq: str, usage: dict[FR, int], flavors: dict[str, dict[str, str]], *, at: float) -> None:
        self.cluster_queue = cq
        self.usage = usage
        self.assigned_flavors = flavors
        self.reserved_at = at

    def release(self) -> None:
        self.cluster_queue = None
        self.usage = {}
        self.assigned_flavors = {}

    @property
    def admitted(self) -> bool:
        return self.cluster_queue is not None

    def total_requests(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ps in self.pod_sets:
            for r, v in ps.requests.items():
                out[r] = out.get(r, 0) + v
        return out

    def __repr__(self) -> str:
        return f"<Workload {self.key} p={self.priority}>"


def _usage_of(adm: api.Admission) -> dict[FR, int]:
    usage: dict[FR, int] = {}
    for psa in adm.pod_set_assignments:
        for res, q in psa.resource_usage.items():
            flavor = psa.flavors.get(res, "")
            fr = (flavor, res)
            usage[fr] = usage.get(fr, 0) + parse(q)
    return usage


def _flavors_of(adm: api.Admission) -> dict[str, dict[str, str]]:
    return {psa.name: dict(psa.flavors) for psa in adm.pod_set_assignments}


def _reserved_time(obj: api.Workload) -> float:
    for c in obj.status.conditions:
        if c.type == "QuotaReserved" and c.status == "True":
            return timestamp(c.last_transition_time)
    return 0.0
