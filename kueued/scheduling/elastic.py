"""Run Koordinator's elastic quota scheduling: to quiescence, or event by event.

Input is what a cluster holds after ``kubectl apply``: the accepted ElasticQuota
manifests, Workload manifests (kueue.x-k8s.io/v1beta2 shape, one workload = one gang
admitted as a whole) and core v1 Nodes.  Output is where every workload ends up and what
every group's request and runtime is.

Data flow:

1. Groups come from the manifests (``scheduling.elastic_inputs`` reads them); the system
   and default groups always exist, with pluginArgs' max unless a manifest overrides it.
2. Each workload is placed in a group as GetQuotaName / getPodAssociateQuotaName do
   (``elastic_inputs.quota_of``).  Its request is the Kubernetes pod rule times
   ``count``, masked to the group's max keys (updatePodRequestNoLock).
3. Runtime (``quota.elastic.compute_runtime``) depends on requests, which count pending
   and admitted workloads alike, so it moves when a workload arrives or finishes and when
   the cluster total does: the root shares the Nodes' allocatable (without Nodes, the
   top-level groups' max) minus what the system and default groups use
   (updateClusterTotalResourceNoLock).
4. Passes repeat until nothing changes.  A scheduling pass takes pending workloads by
   priority then creation time (the kube-scheduler queue) and runs PreFilter:
   ``used + request <= runtime`` on the leaf (keys present on both sides, equality fits),
   and for a non-preemptible workload ``non-preemptible used + request <= min``; on
   failure, PostFilter preemption inside the group (``elastic_victims``).  A failed
   workload never blocks the next one.  A recycling pass then evicts from every group
   whose used has exceeded its runtime for the recycling delay (Koordinator's
   ``delayEvictTime``, :class:`GroupState` keeps the timer).  Without a clock (``now`` is
   None: a run to quiescence, as the conformance scenarios are) the delay counts as
   elapsed; on a clock (``kueued simulate`` with arrivals, the daemon) a group must stay
   over for the whole delay.  Evicted workloads go back to the queue; their request still
   counts.  Every eviction is recorded as it happens (:class:`ElasticEviction`: who, by
   whom, why), for the report's eviction list.

Every decision needs only one group's workloads and that group's runtime, so it lives
on :class:`GroupState` (``scheduling/elastic_group.py``); :class:`ElasticRun` keeps one per group and walks them in the
order above, and the actor engine (``actors/elastic/``) keeps one inside each group
actor and walks them in the same order, so the two decide identically.  Both start
from :func:`prepare` and report with :func:`result_of` and :func:`outcome_of`.

Nothing here does I/O; the result is a plain value for the CLI to print.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kueued.model import koordinator as k
from kueued.quota.elastic import (
    OUTSIDE_TREE,
    ElasticGroup,
    GroupQuota,
    Resources,
    compute_runtime,
    implicit_cluster_total,
    sum_resources,
)
from kueued.scheduling.elastic_group import Check, ElasticWorkload, GroupState, over
from kueued.scheduling.elastic_inputs import created_at, group_of_manifest, quota_of, workload_requests

__all__ = [
    "ElasticWorkloadResult", "GroupStatus", "ElasticEviction", "ElasticOutcome", "ElasticWorkload", "GroupState",
    "ElasticSetup", "ElasticRun", "prepare", "result_of", "outcome_of", "max_rounds_for", "run_elastic",
    "workload_requests", "node_total_of", "DEFAULT_DELAY_EVICT_TIME", "PREEMPTED", "REVOKED",
]

from kueued.model.settings import DEFAULT_DELAY_EVICT_TIME  # noqa: E402 - re-exported: actors read it here


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


PREEMPTED = "Preempted"
"""Eviction reason: preempted inside its group by a pending workload of higher priority (PostFilter)."""
REVOKED = "Revoked"
"""Eviction reason: forced recycling took it back from a group over its runtime (Koordinator's
QuotaOverUsedRevokeController, which "revokes pods due to quota overused")."""


class ElasticEviction(msgspec.Struct, frozen=True):
    """One eviction, as the report lists it: the victim, the preemptor ("" for forced recycling), why."""

    workload: str
    by: str
    reason: str

    @classmethod
    def preempted(cls, victim: str, *, by: str) -> ElasticEviction:
        return cls(victim, by, PREEMPTED)

    @classmethod
    def revoked(cls, victim: str) -> ElasticEviction:
        return cls(victim, "", REVOKED)


class ElasticOutcome(msgspec.Struct, frozen=True):
    workloads: dict[str, ElasticWorkloadResult]
    quota_groups: dict[str, GroupStatus]
    evictions: tuple[ElasticEviction, ...] = ()  # in the order they happened


@dataclass(frozen=True, slots=True)
class ElasticSetup:
    """What both engines start from: the groups, which are parents, the placed workloads, the Nodes' total."""

    groups: dict[str, ElasticGroup]
    inner: frozenset[str]
    workloads: list[ElasticWorkload]
    node_total: Resources | None  # None: no Node modelled, the top-level groups' max is the total
    shown: frozenset[str]  # the system group is reported only when something refers to it
    quotas: tuple[dict, ...] = ()  # the accepted ElasticQuota manifests: where a workload goes, where status goes

    def states(self) -> dict[str, GroupState]:
        states = {name: GroupState(g, inner=name in self.inner) for name, g in self.groups.items()}
        for w in self.workloads:
            states[w.group].workloads[w.key] = w
        return states

    def reported(self, name: str) -> bool:
        return name != k.SYSTEM_QUOTA or name in self.shown

    def place(self, obj: Mapping[str, Any]) -> ElasticWorkload:
        """A workload arriving on its own, read and placed exactly as :func:`prepare` would."""
        return _workload_of(obj, self.groups, self.quotas)

    def topology(self) -> tuple[Any, ...]:
        """Everything but the workloads and the Nodes' amounts: when it moves, the tree is rebuilt."""
        return (self.groups, self.inner, self.node_total is None)


