"""Run Koordinator's elastic quota scheduling to quiescence.

Input is what a cluster holds after ``kubectl apply``: the accepted ElasticQuota
manifests (final versions), Workload manifests (kueue.x-k8s.io/v1beta2 shape, one
workload = one gang admitted as a whole) and core v1 Nodes.  Output is where every
workload ends up and what every group's request and runtime is.

Data flow:

1. Groups come from the manifests (``model.koordinator`` reads the labels); the system
   and default groups always exist, with pluginArgs' max unless a manifest overrides it.
2. Each workload is placed in a group as GetQuotaName / getPodAssociateQuotaName do:
   the quota label, else a quota named like its namespace in that namespace, else one
   whose ``namespaces`` annotation lists it, else the default group; a label naming no
   known group means the default group too.  Its request is the Kubernetes pod rule
   times ``count``, masked to the group's max keys (updatePodRequestNoLock).
3. Runtime (``quota.elastic.compute_runtime``) depends on requests, which count pending
   and admitted workloads alike, so it only moves when the cluster total does: with
   Nodes the root shares their allocatable minus what the system and default groups use
   (updateClusterTotalResourceNoLock); without Nodes it is the top-level groups' max.
4. Passes repeat until nothing changes.  A scheduling pass takes pending workloads by
   priority then creation time (the kube-scheduler queue) and runs PreFilter:
   ``used + request <= runtime`` on the leaf (keys present on both sides, equality fits),
   and for a non-preemptible workload ``non-preemptible used + request <= min``; on
   failure, PostFilter preemption inside the group (``elastic_victims``).  A failed
   workload never blocks the next one.  A recycling pass then evicts from every group
   whose used exceeds its runtime (the 120 s delay has elapsed in a run to quiescence).
   Evicted workloads go back to the queue; their request still counts.

Every decision needs only one group's workloads and that group's runtime, so it lives
on :class:`GroupState`; :func:`run_elastic` keeps one per group and walks them in the
order above, and the actor engine (``actors/elastic.py``) keeps one inside each group
actor and walks them in the same order, so the two decide identically.  Both start
from :func:`prepare` and report with :func:`result_of` and :func:`outcome_of`.

Nothing here does I/O; the result is a plain value for the CLI to print.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from kueued.model import koordinator as k
from kueued.model.quantity import QuantityError, format_milli, parse
from kueued.quota.elastic import (
    OUTSIDE_TREE,
    ElasticGroup,
    GroupQuota,
    Resources,
    compute_runtime,
    implicit_cluster_total,
    sum_resources,
)
from kueued.scheduling.elastic_victims import Candidate, exceeded, preemption_victims, revoke_victims

__all__ = [
    "ElasticWorkloadResult", "GroupStatus", "ElasticOutcome", "ElasticWorkload", "GroupState", "ElasticSetup",
    "prepare", "result_of", "outcome_of", "max_rounds_for", "run_elastic", "workload_requests",
]


class ElasticWorkloadResult(msgspec.Struct, frozen=True, kw_only=True):
    """Final state of one workload."""

    state: str  # "admitted" | "pending"
    cluster_queue: str | None = None  # the quota group, when admitted
    preemptions: int = 0  # evictions by preemption or forced recycling
    reason: str = ""  # why a pending workload does not fit, in words


class GroupStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One quota group's amounts in milli-units."""

    request: dict[str, int]
    runtime: dict[str, int]
    min: dict[str, int]
    max: dict[str, int]


class ElasticOutcome(msgspec.Struct, frozen=True):
    workloads: dict[str, ElasticWorkloadResult]
    quota_groups: dict[str, GroupStatus]


def workload_requests(obj: Mapping[str, Any]) -> Resources:
    """PodRequests per pod set times count, summed; zero entries are kept.

    Per pod: containers' requests (a limit stands in for a missing request) summed, init
    containers taken at their max, overhead added.  Keeping zeros matters: forced
    recycling masks its running total to the names a workload requests.
    """
    total: Resources = {}
    for pod_set in (obj.get("spec") or {}).get("podSets") or []:
        spec = ((pod_set.get("template") or {}).get("spec")) or {}
        pod: Resources = {}
        for c in spec.get("containers") or []:
            for r, v in _container_requests(c).items():
                pod[r] = pod.get(r, 0) + v
        for c in spec.get("initContainers") or []:
            for r, v in _container_requests(c).items():
                pod[r] = max(pod.get(r, 0), v)
        for r, q in (spec.get("overhead") or {}).items():
            pod[r] = pod.get(r, 0) + parse(q)
        count = pod_set.get("count")
        count = 1 if count is None else int(count)
        for r, v in pod.items():
            total[r] = total.get(r, 0) + v * count
    return total


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    out = {r: parse(q) for r, q in (resources.get("limits") or {}).items()}
    out.update({r: parse(q) for r, q in (resources.get("requests") or {}).items()})
    return out


