"""One elastic quota group's workloads and every decision that needs nothing else.

Split from ``scheduling/elastic.py``: :class:`GroupState` is what both engines share
one group at a time (the pure ``ElasticRun`` keeps one per group, the actor engine one
inside each group actor), so the two decide identically.  Given the group's runtime it
decides PreFilter (``used + request <= runtime``, and for a non-preemptible workload
``non-preemptible used + request <= min``), PostFilter preemption inside the group, and
forced recycling, including its delay: the timer starts when used is first seen above
runtime and the group is recycled once that has lasted ``delayEvictTime``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kueued.model import koordinator as k
from kueued.model.quantity import format_milli
from kueued.quota.elastic import ElasticGroup, Resources, sum_resources
from kueued.scheduling.elastic_victims import Candidate, exceeded, preemption_victims, revoke_victims

__all__ = ["ElasticWorkload", "GroupState", "Check", "over"]


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

    def spec_key(self) -> tuple[Any, ...]:
        """What its manifest says (not what the engine decided): tells a changed workload apart."""
        return (self.group, tuple(sorted(self.request.items())), self.priority, self.created, self.non_preemptible)

    def carry(self, old: ElasticWorkload) -> ElasticWorkload:
        """Take over what the engine decided for an earlier version of the same workload."""
        self.admitted, self.preemptions, self.reason = old.admitted, old.preemptions, old.reason
        return self


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
    over_since: float | None = None  # forced recycling's timer: when used was first seen above runtime
    # (used, runtime) when recycling last found nothing to evict: no deadline until either moves
    _futile: tuple[Any, ...] | None = field(default=None, init=False, repr=False)

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
        reason = over(self.name, "used", self.used(), w.request, "runtime", runtime)
        if not reason and w.non_preemptible:
            reason = over(self.name, "non-preemptible used", self.used(non_preemptible=True),
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

    def recycle(self, runtime: Mapping[str, int], *, now: float | None = None,
                delay: float = 0.0) -> list[ElasticWorkload]:
        """Forced recycling: evict what keeps used above runtime (never in system or parent groups).

        Only once used has stayed above runtime for ``delay`` (see :meth:`recycle_due`);
        ``now`` None means a run without a clock, where the delay has always elapsed.
        """
        if self.name == k.SYSTEM_QUOTA or self.inner or not self.recycle_due(runtime, now=now, delay=delay):
            return []
        admitted = {x.key: x for x in self.workloads.values() if x.admitted}
        chosen = revoke_victims([x.candidate() for x in admitted.values()], used=self.used(), runtime=runtime)
        victims = [admitted[c.key] for c in chosen]
        for v in victims:
            v.admitted, v.preemptions = False, v.preemptions + 1
            v.reason = f"revoked: quota {self.name} used more than its runtime"
        self._futile = None if victims else self._snapshot(runtime)
        return victims

    def recycle_due(self, runtime: Mapping[str, int], *, now: float | None, delay: float) -> bool:
        """QuotaOverUsedGroupMonitor.monitor: has used stayed above runtime for ``delay``?

        The timer starts the first time used is seen above runtime and stops as soon as it
        is not.  Koordinator triggers when the over-use has lasted *longer* than the delay,
        sampled every second; on a virtual clock an instant has no "just after", so here it
        triggers once the over-use has lasted the delay.  Like Koordinator, the timer
        restarts when it triggers, so a group still over afterwards (evictions refused,
        only non-preemptible workloads left) waits a whole delay again.
        """
        if not exceeded(self.used(), runtime):
            self.over_since = None
            return False
        if now is None:
            return True
        if self.over_since is None:
            self.over_since = now
        if now - self.over_since < delay:
            return False
        self.over_since = now
        return True

    def recycle_deadline(self, runtime: Mapping[str, int], delay: float) -> float | None:
        """When recycling is next due, or None: not over, or the last attempt could evict nothing
        and neither used nor runtime has moved since (waking up again would change nothing)."""
        if self.over_since is None or self._futile == self._snapshot(runtime):
            return None
        return self.over_since + delay

    def _snapshot(self, runtime: Mapping[str, int]) -> tuple[Any, ...]:
        return (tuple(sorted(self.used().items())), tuple(sorted(runtime.items())))


def over(group: str, used_word: str, used: Mapping[str, int], request: Mapping[str, int],
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
