"""Who gets evicted inside one elastic quota group: preemption and forced recycling.

Koordinator never takes quota back across groups (the seed: priorities of different
business lines are not comparable).  Two mechanisms evict inside a group:

* **Preemption** (plugin PostFilter, ``preempt.go`` SelectVictimsOnNode): a pending
  workload that does not fit may evict admitted workloads of the *same* group that are
  preemptible and of strictly lower priority.  All candidates are removed, then
  reprieved from the most important down (MoreImportantPod: higher priority, then
  earlier start) while ``Mask(used + request, keys(request)) <= runtime`` still holds.
  Koordinator does not check that removing every candidate makes room; this simulation
  preempts only when it does, so no eviction is ever wasted.

* **Forced recycling** (``quota_overuse_revoke.go`` getToRevokePodList, with
  monitorAllQuotas): while a group's used exceeds its runtime, take admitted workloads
  from the least important up, skipping non-preemptible ones, with the running total
  masked to the taken workload's resource names (``Mask(used - req, keys(req))``, a
  quirk kept on purpose).  If still over, evict everything taken; otherwise give back
  from the most important taken one, keeping those that fit, and evict the rest.

Comparisons are quotav1.LessThanOrEqual: only resources present on both sides count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Candidate", "less_equal", "exceeded", "preemption_victims", "revoke_victims"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted workload as victim selection sees it (amounts in milli-units)."""

    key: str
    priority: int
    created: float
    request: Mapping[str, int]
    non_preemptible: bool = False

    def importance(self) -> tuple[int, float, str]:
        """Sort key, most important first (MoreImportantPod; the key breaks ties)."""
        return (-self.priority, self.created, self.key)


def exceeded(used: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    """Resources where ``used > limit``, among those present in both (sorted)."""
    return sorted(r for r, v in limit.items() if r in used and used[r] > v)


def less_equal(used: Mapping[str, int], limit: Mapping[str, int]) -> bool:
    return not exceeded(used, limit)


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for r, v in b.items():
        out[r] = out.get(r, 0) + v
    return out


def _masked_sum(used: Mapping[str, int], request: Mapping[str, int], sign: int) -> dict[str, int]:
    """Mask(used +/- request, keys(request))."""
    return {r: used.get(r, 0) + sign * v for r, v in request.items()}


def preemption_victims(
    preemptor: Candidate,
    admitted: Sequence[Candidate],
    *,
    used: Mapping[str, int],
    runtime: Mapping[str, int],
) -> list[Candidate]:
    """Victims that let ``preemptor`` fit in its group, or [] when preemption cannot help.

    ``admitted`` are the group's admitted workloads and ``used`` their summed requests.
    """
    candidates = [
        v for v in admitted if not v.non_preemptible and preemptor.priority > v.priority
    ]
    if not candidates:
        return []
    remaining = dict(used)
    for v in candidates:
        for r, amount in v.request.items():
            remaining[r] = remaining.get(r, 0) - amount
    if not less_equal(_masked_sum(remaining, preemptor.request, +1), runtime):
        return []
    victims: list[Candidate] = []
    for v in sorted(candidates, key=Candidate.importance):
        back = _add(remaining, v.request)
        if less_equal(_masked_sum(back, preemptor.request, +1), runtime):
            remaining = back
        else:
            victims.append(v)
    return victims


def revoke_victims(
    admitted: Sequence[Candidate],
    *,
    used: Mapping[str, int],
    runtime: Mapping[str, int],
) -> list[Candidate]:
    """getToRevokePodList: what forced recycling evicts from an over-used group."""
    current: dict[str, int] = dict(used)
    if less_equal(current, runtime):
        return []
    taken: list[Candidate] = []
    for pod in sorted(admitted, key=Candidate.importance, reverse=True):
        if less_equal(current, runtime):
            break
        if pod.non_preemptible:
            continue
        current = _masked_sum(current, pod.request, -1)
        taken.append(pod)
    if not less_equal(current, runtime):
        return taken
    victims: list[Candidate] = []
    for pod in reversed(taken):
        back = _add(current, pod.request)
        if less_equal(back, runtime):
            current = back
        else:
            victims.append(pod)
    return victims