def _timestamp(text: object) -> float:
    """RFC 3339 to epoch seconds; a missing or unreadable stamp sorts first."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else 0.0
    except ValueError:
        return 0.0


def _group_of_manifest(obj: Mapping[str, Any]) -> ElasticGroup | None:
    spec = obj.get("spec") or {}
    try:
        max_ = k.resource_list(spec.get("max"))
        min_ = k.resource_list(spec.get("min"))
    except (QuantityError, TypeError):
        return None  # never accepted by validation; ignore rather than guess
    return ElasticGroup(
        name=k.name_of(obj), parent=k.parent_name(obj), is_parent=k.is_parent(obj),
        min=min_, max=max_, shared_weight=k.effective_shared_weight(obj, max_),
        allow_lent_resource=k.allow_lent_resource(obj),
    )


@dataclass(slots=True)
class ElasticWorkload:
    """One workload as the elastic engines see it; mutated in place by :class:`GroupState`."""

    key: str
    group: str
    request: Resources  # masked to the group's max keys
    priority: int
    created: float
    non_preemptible: bool
    admitted: bool
    preemptions: int = 0
    reason: str = ""

    def candidate(self) -> Candidate:
        return Candidate(self.key, self.priority, self.created, self.request, self.non_preemptible)

    def order(self) -> tuple[int, float, str]:
        """Queue order, first to be tried first: priority, then creation time, then key."""
        return (-self.priority, self.created, self.key)


Check = Callable[[ElasticWorkload], str]


@dataclass(slots=True)
class GroupState:
    """One group's workloads and every decision that needs nothing but them and its runtime.

    ``extra`` is a PreFilter check beyond the group (EnableCheckParentQuota in
    :func:`run_elastic`); it runs after the group's own checks and, like them, must
    pass for preemption victims to be kept.
    """

    spec: ElasticGroup
    inner: bool = False
    workloads: dict[str, ElasticWorkload] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    def used(self, *, non_preemptible: bool = False) -> Resources:
        return sum_resources(
            w.request for w in self.workloads.values()
            if w.admitted and (w.non_preemptible or not non_preemptible)
        )

    def own_request(self) -> Resources:
        """What the group's workloads ask, pending and admitted alike."""
        return sum_resources(w.request for w in self.workloads.values())

    def prefilter(self, w: ElasticWorkload, runtime: Mapping[str, int], *, extra: Check | None = None) -> str:
        """Why ``w`` cannot be admitted now, or "" when it fits."""
        if self.inner:
            return f"quota {self.name} is a parent quota; workloads may only use leaf quotas"
        reason = _over(self.name, "used", self.used(), w.request, "runtime", runtime)
        if not reason and w.non_preemptible:
            reason = _over(self.name, "non-preemptible used", self.used(non_preemptible=True),
                           w.request, "min", self.spec.min)
        if not reason and extra is not None:
            reason = extra(w)
        return reason

    def schedule(self, w: ElasticWorkload, runtime: Mapping[str, int], *,
                 extra: Check | None = None) -> list[ElasticWorkload] | None:
        """Admit ``w`` when it fits, preempting inside the group when that makes it fit.

        Returns the victims ([] when ``w`` fits as is), or None when ``w`` stays pending
        with its reason set.
        """
        reason = self.prefilter(w, runtime, extra=extra)
        victims: list[ElasticWorkload] = []
        if reason:
            victims = self._preempt(w, runtime, extra)
            if not victims:
                w.reason = reason
                return None
            for v in victims:
                v.preemptions += 1
                v.reason = f"preempted by {w.key} in quota {self.name}"
        w.admitted, w.reason = True, ""
        return victims

    def _preempt(self, w: ElasticWorkload, runtime: Mapping[str, int], extra: Check | None) -> list[ElasticWorkload]:
        """PostFilter inside the group: the victims, evicted, or [] with nothing changed.

        The default group's workloads are never victims (DisableDefaultQuotaPreemption).
        Victims are kept only if ``w`` then passes every PreFilter check, so a failing
        non-preemptible min (which evictions cannot help) preempts nothing.
        """
        if self.name == k.DEFAULT_QUOTA or self.inner:
            return []
        admitted = {x.key: x for x in self.workloads.values() if x.admitted}
        chosen = preemption_victims(
            w.candidate(), [x.candidate() for x in admitted.values()], used=self.used(), runtime=runtime,
        )
        victims = [admitted[c.key] for c in chosen]
        for v in victims:
            v.admitted = False
        if victims and self.prefilter(w, runtime, extra=extra):
            for v in victims:
                v.admitted = True
            return []
        return victims

    def recycle(self, runtime: Mapping[str, int]) -> list[ElasticWorkload]:
        """Forced recycling: evict what keeps used above runtime (never in system or parent groups)."""
        if self.name == k.SYSTEM_QUOTA or self.inner:
            return []
        admitted = {x.key: x for x in self.workloads.values() if x.admitted}
        if not admitted:
            return []
        chosen = revoke_victims([x.candidate() for x in admitted.values()], used=self.used(), runtime=runtime)
        victims = [admitted[c.key] for c in chosen]
        for v in victims:
            v.admitted, v.preemptions = False, v.preemptions + 1
            v.reason = f"revoked: quota {self.name} used more than its runtime"
        return victims