def prepare(quotas: list[dict], workloads: list[dict], nodes: list[dict]) -> ElasticSetup:
    """Groups from the manifests (plus system and default), workloads placed, the Nodes' total."""
    groups: dict[str, ElasticGroup] = {}
    for obj in quotas:
        spec = group_of_manifest(obj)
        if spec is not None and spec.name and spec.name != k.ROOT_QUOTA:
            groups[spec.name] = spec
    for builtin in sorted(OUTSIDE_TREE):
        groups.setdefault(builtin, ElasticGroup(name=builtin, max=dict(k.DEFAULT_GROUP_MAX)))

    has_children = {g.parent for g in groups.values() if g.name not in OUTSIDE_TREE}
    inner = {n for n, g in groups.items() if n not in OUTSIDE_TREE and (g.is_parent or n in has_children)}
    items = [_workload_of(obj, groups, quotas) for obj in workloads]
    shown = {k.name_of(o) for o in quotas} | {w.group for w in items} | {k.DEFAULT_QUOTA}
    return ElasticSetup(groups, frozenset(inner), items, node_total_of(nodes), frozenset(shown), tuple(quotas))


def node_total_of(nodes: Iterable[Mapping[str, Any]]) -> Resources | None:
    """The Nodes' allocatable summed; None without Nodes (the cluster is then the top-level groups' max).
    A Node being deleted counts for nothing (Koordinator's ``OnNodeAdd`` skips it)."""
    nodes = list(nodes)
    if not nodes:
        return None
    return sum_resources(k.resource_list((n.get("status") or {}).get("allocatable")) for n in nodes
                         if not (n.get("metadata") or {}).get("deletionTimestamp"))


def _workload_of(obj: Mapping[str, Any], groups: Mapping[str, ElasticGroup],
                 quotas: Iterable[Mapping[str, Any]]) -> ElasticWorkload:
    meta = obj.get("metadata") or {}
    group = quota_of(obj, groups, list(quotas))
    max_keys = groups[group].max
    return ElasticWorkload(
        key=f"{meta.get('namespace') or 'default'}/{meta.get('name')}",
        group=group,
        request={r: v for r, v in workload_requests(obj).items() if r in max_keys},
        priority=int((obj.get("spec") or {}).get("priority") or 0),
        created=created_at(meta.get("creationTimestamp")),
        non_preemptible=k.is_non_preemptible(obj),
        admitted=bool((obj.get("status") or {}).get("admission")),
    )


def result_of(w: ElasticWorkload) -> ElasticWorkloadResult:
    return ElasticWorkloadResult(
        state="admitted" if w.admitted else "pending",
        cluster_queue=w.group if w.admitted else None,
        preemptions=w.preemptions,
        reason="" if w.admitted else w.reason,
    )


def outcome_of(setup: ElasticSetup, results: Mapping[str, ElasticWorkloadResult],
               statuses: Mapping[str, GroupStatus], evictions: Iterable[ElasticEviction] = ()) -> ElasticOutcome:
    """The outcome in the input's workload order (workloads that arrived later after them), groups by name,
    evictions as they happened."""
    order = dict.fromkeys([*(w.key for w in setup.workloads), *results])
    return ElasticOutcome(
        workloads={key: results[key] for key in order if key in results},
        quota_groups={name: statuses[name] for name in sorted(statuses) if setup.reported(name)},
        evictions=tuple(evictions),
    )


Decision = tuple[str, ElasticWorkload]  # ("admit" | "evict", the workload), in the order they happened


