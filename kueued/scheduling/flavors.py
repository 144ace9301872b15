"""Flavor assignment: which ResourceFlavor each requested resource of a workload gets.

Mirrors Kueue's ``pkg/scheduler/flavorassigner/flavorassigner.go``.  Pod sets are
assigned in order; what earlier pod sets put on a (flavor, resource) counts against
later ones.  Within a pod set, every resource of one resource group gets the same
flavor, tried in the ClusterQueue's listed order:

1. skip a flavor whose taints the pod set does not tolerate, or whose nodeLabels
   contradict the pod set's nodeSelector / required node affinity (only keys the
   flavor defines are compared);
2. per resource, :func:`fits_resource_quota` grades the flavor (``Mode``): NO_FIT when
   the request exceeds what the ClusterQueue could ever get; FIT (with a borrowing
   level) when it fits now; otherwise, if preemption may help (request within nominal,
   a subtree that could fit it, or borrowWithinCohort), the preemption oracle says
   RECLAIM / PREEMPT / NO_CANDIDATES;
3. the flavor's grade is its worst resource's; the best flavor wins (``is_preferred``)
   and ``should_try_next`` decides whether to look further (flavorFungibility).

A resource requested at zero takes part when the queue covers it: it is graded with its
group (0 plus what earlier pod sets put there), gets the group's flavor and is listed in
the admission, but adds no usage (``TotalRequestsFor``).  Where the queue does not cover
it, it is ignored (kueue#8079).

The oracle is injected (``Oracle``), so this module knows nothing of how preemption
candidates are found.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any

from kueued.model import api
from kueued.quota import node as qn
from kueued.quota.node import FR
from kueued.scheduling.snapshot import ClusterQueueSnapshot, ResourceGroup, Snapshot
from kueued.scheduling.workload import PodSetRequest, WorkloadInfo

__all__ = ["Mode", "Assignment", "PodSetAssignment", "assign_flavors", "Oracle", "Reads", "reads_hold",
           "lowest_fitting_height", "flavor_mismatch"]


class Mode(enum.IntEnum):
    """Ordered by preference, as Kueue's granular modes."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    @property
    def needs_preemption(self) -> bool:
        return 0 < self < 4  # NO_CANDIDATES, PREEMPT, RECLAIM: an int comparison, asked per resource


Oracle = Callable[[ClusterQueueSnapshot, WorkloadInfo, FR, int], "Mode | tuple[Mode, int]"]
"""Kueue's ``SimulatePreemption``: the mode, optionally with the borrowing level the
workload would have once the victims are gone (``borrowAfterPreemptions``)."""

Reads = list[tuple[FR, int, int, bool, int]]
"""What :func:`fits_resource_quota` read of the tree's usage, call by call: (FR, amount,
lowest fitting height, may reclaim, available).  The rest of what it reads is quota and spec."""


def reads_hold(cq: ClusterQueueSnapshot, reads: Iterable[tuple[FR, int, int, bool, int]]) -> bool:
    """Would each of these calls read the same values of ``cq``'s tree now?"""
    for fr, value, borrow, may_reclaim, avail in reads:
        if cq.available(fr) != avail or lowest_fitting_height(cq, fr, value) != (borrow, may_reclaim):
            return False
    return True


class ResourceChoice:
    __slots__ = ("flavor", "mode", "borrow", "value")

    def __init__(self, flavor: str, mode: Mode, borrow: int, value: int) -> None:
        self.flavor = flavor
        self.mode = mode
        self.borrow = borrow
        self.value = value


