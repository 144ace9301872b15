"""A Workload as the scheduler sees it: an immutable spec, and the scheduling state one queue owns.

:class:`WorkloadSpec` is built once per Workload version from the decoded API object
(``kueued.model.api.Workload``): exact per-pod-set requests, priority, order keys and the
admission its status carries.  It never changes, so the World, messages and every reader
share it freely.  :class:`WorkloadInfo` is a workload's scheduling state (the version it
holds, where it holds quota, its eviction history, whether it waits for its evictions),
created and changed only by the ClusterQueue actor that holds the workload; flavor
assignment and preemption read it.

Pod requests follow Kubernetes: per container ``requests`` (a limit stands in for a
missing request), init containers take the max, pod overhead adds on; a pod set asks
``count`` times that.  Resources requested at zero (``cpu: 0``, or any resource of a pod
set with ``count: 0``) are kept apart in ``zeros``: they count for no quota, but flavor
assignment still gives a covered one its group's flavor (Kueue keeps zero entries in a pod
set's requests and skips them only where the ClusterQueue does not cover the resource).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime

import msgspec

from kueued.model import api
from kueued.model.quantity import parse
from kueued.quota.node import FR
from kueued.scheduling.limitrange import Summary, violations, with_defaults

__all__ = ["Placement", "PodSetRequest", "WorkloadInfo", "WorkloadSpec", "holdings_by_local_queue", "pod_requests",
           "spec_of", "timestamp"]

_encode = msgspec.json.Encoder().encode


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
    total.update(pod_level_requests(spec))
    for name, q in spec.overhead.items():
        total[name] = total.get(name, 0) + parse(q)
    return total


def pod_level_requests(spec: api.PodSpec) -> dict[str, int]:
    """The pod-level requests that stand for the containers' sum (Kubernetes' ``PodRequests`` with
    pod-level resources: cpu, memory and hugepages; a limit without a request stands for both)."""
    if spec.resources is None:
        return {}
    out = {name: parse(q) for name, q in spec.resources.limits.items() if _pod_level(name)}
    out.update({name: parse(q) for name, q in spec.resources.requests.items() if _pod_level(name)})
    return out


def _pod_level(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


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


class Placement(msgspec.Struct, frozen=True, gc=False):
    """Where a workload holds quota: its ClusterQueue, the usage charged per (flavor, resource),
    the flavors of each pod set, and when the reservation was made (epoch seconds)."""

    cluster_queue: str
    usage: dict[FR, int]
    flavors: dict[str, dict[str, str]]
    at: float = 0.0
    counts: dict[str, int] | None = None  # pods per pod set, when partial admission took fewer than asked


class WorkloadSpec(msgspec.Struct, frozen=True, gc=False):
    """One version of a Workload as the scheduler reads it: immutable, shared freely.

    Built once per version (:func:`spec_of`); everything here is a function of the API
    object and its priority, so the values nomination derives from the spec alone (its
    ``shape`` for remembered verdicts, a request above its limit) are worked out here once.
    ``observed`` is the admission the object's status carries (on a cluster, the one kueued
    or Kueue wrote before): what a queue adopts, not where the scheduler holds it now (that is
    the queue's :class:`WorkloadInfo`, and the coordinator's index of its replies)."""

    obj: api.Workload
    key: str
    uid: str
    local_queue: str
    priority: int
    created: float
    pod_sets: tuple[PodSetRequest, ...]
    shape: bytes
    limits_error: str
    observed: Placement | None

    @property
    def namespace(self) -> str:
        return self.obj.metadata.namespace

    @property
    def name(self) -> str:
        return self.obj.metadata.name

    @property
    def queue_name(self) -> str:
        return self.obj.spec.queue_name

    def total_requests(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ps in self.pod_sets:
            for r, v in ps.requests.items():
                out[r] = out.get(r, 0) + v
        return out


def counted_requests(per_pod: dict[str, int], excluded: tuple[str, ...],
                     transformations: tuple[api.ResourceTransformation, ...]) -> dict[str, int]:
    """One pod's requests (milli-units) as Kueue's quota counts them under the Configuration's
    ``resources`` (``dropExcludedResources``, then ``applyResourceTransformations``): a resource
    named by an excluded prefix counts for nothing; each whole unit of a transformation's input
    counts as its outputs, and the input itself too unless the strategy is Replace."""
    if excluded:
        per_pod = {r: v for r, v in per_pod.items() if not r.startswith(excluded)}
    by_input = {t.input: t for t in transformations if t.input in per_pod}
    if not by_input:
        return per_pod
    out: dict[str, int] = {}
    for name, milli in per_pod.items():
        t = by_input.get(name)
        if t is None:
            out[name] = out.get(name, 0) + milli
            continue
        if t.multiply_by and t.multiply_by in per_pod:
            milli *= -(-per_pod[t.multiply_by] // 1000)  # Quantity.Mul(other.Value())
        units = -(-milli // 1000)  # Quantity.Value(): whole units, rounded up
        for output, factor in t.outputs.items():
            out[output] = out.get(output, 0) + parse(factor) * units
        if t.strategy != "Replace":
            out[name] = out.get(name, 0) + milli
    return out


def spec_of(obj: api.Workload, *, priority: int, limit_ranges: Summary | None = None,
            requeue_by_eviction: bool = True, priority_sorting: bool = True,
            reclaimable_pods: bool = True, excluded: tuple[str, ...] = (),
            transformations: tuple[api.ResourceTransformation, ...] = ()) -> WorkloadSpec:
    """``limit_ranges``: the summary of the namespace's LimitRanges (:mod:`.limitrange`): their
    defaults fill in the pod templates, and a pod they would refuse is not admitted.
    ``requeue_by_eviction``, ``priority_sorting``: Kueue's queue order timestamp (:func:`queue_order_time`).
    ``reclaimable_pods``: the ReclaimablePods gate (KEP-78); off, ``status.reclaimablePods`` frees nothing.
    ``excluded``, ``transformations``: the Configuration's resource rules, by which quota counts
    one pod's requests (:func:`counted_requests`); LimitRanges judge the pod as written."""
    meta = obj.metadata
    key = f"{meta.namespace}/{meta.name}"
    templates = [ps.template.spec for ps in obj.spec.pod_sets]
    if limit_ranges is not None:
        templates = [with_defaults(t, limit_ranges) for t in templates]
    pod_sets = []
    refused: list[str] = []
    reclaimable = {r.name: r.count for r in obj.status.reclaimable_pods} if reclaimable_pods else {}
    for i, (ps, template) in enumerate(zip(obj.spec.pod_sets, templates, strict=True)):
        count = max(0, ps.count - reclaimable.get(ps.name, 0))  # pods done for good need no quota (KEP-78)
        per_pod = pod_requests(template)
        quota = counted_requests(per_pod, excluded, transformations)
        pod_sets.append(PodSetRequest(
            ps.name, count, {r: v * count for r, v in sorted(quota.items()) if v * count}, template,
            tuple(r for r, v in sorted(quota.items()) if not v * count)))
        if limit_ranges is not None:
            refused += violations(template, limit_ranges, f"podSets[{i}].template.spec", per_pod)
    adm = obj.status.admission
    observed = (Placement(adm.cluster_queue, _usage_of(adm, obj, reclaimable), _flavors_of(adm), _reserved_time(obj))
                if adm is not None and adm.cluster_queue else None)
    shape = b"%d|%s|" % (priority, meta.namespace.encode()) + _encode(obj.spec.pod_sets)
    if limit_ranges is not None:  # the defaults change what nomination reads
        shape += b"|" + _encode(templates)
    return WorkloadSpec(obj, key, meta.uid or key, f"{meta.namespace}/{obj.spec.queue_name}", priority,
                        queue_order_time(obj, requeue_by_eviction, priority_sorting), tuple(pod_sets), shape,
                        _limits_error(obj.spec.pod_sets, templates) or "; ".join(refused), observed)


