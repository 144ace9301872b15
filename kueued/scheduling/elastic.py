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

Nothing here does I/O; the result is a plain value for the CLI to print.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

__all__ = ["ElasticWorkloadResult", "GroupStatus", "ElasticOutcome", "run_elastic", "workload_requests"]


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
class _Workload:
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


@dataclass(slots=True)
class _Run:
    groups: dict[str, ElasticGroup]
    workloads: list[_Workload]
    node_total: Resources | None
    check_parent_quota: bool
    inner: set[str] = field(default_factory=set)
    _quota: dict[str, GroupQuota] = field(default_factory=dict)
    _total: Resources | None = None

    def used(self, group: str, *, non_preemptible: bool = False) -> Resources:
        return sum_resources(
            w.request for w in self.workloads
            if w.admitted and w.group == group and (w.non_preemptible or not non_preemptible)
        )

    def quota(self) -> dict[str, GroupQuota]:
        """Current amounts; recomputed only when the root's total moves."""
        if self.node_total is None:
            total = implicit_cluster_total(self.groups)
        else:
            # updateClusterTotalResourceNoLock: quotav1.Subtract keeps every key.
            outside = sum_resources(self.used(g) for g in sorted(OUTSIDE_TREE))
            total = dict(self.node_total)
            for r, v in outside.items():
                total[r] = total.get(r, 0) - v
        if total != self._total or not self._quota:
            own: dict[str, Resources] = {}
            for w in self.workloads:
                if w.group not in self.inner:
                    own[w.group] = sum_resources([own.get(w.group, {}), w.request])
            self._quota = compute_runtime(self.groups, own, total)
            self._total = total
        return self._quota

    def runtime(self, group: str) -> Resources:
        return self.quota()[group].runtime

    def ancestors(self, group: str) -> list[str]:
        if group in OUTSIDE_TREE:
            return []
        chain: list[str] = []
        parent = self.groups[group].parent
        while parent in self.groups and parent not in chain and parent != group:
            chain.append(parent)
            parent = self.groups[parent].parent
        return chain

    def prefilter(self, w: _Workload) -> str:
        """Why ``w`` cannot be admitted now, or "" when it fits."""
        if w.group in self.inner:
            return f"quota {w.group} is a parent quota; workloads may only use leaf quotas"
        reason = _over(w.group, "used", self.used(w.group), w.request, "runtime", self.runtime(w.group))
        if reason:
            return reason
        if w.non_preemptible:
            reason = _over(w.group, "non-preemptible used", self.used(w.group, non_preemptible=True),
                           w.request, "min", self.groups[w.group].min)
            if reason:
                return reason
        if self.check_parent_quota:  # EnableCheckParentQuota (off by default)
            for parent in self.ancestors(w.group):
                used = sum_resources(
                    x.request for x in self.workloads if x.admitted and parent in self.ancestors(x.group)
                )
                reason = _over(parent, "used", used, w.request, "runtime", self.runtime(parent))
                if reason:
                    return reason
        return ""

    def try_preempt(self, w: _Workload) -> list[_Workload]:
        """PostFilter inside ``w``'s group: the victims, evicted, or [] with nothing changed.

        The default group's workloads are never victims (DisableDefaultQuotaPreemption).
        Victims are kept only if ``w`` then passes every PreFilter check, so a failing
        non-preemptible min (which evictions cannot help) or ancestor check preempts
        nothing.
        """
        if w.group == k.DEFAULT_QUOTA or w.group in self.inner:
            return []
        admitted = {x.key: x for x in self.workloads if x.admitted and x.group == w.group}
        chosen = preemption_victims(
            w.candidate(), [x.candidate() for x in admitted.values()],
            used=self.used(w.group), runtime=self.runtime(w.group),
        )
        victims = [admitted[c.key] for c in chosen]
        for v in victims:
            v.admitted = False
        if victims and self.prefilter(w):
            for v in victims:
                v.admitted = True
            return []
        return victims

    def schedule_pass(self) -> bool:
        changed = False
        pending = sorted((w for w in self.workloads if not w.admitted),
                         key=lambda w: (-w.priority, w.created, w.key))
        for w in pending:
            reason = self.prefilter(w)
            if reason:
                victims = self.try_preempt(w)
                if not victims:
                    w.reason = reason
                    continue
                for v in victims:
                    v.preemptions += 1
                    v.reason = f"preempted by {w.key} in quota {w.group}"
            w.admitted, w.reason = True, ""
            changed = True
        return changed

    def revoke_pass(self) -> bool:
        changed = False
        for group in sorted(self.groups):
            if group == k.SYSTEM_QUOTA or group in self.inner:
                continue
            admitted = {x.key: x for x in self.workloads if x.admitted and x.group == group}
            if not admitted:
                continue
            chosen = revoke_victims([x.candidate() for x in admitted.values()],
                                    used=self.used(group), runtime=self.runtime(group))
            for c in chosen:
                v = admitted[c.key]
                v.admitted, v.preemptions = False, v.preemptions + 1
                v.reason = f"revoked: quota {group} used more than its runtime"
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


def run_elastic(
    quotas: list[dict],
    workloads: list[dict],
    nodes: list[dict],
    *,
    check_parent_quota: bool = False,
    max_rounds: int | None = None,
) -> ElasticOutcome:
    """Admit, preempt and recycle until nothing changes; see the module notes."""
    groups: dict[str, ElasticGroup] = {}
    for obj in quotas:
        group = _group_of_manifest(obj)
        if group is not None and group.name and group.name != k.ROOT_QUOTA:
            groups[group.name] = group
    for builtin in sorted(OUTSIDE_TREE):
        groups.setdefault(builtin, ElasticGroup(name=builtin, max=dict(k.DEFAULT_GROUP_MAX)))

    has_children = {g.parent for g in groups.values() if g.name not in OUTSIDE_TREE}
    inner = {n for n, g in groups.items() if n not in OUTSIDE_TREE and (g.is_parent or n in has_children)}

    items: list[_Workload] = []
    for obj in workloads:
        meta = obj.get("metadata") or {}
        group = _place(obj, groups, quotas)
        requested = workload_requests(obj)
        max_keys = groups[group].max
        items.append(_Workload(
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
    run = _Run(groups=groups, workloads=items, node_total=node_total,
               check_parent_quota=check_parent_quota, inner=inner)

    for _ in range(max_rounds if max_rounds is not None else 4 * len(items) + 4):
        changed = run.schedule_pass()
        if run.revoke_pass():
            changed = True
        if not changed:
            break
    for w in items:
        if not w.admitted:
            w.reason = run.prefilter(w) or w.reason

    # The system group is reported only when something refers to it.
    shown = {k.name_of(o) for o in quotas} | {w.group for w in items} | {k.DEFAULT_QUOTA}
    statuses = {
        name: GroupStatus(request=q.request, runtime=q.runtime, min=q.min, max=q.max)
        for name, q in sorted(run.quota().items())
        if name != k.SYSTEM_QUOTA or name in shown
    }
    results = {
        w.key: ElasticWorkloadResult(
            state="admitted" if w.admitted else "pending",
            cluster_queue=w.group if w.admitted else None,
            preemptions=w.preemptions,
            reason="" if w.admitted else w.reason,
        )
        for w in items
    }
    return ElasticOutcome(workloads=results, quota_groups=statuses)