class PodSetAssignment:
    __slots__ = ("name", "count", "choices", "reasons", "requests")

    def __init__(self, ps: PodSetRequest) -> None:
        self.name = ps.name
        self.count = ps.count
        self.requests = ps.requests
        self.choices: dict[str, ResourceChoice] = {}
        self.reasons: list[str] = []

    @property
    def mode(self) -> Mode:
        if self.reasons and not self.choices and self.requests:
            return Mode.NO_FIT
        mode = Mode.FIT
        for c in self.choices.values():
            if c.mode < mode:
                mode = c.mode
        return mode

    @property
    def flavors(self) -> dict[str, str]:
        return {r: c.flavor for r, c in self.choices.items()}


class Assignment:
    """The outcome of flavor assignment for one workload."""

    __slots__ = ("pod_sets", "usage", "mode", "borrowing", "reasons")

    def __init__(self) -> None:
        self.pod_sets: list[PodSetAssignment] = []
        self.usage: dict[FR, int] = {}
        self.mode = Mode.FIT
        self.borrowing = 0
        self.reasons: list[str] = []

    def add(self, psa: PodSetAssignment) -> None:
        self.pod_sets.append(psa)
        for res, choice in psa.choices.items():
            self.borrowing = max(self.borrowing, choice.borrow)
            if psa.requests[res]:  # a zero request has a flavor but uses no quota (TotalRequestsFor)
                fr = (choice.flavor, res)
                self.usage[fr] = self.usage.get(fr, 0) + psa.requests[res]
        self.mode = min(self.mode, psa.mode)
        self.reasons.extend(psa.reasons)

    @property
    def borrows(self) -> bool:
        return self.borrowing > 0

    def frs_needing_preemption(self) -> set[FR]:
        return {(c.flavor, r) for psa in self.pod_sets for r, c in psa.choices.items()
                if c.mode.needs_preemption}

    def flavors(self) -> dict[str, dict[str, str]]:
        return {psa.name: psa.flavors for psa in self.pod_sets}

    def message(self) -> str:
        """Kueue's ``Assignment.Message``: per pod set that did not fit as it is, "couldn't assign
        flavors to pod set NAME: " and its reasons, sorted and comma-separated (``Status.Message``)."""
        parts = []
        for psa in self.pod_sets:
            reasons = psa.reasons
            if reasons:  # most often one reason (one flavor tried): no sorting to do
                text = reasons[0] if len(reasons) == 1 else ", ".join(sorted(set(reasons)))
                parts.append(f"couldn't assign flavors to pod set {psa.name}: {text}")
        return "; ".join(parts)


def assign_flavors(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo,
                   oracle: Oracle, reads: Reads | None = None) -> Assignment:
    """Kueue's flavor assignment.  ``reads``, when given, collects what it read of the tree's
    usage (:data:`Reads`): the assignment is a function of those values, the spec and the oracle."""
    out = Assignment()
    for ps in wl.pod_sets:
        psa = _assign_pod_set(snapshot, cq, wl, ps, out.usage, oracle, reads)
        out.add(psa)
        if psa.mode == Mode.NO_FIT:
            out.mode = Mode.NO_FIT
            break
    return out


def _assign_pod_set(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo, ps: PodSetRequest,
                    earlier: dict[FR, int], oracle: Oracle, reads: Reads | None) -> PodSetAssignment:
    psa = PodSetAssignment(ps)
    requests = dict(ps.requests)
    for res in ps.zeros:  # a zero request of a resource the queue does not cover is ignored (#8079)
        if res in cq.group_of:
            requests[res] = 0
    if "pods" in cq.group_of:
        requests["pods"] = ps.count * 1000
    psa.requests = requests
    for res in sorted(requests):
        if res in psa.choices:
            continue
        group = cq.group_of.get(res)
        if group is None:
            psa.choices.clear()
            psa.reasons.append(f"resource {res} unavailable in ClusterQueue {cq.name}")
            return psa
        chosen = _assign_group(snapshot, cq, wl, ps, group, requests, earlier, oracle, psa.reasons, reads)
        if chosen is None:
            psa.choices.clear()
            return psa
        psa.choices.update(chosen)
    return psa