@dataclass(frozen=True, slots=True)
class ElasticSetup:
    """What both engines start from: the groups, which are parents, the placed workloads, the Nodes' total."""

    groups: dict[str, ElasticGroup]
    inner: frozenset[str]
    workloads: list[ElasticWorkload]
    node_total: Resources | None  # None: no Node modelled, the top-level groups' max is the total
    shown: frozenset[str]  # the system group is reported only when something refers to it

    def states(self) -> dict[str, GroupState]:
        states = {name: GroupState(g, inner=name in self.inner) for name, g in self.groups.items()}
        for w in self.workloads:
            states[w.group].workloads[w.key] = w
        return states

    def reported(self, name: str) -> bool:
        return name != k.SYSTEM_QUOTA or name in self.shown


def prepare(quotas: list[dict], workloads: list[dict], nodes: list[dict]) -> ElasticSetup:
    """Groups from the manifests (plus system and default), workloads placed, the Nodes' total."""
    groups: dict[str, ElasticGroup] = {}
    for obj in quotas:
        spec = _group_of_manifest(obj)
        if spec is not None and spec.name and spec.name != k.ROOT_QUOTA:
            groups[spec.name] = spec
    for builtin in sorted(OUTSIDE_TREE):
        groups.setdefault(builtin, ElasticGroup(name=builtin, max=dict(k.DEFAULT_GROUP_MAX)))

    has_children = {g.parent for g in groups.values() if g.name not in OUTSIDE_TREE}
    inner = {n for n, g in groups.items() if n not in OUTSIDE_TREE and (g.is_parent or n in has_children)}

    items: list[ElasticWorkload] = []
    for obj in workloads:
        meta = obj.get("metadata") or {}
        group = _place(obj, groups, quotas)
        requested = workload_requests(obj)
        max_keys = groups[group].max
        items.append(ElasticWorkload(
            key=f"{meta.get('namespace') or 'default'}/{meta.get('name')}",
            group=group,
            request={r: v for r, v in requested.items() if r in max_keys},
            priority=int((obj.get("spec") or {}).get("priority") or 0),
            created=_timestamp(meta.get("creationTimestamp")),
            non_preemptible=k.is_non_preemptible(obj),
            admitted=bool((obj.get("status") or {}).get("admission")),
        ))

    node_total = None
    if nodes:
        node_total = sum_resources(
            k.resource_list((n.get("status") or {}).get("allocatable")) for n in nodes
        )
    shown = {k.name_of(o) for o in quotas} | {w.group for w in items} | {k.DEFAULT_QUOTA}
    return ElasticSetup(groups, frozenset(inner), items, node_total, frozenset(shown))


def result_of(w: ElasticWorkload) -> ElasticWorkloadResult:
    return ElasticWorkloadResult(
        state="admitted" if w.admitted else "pending",
        cluster_queue=w.group if w.admitted else None,
        preemptions=w.preemptions,
        reason="" if w.admitted else w.reason,
    )


def outcome_of(setup: ElasticSetup, results: Mapping[str, ElasticWorkloadResult],
               statuses: Mapping[str, GroupStatus]) -> ElasticOutcome:
    """The outcome in the input's workload order, groups by name."""
    return ElasticOutcome(
        workloads={w.key: results[w.key] for w in setup.workloads},
        quota_groups={name: statuses[name] for name in sorted(statuses) if setup.reported(name)},
    )