class WorkloadInfo:
    """A workload's scheduling state, owned by exactly one ClusterQueue actor: its spec (the
    version it holds), where it holds quota (``placement``, None while pending), how often it
    was evicted, whether it issued evictions and waits for them, and whom it evicted.

    Only the owning queue changes it.  A round reads the heads its queues lent it and the
    admitted workloads its reclaim queries reached; a new version of the Workload replaces
    the spec and keeps the rest (:meth:`carry`).  The spec's hot fields are copied into
    slots: queue order and preemption read them for every comparison."""

    __slots__ = ("spec", "key", "uid", "namespace", "priority", "created", "local_queue",
                 "placement", "evictions", "preempting", "victims")

    def __init__(self, spec: WorkloadSpec, placement: Placement | None = None, *,
                 evictions: int = 0, victims: Iterable[str] = (), preempting: bool = False) -> None:
        self.spec = spec
        self.key = spec.key
        self.uid = spec.uid
        self.namespace = spec.obj.metadata.namespace
        self.priority = spec.priority
        self.created = spec.created
        self.local_queue = spec.local_queue
        self.placement = placement
        self.evictions = evictions
        self.preempting = preempting  # issued evictions and waits for them (its queue records the round's outcome)
        self.victims: set[str] = set(victims)  # workloads it evicted (committed; its queue records them): never twice

    @classmethod
    def of(cls, obj: api.Workload, *, priority: int = 0) -> WorkloadInfo:
        """A fresh state for ``obj`` as its status stands (admitted where it says so)."""
        spec = spec_of(obj, priority=priority)
        return cls(spec, spec.observed)

    def carry(self, spec: WorkloadSpec, placement: Placement | None) -> WorkloadInfo:
        """The state of a new version of this workload: the rest of its state goes with it."""
        return WorkloadInfo(spec, placement, evictions=self.evictions, victims=self.victims,
                            preempting=self.preempting)

    # --- the spec, read through ---------------------------------------------------------------
    @property
    def obj(self) -> api.Workload:
        return self.spec.obj

    @property
    def name(self) -> str:
        return self.spec.obj.metadata.name

    @property
    def queue_name(self) -> str:
        return self.spec.obj.spec.queue_name

    @property
    def pod_sets(self) -> tuple[PodSetRequest, ...]:
        return self.spec.pod_sets

    def total_requests(self) -> dict[str, int]:
        return self.spec.total_requests()

    # --- the placement ------------------------------------------------------------------------
    def admit(self, placement: Placement) -> None:
        self.placement = placement

    def release(self) -> None:
        self.placement = None

    @property
    def admitted(self) -> bool:
        return self.placement is not None

    @property
    def cluster_queue(self) -> str | None:
        p = self.placement
        return p.cluster_queue if p is not None else None

    @property
    def usage(self) -> dict[FR, int]:
        p = self.placement
        return p.usage if p is not None else {}

    @property
    def assigned_flavors(self) -> dict[str, dict[str, str]]:
        p = self.placement
        return p.flavors if p is not None else {}

    @property
    def reserved_at(self) -> float:
        p = self.placement
        return p.at if p is not None else 0.0

    def __repr__(self) -> str:
        return f"<Workload {self.key} p={self.priority}>"