@dataclass(slots=True)
class ElasticRun:
    """The pure engine: every group's state, the runtimes, passes; workloads may come and go.

    ``decisions`` records admissions and evictions as they happen (victims before the
    admission they make room for), for a timeline to read and clear; ``evictions`` keeps
    every eviction of the run with its preemptor and reason, for the outcome; ``delay`` is
    the forced recycling delay, in the unit of the ``now`` given to :meth:`round`.
    """

    setup: ElasticSetup
    check_parent_quota: bool = False
    delay: float = 0.0
    states: dict[str, GroupState] = field(init=False)
    workloads: dict[str, ElasticWorkload] = field(init=False)
    decisions: list[Decision] = field(default_factory=list)
    evictions: list[ElasticEviction] = field(default_factory=list)
    _quota: dict[str, GroupQuota] = field(default_factory=dict)
    _total: Resources | None = None

    def __post_init__(self) -> None:
        self.states = self.setup.states()
        self.workloads = {w.key: w for w in self.setup.workloads}

    # --- workloads come and go ---------------------------------------------------------------
    def arrive(self, w: ElasticWorkload) -> None:
        """A new workload (or a new version of one, which keeps what was decided for it)."""
        old = self.workloads.get(w.key)
        if old is not None:
            self.finish(w.key)
            w.carry(old)
        self.workloads[w.key] = w
        self.states[w.group].workloads[w.key] = w
        self._quota = {}  # its request moves the runtimes

    def finish(self, key: str) -> bool:
        """A workload finished or was deleted: its usage and its request are gone."""
        w = self.workloads.pop(key, None)
        if w is None:
            return False
        del self.states[w.group].workloads[key]
        self._quota = {}
        return True

    # --- amounts -----------------------------------------------------------------------------
    def quota(self) -> dict[str, GroupQuota]:
        """Current amounts; recomputed when the root's total or a request moves."""
        groups = self.setup.groups
        # updateClusterTotalResourceNoLock: what the system and default groups use is not shared
        # (quotav1.Subtract keeps every key), whether the total is the Nodes' or the implicit one.
        outside = sum_resources(self.states[g].used() for g in sorted(OUTSIDE_TREE))
        total = dict(implicit_cluster_total(groups) if self.setup.node_total is None else self.setup.node_total)
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
                x.request for x in self.workloads.values() if x.admitted and parent in self.ancestors(x.group)
            )
            reason = over(parent, "used", used, w.request, "runtime", self.runtime(parent))
            if reason:
                return reason
        return ""

    def extra(self) -> Check | None:
        return self.parent_check if self.check_parent_quota else None

    # --- passes ------------------------------------------------------------------------------
    def schedule_pass(self) -> bool:
        changed = False
        for w in sorted((w for w in self.workloads.values() if not w.admitted), key=ElasticWorkload.order):
            victims = self.states[w.group].schedule(w, self.runtime(w.group), extra=self.extra())
            if victims is not None:
                self.decisions.extend(("evict", v) for v in victims)
                self.evictions.extend(ElasticEviction.preempted(v.key, by=w.key) for v in victims)
                self.decisions.append(("admit", w))
                changed = True
        return changed

    def revoke_pass(self, now: float | None = None) -> bool:
        changed = False
        for name in sorted(self.states):
            victims = self.states[name].recycle(self.runtime(name), now=now, delay=self.delay)
            self.decisions.extend(("evict", v) for v in victims)
            self.evictions.extend(ElasticEviction.revoked(v.key) for v in victims)
            changed = changed or bool(victims)
        return changed

    def round(self, now: float | None = None) -> bool:
        """A scheduling pass and a recycling pass; whether anything changed."""
        changed = self.schedule_pass()
        return self.revoke_pass(now) or changed

    def run_to_quiescence(self, now: float | None = None, *, max_rounds: int | None = None) -> int:
        limit = max_rounds if max_rounds is not None else 4 * len(self.workloads) + 4
        for done in range(1, limit + 1):
            if not self.round(now):
                return done
        return limit

    def deadline(self) -> float | None:
        """When forced recycling is next due somewhere (None: nowhere)."""
        due = [s.recycle_deadline(self.runtime(n), self.delay) for n, s in self.states.items()]
        return min((d for d in due if d is not None), default=None)

    def outcome(self) -> ElasticOutcome:
        for w in self.workloads.values():
            if not w.admitted:
                w.reason = self.states[w.group].prefilter(w, self.runtime(w.group), extra=self.extra()) or w.reason
        statuses = {
            name: GroupStatus(request=q.request, runtime=q.runtime, min=q.min, max=q.max)
            for name, q in self.quota().items()
        }
        return outcome_of(self.setup, {key: result_of(w) for key, w in self.workloads.items()}, statuses,
                          self.evictions)


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
    """Admit, preempt and recycle until nothing changes, without a clock; see the module notes."""
    run = ElasticRun(prepare(quotas, workloads, nodes), check_parent_quota)
    run.run_to_quiescence(max_rounds=max_rounds)
    return run.outcome()