@dataclass(slots=True)
class _Run:
    setup: ElasticSetup
    check_parent_quota: bool
    states: dict[str, GroupState] = field(default_factory=dict)
    _quota: dict[str, GroupQuota] = field(default_factory=dict)
    _total: Resources | None = None

    def __post_init__(self) -> None:
        self.states = self.setup.states()

    def quota(self) -> dict[str, GroupQuota]:
        """Current amounts; recomputed only when the root's total moves."""
        groups = self.setup.groups
        if self.setup.node_total is None:
            total = implicit_cluster_total(groups)
        else:
            # updateClusterTotalResourceNoLock: quotav1.Subtract keeps every key.
            outside = sum_resources(self.states[g].used() for g in sorted(OUTSIDE_TREE))
            total = dict(self.setup.node_total)
            for r, v in outside.items():
                total[r] = total.get(r, 0) - v
        if total != self._total or not self._quota:
            own = {n: s.own_request() for n, s in self.states.items() if not s.inner}
            self._quota = compute_runtime(groups, own, total)
            self._total = total
        return self._quota

    def runtime(self, group: str) -> Resources:
        return self.quota()[group].runtime

    def ancestors(self, group: str) -> list[str]:
        if group in OUTSIDE_TREE:
            return []
        groups = self.setup.groups
        chain: list[str] = []
        parent = groups[group].parent
        while parent in groups and parent not in chain and parent != group:
            chain.append(parent)
            parent = groups[parent].parent
        return chain

    def parent_check(self, w: ElasticWorkload) -> str:
        """EnableCheckParentQuota (off by default): every ancestor's used + request <= runtime."""
        for parent in self.ancestors(w.group):
            used = sum_resources(
                x.request for x in self.setup.workloads if x.admitted and parent in self.ancestors(x.group)
            )
            reason = _over(parent, "used", used, w.request, "runtime", self.runtime(parent))
            if reason:
                return reason
        return ""

    def extra(self) -> Check | None:
        return self.parent_check if self.check_parent_quota else None

    def schedule_pass(self) -> bool:
        changed = False
        for w in sorted((w for w in self.setup.workloads if not w.admitted), key=ElasticWorkload.order):
            if self.states[w.group].schedule(w, self.runtime(w.group), extra=self.extra()) is not None:
                changed = True
        return changed

    def revoke_pass(self) -> bool:
        changed = False
        for name in sorted(self.states):
            if self.states[name].recycle(self.runtime(name)):
                changed = True
        return changed


def _over(group: str, used_word: str, used: Mapping[str, int], request: Mapping[str, int],
          limit_word: str, limit: Mapping[str, int]) -> str:
    after = {r: used.get(r, 0) + v for r, v in request.items()}
    dims = exceeded(after, limit)
    if not dims:
        return ""
    parts = [
        f"{r} {used_word} {format_milli(used.get(r, 0), resource=r)} + request "
        f"{format_milli(request[r], resource=r)} > {limit_word} {format_milli(limit[r], resource=r)}"
        for r in dims
    ]
    return f"quota {group}: " + "; ".join(parts)


def _place(
    obj: Mapping[str, Any], groups: Mapping[str, ElasticGroup], quotas: Sequence[Mapping[str, Any]]
) -> str:
    """GetQuotaName + getPodAssociateQuotaName."""
    name = k.workload_quota_label(obj)
    if not name:
        ns = k.namespace_of(obj)
        by_ns = [q for q in quotas if k.name_of(q) == ns and k.namespace_of(q) == ns]
        listed = [q for q in quotas if ns in k.quota_namespaces(q)]
        name = k.name_of((by_ns or listed or [{}])[0]) or k.DEFAULT_QUOTA
    return name if name in groups and name != k.ROOT_QUOTA else k.DEFAULT_QUOTA


def max_rounds_for(setup: ElasticSetup) -> int:
    """A bound no run to quiescence reaches (each round admits or evicts something)."""
    return 4 * len(setup.workloads) + 4


def run_elastic(
    quotas: list[dict],
    workloads: list[dict],
    nodes: list[dict],
    *,
    check_parent_quota: bool = False,
    max_rounds: int | None = None,
) -> ElasticOutcome:
    """Admit, preempt and recycle until nothing changes; see the module notes."""
    setup = prepare(quotas, workloads, nodes)
    run = _Run(setup, check_parent_quota)
    for _ in range(max_rounds if max_rounds is not None else max_rounds_for(setup)):
        changed = run.schedule_pass()
        if run.revoke_pass():
            changed = True
        if not changed:
            break
    for w in setup.workloads:
        if not w.admitted:
            w.reason = run.states[w.group].prefilter(w, run.runtime(w.group), extra=run.extra()) or w.reason

    statuses = {
        name: GroupStatus(request=q.request, runtime=q.runtime, min=q.min, max=q.max)
        for name, q in run.quota().items()
    }
    return outcome_of(setup, {w.key: result_of(w) for w in setup.workloads}, statuses)