REQUEUED_AT_EVICTION = frozenset({"PodsReadyTimeout", "AdmissionCheck"})
"""Evicted reasons after which Kueue queues a workload by its eviction time (``GetQueueOrderTimestamp``)."""


RECLAIMED_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
"""The Preempted reason that, with the PrioritySortingWithinCohort gate off, requeues a workload
behind its preemptor (:func:`queue_order_time`)."""
AFTER_PREEMPTOR = 0.001
"""Kueue's epsilon: a workload reclaimed while borrowing queues 1 ms after it was preempted, so
strictly after its preemptor."""


def queue_order_time(obj: api.Workload, by_eviction: bool = True, priority_sorting: bool = True) -> float:
    """Kueue's ``GetQueueOrderTimestamp``: when the workload queued, for FIFO order and "newer" in
    preemption.  Its creation, or with ``by_eviction`` (waitForPodsReady's requeuing timestamp
    ``Eviction``, Kueue's default) the time of an eviction for PodsReadyTimeout or by an admission
    check; or, with the PrioritySortingWithinCohort gate off (``priority_sorting`` False), just
    after it was preempted by reclamation while borrowing (without priorities to tell the two
    apart, the victim would otherwise queue ahead of its preemptor and take the quota back)."""
    if by_eviction:
        for c in obj.status.conditions:
            if c.type == "Evicted" and c.status == "True" and c.reason in REQUEUED_AT_EVICTION:
                return timestamp(c.last_transition_time)
    if not priority_sorting:
        for c in obj.status.conditions:
            if c.type == "Preempted" and c.status == "True" and c.reason == RECLAIMED_WHILE_BORROWING:
                return timestamp(c.last_transition_time) + AFTER_PREEMPTOR
    return timestamp(obj.metadata.creation_timestamp)