def _assign_group(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo, ps: PodSetRequest,
                  group: ResourceGroup, requests: dict[str, int], earlier: dict[FR, int], oracle: Oracle,
                  reasons: list[str], reads: Reads | None) -> dict[str, ResourceChoice] | None:
    fungibility = cq.spec.flavor_fungibility
    wanted = [r for r in group.covered if r in requests]
    best: dict[str, ResourceChoice] | None = None
    best_mode, best_borrow = Mode.NO_FIT, 0
    for fname in group.flavors:
        flavor = snapshot.flavors.get(fname)
        if flavor is None:
            reasons.append(f"flavor {fname} not found")
            continue
        why = flavor_mismatch(flavor, ps.spec)
        if why:
            reasons.append(why)
            continue
        choices: dict[str, ResourceChoice] = {}
        mode, borrow = Mode.FIT, 0
        for res in wanted:
            fr = (fname, res)
            value = requests[res] + earlier.get(fr, 0)
            rmode, rborrow, why = fits_resource_quota(cq, wl, fr, value, oracle,
                                                      fair_sharing=snapshot.fair_sharing, reads=reads)
            if why:
                reasons.append(why)
            mode = min(mode, rmode)
            borrow = max(borrow, rborrow)
            if mode == Mode.NO_FIT:
                break
            choices[res] = ResourceChoice(fname, rmode, rborrow, value)
        if mode != Mode.NO_FIT and (best is None or is_preferred(mode, borrow, best_mode, best_borrow,
                                                                   fungibility)):
            best, best_mode, best_borrow = choices, mode, borrow
        if not should_try_next(mode, borrow, fungibility):
            break
    return best


def fits_resource_quota(cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FR, value: int,
                        oracle: Oracle, *, fair_sharing: bool = False,
                        reads: Reads | None = None) -> tuple[Mode, int, str]:
    flavor, res = fr
    max_capacity = cq.potential_available(fr)  # (quota alone: no read of usage)
    if value > max_capacity:
        return Mode.NO_FIT, 0, (f"insufficient quota for {res} in flavor {flavor}, request > maximum "
                                f"capacity ({_q(value, res)} > {_q(max_capacity, res)})")
    borrow, may_reclaim = lowest_fitting_height(cq, fr, value)
    avail = cq.available(fr)
    if reads is not None:
        reads.append((fr, value, borrow, may_reclaim, avail))
    if value <= avail:
        return Mode.FIT, borrow, ""
    why = (f"insufficient unused quota for {res} in flavor {flavor}, "
           f"{_q(value - avail, res)} more needed")
    if value <= cq.nominal(fr) or may_reclaim or _can_preempt_while_borrowing(cq, fair_sharing):
        outcome = oracle(cq, wl, fr, value)
        if isinstance(outcome, tuple):
            return outcome[0], outcome[1], why
        return outcome, borrow, why
    return Mode.NO_FIT, borrow, why


def _can_preempt_while_borrowing(cq: ClusterQueueSnapshot, fair_sharing: bool = False) -> bool:
    p = cq.spec.preemption
    if p.borrow_within_cohort is not None and p.borrow_within_cohort.policy != "Never":
        return True
    # Under fair sharing, reclaiming may leave the preemptor borrowing (the shares decide).
    return fair_sharing and p.reclaim_within_cohort not in ("", "Never")


def lowest_fitting_height(cq: ClusterQueueSnapshot, fr: FR, value: int) -> tuple[int, bool]:
    """Kueue's FindHeightOfLowestSubtreeThatFits: (borrowing level, mayReclaimInHierarchy)."""
    node = cq.node
    if node.parent is None or not qn.borrowing_with(node, fr, value):
        return 0, node.parent is not None
    remaining = value - qn.local_available(node, fr)
    tracking = node.parent
    heights = cq.ancestor_heights()
    level = 0
    while tracking.parent is not None:
        if not qn.borrowing_with(tracking, fr, remaining):
            return heights[level], True
        remaining -= qn.local_available(tracking, fr)
        tracking = tracking.parent
        level += 1
    return heights[level], False