def _limits_error(pod_sets: list[api.PodSet], templates: list[api.PodSpec]) -> str:
    """Why a container (or the pod, with pod-level resources) asks more than its limit, or ""
    (Kueue refuses such a workload)."""
    for ps, template in zip(pod_sets, templates, strict=True):
        pod = template.resources
        if pod is not None:
            for res, lim in pod.limits.items():
                req = pod.requests.get(res)
                if req is not None and parse(req) > parse(lim):
                    return f"podSet {ps.name}: pod-level {res} request ({req}) exceeds its limit ({lim})"
        for c in [*template.containers, *template.init_containers]:
            for res, lim in c.resources.limits.items():
                req = c.resources.requests.get(res)
                if req is not None and parse(req) > parse(lim):
                    return (f"podSet {ps.name} container {c.name}: {res} request ({req}) "
                            f"exceeds its limit ({lim})")
    return ""


def _usage_of(adm: api.Admission, obj: api.Workload, reclaimable: dict[str, int]) -> dict[FR, int]:
    """The quota an admission holds: its pod sets' resourceUsage, scaled down to the pods not yet
    reclaimable (Kueue's ``totalRequestsFromAdmission``: pods that finished for good free theirs)."""
    counts = {ps.name: ps.count for ps in obj.spec.pod_sets}
    usage: dict[FR, int] = {}
    for psa in adm.pod_set_assignments:
        admitted = psa.count if psa.count is not None else counts.get(psa.name, 0)
        current = max(0, counts.get(psa.name, 0) - reclaimable.get(psa.name, 0))
        for res, q in psa.resource_usage.items():
            fr = (psa.flavors.get(res, ""), res)
            amount = parse(q)
            if admitted and current < admitted:
                amount = amount // admitted * current
            usage[fr] = usage.get(fr, 0) + amount
    return usage


def holdings_by_local_queue(admitted: Iterable[WorkloadInfo]) -> dict[str, tuple[int, dict[FR, int]]]:
    """LocalQueue ``ns/name`` -> how many of ``admitted`` came through it and their usage (milli-units)."""
    out: dict[str, tuple[int, dict[FR, int]]] = {}
    for wl in admitted:
        held, usage = out.get(wl.local_queue) or (0, {})
        for fr, v in wl.usage.items():
            usage[fr] = usage.get(fr, 0) + v
        out[wl.local_queue] = (held + 1, usage)
    return out


def _flavors_of(adm: api.Admission) -> dict[str, dict[str, str]]:
    return {psa.name: dict(psa.flavors) for psa in adm.pod_set_assignments}


def _reserved_time(obj: api.Workload) -> float:
    for c in obj.status.conditions:
        if c.type == "QuotaReserved" and c.status == "True":
            return timestamp(c.last_transition_time)
    return 0.0