def is_preferred(mode: Mode, borrow: int, best_mode: Mode, best_borrow: int,
                 fungibility: api.FlavorFungibility) -> bool:
    """Is (mode, borrow) strictly better than the best so far?"""
    if best_mode == Mode.NO_FIT:
        return mode != Mode.NO_FIT
    if mode == Mode.NO_FIT:
        return False
    if best_mode == Mode.NO_CANDIDATES or mode == Mode.NO_CANDIDATES:
        return best_mode == Mode.NO_CANDIDATES and mode != Mode.NO_CANDIDATES
    if fungibility.preference == "PreemptionOverBorrowing":
        if borrow != best_borrow:
            return borrow < best_borrow
        return mode > best_mode
    if mode != best_mode:
        return mode > best_mode
    return borrow < best_borrow


def should_try_next(mode: Mode, borrow: int, fungibility: api.FlavorFungibility) -> bool:
    if mode in (Mode.PREEMPT, Mode.RECLAIM) and fungibility.when_can_preempt != "TryNextFlavor":
        if borrow == 0 or fungibility.when_can_borrow != "TryNextFlavor":
            return False
    if mode == Mode.FIT:
        if borrow == 0:
            return False
        return fungibility.when_can_borrow == "TryNextFlavor"
    return True


def _q(amount: int, res: str) -> str:
    from kueued.model.quantity import format_milli
    return format_milli(amount, resource=res)


# --- flavor vs pod placement constraints -------------------------------------------------------

def flavor_mismatch(flavor: api.ResourceFlavor, spec: api.PodSpec) -> str:
    """Why pods of ``spec`` may not go to ``flavor`` (an untolerated taint, a node selector or required
    affinity its labels do not match), or ""."""
    # the flavor's own tolerations count too: Kueue adds them to the pods it admits there
    # (flavorassigner: FindMatchingUntoleratedTaint over the pod's and the flavor's tolerations)
    tolerations = [*spec.tolerations, *flavor.spec.tolerations] if flavor.spec.tolerations else spec.tolerations
    for taint in flavor.spec.node_taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
                _tolerates(t, taint) for t in tolerations):
            # Kueue formats the corev1.Taint struct with %s: {key value effect <nil>}
            return (f"untolerated taint {{{taint.key} {taint.value} {taint.effect} <nil>}} in flavor "
                    f"{flavor.metadata.name}")
    labels = flavor.spec.node_labels
    for key, value in spec.node_selector.items():
        if key in labels and labels[key] != value:
            return f"flavor {flavor.metadata.name} doesn't match node affinity"
    terms = _required_terms(spec.affinity)
    if terms is not None and not any(_term_matches(t, labels) for t in terms):
        return f"flavor {flavor.metadata.name} doesn't match node affinity"
    return ""


def _tolerates(t: api.Toleration, taint: api.Taint) -> bool:
    if t.effect and t.effect != taint.effect:
        return False
    if t.operator == "Exists":
        return not t.key or t.key == taint.key
    return t.key == taint.key and t.value == taint.value


def _required_terms(affinity: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    if not affinity:
        return None
    req = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not req:
        return None
    return list(req.get("nodeSelectorTerms") or [])


def _term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    for expr in term.get("matchExpressions") or []:
        key = expr.get("key", "")
        if key not in labels:
            continue
        value, op, values = labels[key], expr.get("operator", ""), expr.get("values") or []
        ok = {
            "In": value in values,
            "NotIn": value not in values,
            "Exists": True,
            "DoesNotExist": False,
            "Gt": bool(values) and _int(value) > _int(values[0]),
            "Lt": bool(values) and _int(value) < _int(values[0]),
        }.get(op, False)
        if not ok:
            return False
    return True


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0
