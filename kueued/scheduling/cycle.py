"""One scheduling cycle: Kueue's ``scheduler.schedule`` as a pure function.

Input: the cycle-start :class:`Snapshot` (a private clone), one head per active
ClusterQueue, and the namespaces' labels.  Output: a :class:`CycleResult` listing
admissions, evictions and, for every head not admitted, why and how it is requeued.
Nothing here is applied to real state: the engine (or the actors' coordinator)
commits the result.

Steps (``pkg/scheduler/scheduler.go``):

1. *nominate*: every head is checked (ClusterQueue active, namespace matches,
   requests <= limits) and assigned flavors against the **same** cycle-start snapshot;
   a head that needs preemption gets its targets.
2. *order*: already-borrowing-free first (lower borrowing level), then priority, then
   age; or, with fair sharing, the tournament of ``fairsharing.ordering``.
3. *process* each entry against the snapshot as modified by earlier entries: a
   no-candidate preemptor reserves capacity (unless its ClusterQueue can always
   reclaim); a preemptor whose targets overlap victims chosen earlier in the cycle is
   recomputed (DeferredFit); every entry is re-checked with this cycle's victims
   removed; a fitting Fit entry is admitted, a Preempt entry evicts its targets and
   waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from kueued.model import api
from kueued.scheduling import partial
from kueued.scheduling.flavors import Assignment, Mode, Reads, assign_flavors
from kueued.scheduling.queues import RequeueReason
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

if TYPE_CHECKING:
    from kueued.scheduling.verdicts import Verdict, Verdicts

__all__ = ["Target", "Preemptor", "Entry", "CycleResult", "run_cycle", "judge_alone", "namespace_matches",
           "namespace_labels", "namespace_refused"]


class Target:
    """A victim chosen for a preemptor, with Kueue's reason (InClusterQueue, ...)."""

    __slots__ = ("workload", "reason")

    def __init__(self, workload: WorkloadInfo, reason: str) -> None:
        self.workload = workload
        self.reason = reason

    def __repr__(self) -> str:
        return f"Target({self.workload.key}, {self.reason})"


class Preemptor(Protocol):
    """What the cycle needs from preemption (``kueued.scheduling.preemption``)."""

    def oracle(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: tuple[str, str],
               value: int) -> Mode | tuple[Mode, int]: ...

    def get_targets(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo,
                    assignment: Assignment) -> list[Target]: ...


class Entry:
    __slots__ = ("wl", "cq", "view", "assignment", "targets", "status", "reason", "message")

    def __init__(self, wl: WorkloadInfo, cq: str) -> None:
        self.wl = wl
        self.cq = cq
        self.view = wl  # what the assignment was made for: ``wl``, or fewer of its pods (:mod:`.partial`)
        self.assignment: Assignment | None = None
        self.targets: list[Target] = []
        self.status = "pending"  # pending | nominated | skipped | admitted | preempting | deferred
        self.reason = RequeueReason.GENERIC
        self.message = ""

    @property
    def mode(self) -> Mode:
        return self.assignment.mode if self.assignment is not None else Mode.NO_FIT

    @property
    def counts(self) -> dict[str, int] | None:
        """The pods of each pod set admitted, when partial admission took fewer than asked."""
        if self.view is self.wl:
            return None
        return {ps.name: ps.count for ps in self.view.pod_sets}

    def __repr__(self) -> str:
        return f"Entry({self.wl.key}@{self.cq} {self.mode.name} {self.status})"


class CycleResult:
    __slots__ = ("entries", "admitted", "evictions", "preemption_skips")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.admitted: list[Entry] = []
        self.evictions: list[tuple[Target, Entry]] = []
        # Kueue's skippedPreemptions: per ClusterQueue, its preemptors (with targets) that another
        # entry of this cycle got in the way of (kueue_admission_cycle_preemption_skips)
        self.preemption_skips: dict[str, int] = {}

    @property
    def changed(self) -> bool:
        return bool(self.admitted or self.evictions)


Iterate = Callable[[list[Entry], Snapshot], Iterator[Entry]]


def classical_order(entries: list[Entry], snapshot: Snapshot) -> Iterator[Entry]:
    """Kueue's ``makeClassicalIterator``: preemptors waiting for their evictions first, then
    lower borrowing level, higher priority (unless the PrioritySortingWithinCohort gate is off), older.

    Putting preemptors first is Kueue's PrioritizePreemptorWorkloads gate (alpha there, on by
    default here): without it a victim that borrows at a lower level than its preemptor takes
    its quota back in the very next cycle, and the two flop forever (found by the no-flopping
    property).  A Configuration can still turn the gate off.
    """
    first = _gate(snapshot, "PrioritizePreemptorWorkloads", default=True)
    by_priority = _gate(snapshot, "PrioritySortingWithinCohort", default=True)  # off: first in, first out
    ordered = sorted(entries, key=lambda e: (
        not (first and e.wl.preempting),
        e.assignment.borrowing if e.assignment is not None else 0,
        -e.wl.priority if by_priority else 0, e.wl.created, e.wl.uid))
    return iter(ordered)


def _gate(snapshot: Snapshot, name: str, *, default: bool) -> bool:
    gates = getattr(snapshot.settings, "feature_gates", None) or {}
    return bool(gates.get(name, default))


def run_cycle(snapshot: Snapshot, heads: Iterable[tuple[WorkloadInfo, str]], *,
              preemptor: Preemptor, namespaces: Mapping[str, Mapping[str, str]],
              iterate: Iterate = classical_order, verdicts: Verdicts | None = None,
              fitting: Mapping[str, Assignment] | None = None) -> CycleResult:
    """One cycle.  ``verdicts`` (the engine's, valid for this snapshot's state) answers the heads
    it remembers failing and learns from the new failures (:mod:`.verdicts`).  ``fitting``: heads
    (by key) already assigned flavors on this very snapshot without consulting the preemption
    oracle (everything fit), so nomination would assign them the same: it is not run again."""
    result = CycleResult()
    learnt: list[tuple[Entry, Verdict]] = []
    with snapshot.steady():  # every head is nominated against the same cycle-start snapshot
        for wl, cq_name in heads:
            cq = snapshot.cluster_queues.get(cq_name)
            known = verdicts.recall(cq, wl) if verdicts is not None and cq is not None and cq.active else None
            if known is not None:
                e = Entry(wl, cq_name)
                e.assignment, e.message = known.assignment, known.nominated
            else:
                reads = verdicts.reads_for(cq) if verdicts is not None and cq is not None else None
                e = _nominate(snapshot, wl, cq_name, preemptor, namespaces,
                              fitting.get(wl.key) if fitting is not None else None, reads)
                if (verdicts is not None and e.assignment is not None and not e.targets
                        and not wl.victims and cq is not None):
                    v = verdicts.keep(cq, wl, e.assignment, e.message, reads)
                    if v is not None:
                        learnt.append((e, v))
            result.entries.append(e)
    # an entry that fits nowhere is processed as a no-op wherever it comes: it is left out of the
    # order (in a saturated tree that is most of a cycle's entries)
    nominated = [e for e in result.entries if e.assignment is not None and e.assignment.mode is not Mode.NO_FIT]
    victims: dict[str, WorkloadInfo] = {}
    for e in iterate(nominated, snapshot):
        _process(snapshot, e, victims, preemptor, result)
    for e, v in learnt:  # a failure without targets stays pending: processing only adds to its message
        v.message, v.reason = e.message, e.reason
    return result


def _nominate(snapshot: Snapshot, wl: WorkloadInfo, cq_name: str, preemptor: Preemptor,
              namespaces: Mapping[str, Mapping[str, str]], fitting: Assignment | None = None,
              reads: Reads | None = None) -> Entry:
    """The head's entry after nomination; ``reads`` collects what flavor assignment read of the
    tree's usage (:data:`~.flavors.Reads`), for a verdict that may outlive its generation."""
    e = Entry(wl, cq_name)
    cq = snapshot.cluster_queues.get(cq_name)
    if cq is None or not cq.active:
        e.message = cq.inactive_reason if cq is not None else f"ClusterQueue {cq_name} not found"
        return e
    refused = namespace_refused(namespaces, cq, wl.namespace)
    if refused:
        e.reason = RequeueReason.NAMESPACE_MISMATCH
        e.message = refused
        return e
    why = wl.spec.limits_error  # a request above its limit
    if why:
        e.message = why
        return e
    e.assignment = fitting if fitting is not None else assign_flavors(snapshot, cq, wl, preemptor.oracle, reads)
    if e.mode == Mode.NO_FIT:
        e.message = e.assignment.message() or "couldn't assign flavors"
    elif e.mode.needs_preemption:
        e.message = e.assignment.message()
        e.targets, again = _targets(cq, wl, e.assignment, preemptor)
        if again:
            # A preemptor never evicts the same workload twice: every eviction then uses up a
            # distinct (preemptor, victim) pair, so a run cannot flop forever (issue 3).  The
            # preemptor waits, as a head with no candidates does.
            e.message += f"; would evict {', '.join(again)} a second time, waits instead"
    if e.mode != Mode.FIT and not e.targets and partial.can_be_reduced(wl) and _gate(
            snapshot, "PartialAdmission", default=True):
        _reduce(snapshot, cq, e, preemptor, reads)
    return e


def judge_alone(snapshot: Snapshot, wl: WorkloadInfo, cq_name: str, *, preemptor: Preemptor,
                namespaces: Mapping[str, Mapping[str, str]], verdicts: Verdicts,
                fitting: Assignment | None = None) -> Verdict | None:
    """``wl``'s verdict as ``cq_name``'s head in a cycle on ``snapshot`` when it fails whatever
    the cycle's other heads do (kept, complete, as :func:`run_cycle` keeps one); None when only
    a cycle can settle it.  Such a head's nomination fits nowhere and finds no targets:
    processing then only completes its message (and, for a would-be preemptor, reserves
    capacity for the rest of that one cycle), so no other entry can change its outcome.
    The snapshot is not changed.  ``fitting`` as for :func:`run_cycle`; the caller makes sure
    the nomination needs no candidates the snapshot does not hold."""
    cq = snapshot.cluster_queues.get(cq_name)
    if cq is None or not cq.active or wl.victims:
        return None
    reads = verdicts.reads_for(cq)
    with snapshot.steady():
        e = _nominate(snapshot, wl, cq_name, preemptor, namespaces, fitting, reads)
    if e.assignment is None or e.targets:
        return None
    v = verdicts.keep(cq, wl, e.assignment, e.message, reads)
    if v is not None:
        v.message = _without_candidates(e.message) if e.mode.needs_preemption else e.message
        v.reason = e.reason
    return v


def _without_candidates(message: str) -> str:
    return (message + "; " if message else "") + "no preemption candidates"


def _targets(cq: ClusterQueueSnapshot, wl: WorkloadInfo, assignment: Assignment,
             preemptor: Preemptor) -> tuple[list[Target], list[str]]:
    """The targets, and those this workload evicted before (then none: it waits instead)."""
    targets = preemptor.get_targets(cq, wl, assignment)
    again = sorted(t.workload.key for t in targets if t.workload.key in wl.victims)
    return ([] if again else targets), again


def _reduce(snapshot: Snapshot, cq: ClusterQueueSnapshot, e: Entry, preemptor: Preemptor,
            reads: Reads | None) -> None:
    """Kueue's partial admission (:mod:`.partial`): the most pods that fit, or find targets."""
    def works(counts: list[int]) -> tuple[WorkloadInfo, Assignment, list[Target]] | None:
        view = partial.reduced(e.wl, counts)
        assignment = assign_flavors(snapshot, cq, view, preemptor.oracle, reads)
        if assignment.mode == Mode.FIT:
            return view, assignment, []
        if assignment.mode.needs_preemption:
            targets, _ = _targets(cq, view, assignment, preemptor)
            if targets:
                return view, assignment, targets
        return None

    found = partial.search(e.wl, works)
    if found is not None:
        e.view, e.assignment, e.targets = found
        e.message = e.assignment.message()


def _process(snapshot: Snapshot, e: Entry, victims: dict[str, WorkloadInfo], preemptor: Preemptor,
             result: CycleResult) -> None:
    assert e.assignment is not None
    if e.mode == Mode.NO_FIT:
        return
    cq = snapshot.cluster_queues[e.cq]
    if e.mode.needs_preemption and not e.targets:
        e.message = _without_candidates(e.message)
        if cq.spec.preemption.reclaim_within_cohort != "Any":
            cq.add_usage(_to_reserve(e.assignment, cq))
        return
    if e.mode.needs_preemption and any(t.workload.key in victims for t in e.targets):
        # Kueue skips it and counts the skip; kueued counts it too whether the redo below defers it
        # (it fits once those victims are gone) or skips it: either way it preempts nothing this cycle
        result.preemption_skips[e.cq] = result.preemption_skips.get(e.cq, 0) + 1
        # Only a Fit redo counts.  With one flavor per resource group the assigner calls the
        # oracle only for a resource that does not fit, so the mode is Fit or not whatever
        # it answers: skip the preemption searches (measured: 4 ms a redo at 1,000 queues).
        single = all(len(g.flavors) <= 1 for g in cq.groups)
        with snapshot.without(victims.values()):
            redo = assign_flavors(snapshot, cq, e.view, _no_candidates if single else preemptor.oracle)
        if redo.mode == Mode.FIT:
            e.assignment, e.targets = redo, []
            cq.add_usage(redo.usage)
            e.status, e.reason = "deferred", RequeueReason.PENDING_PREEMPTION
            e.message = "waiting for the preemptions of another workload"
        else:
            e.status, e.reason = "skipped", RequeueReason.FAILED_AFTER_NOMINATION
            e.message = "preemption targets overlap with another workload's"
        return
    # Kueue's ``fits``: this cycle's victims and the entry's own targets are gone.
    if victims or e.targets:
        gone = {**victims, **{t.workload.key: t.workload for t in e.targets}}
        with snapshot.without(gone.values()):
            fits = cq.fits(e.assignment.usage)
    else:  # nothing to take out (the usual head): no context to enter
        fits = cq.fits(e.assignment.usage)
    if not fits:
        e.status, e.reason = "skipped", RequeueReason.FAILED_AFTER_NOMINATION
        e.message = "workload no longer fits after processing another workload"
        if e.mode.needs_preemption:  # a preemptor with targets (none returned above): Kueue counts it
            result.preemption_skips[e.cq] = result.preemption_skips.get(e.cq, 0) + 1
        return
    cq.add_usage(e.assignment.usage)
    if e.mode.needs_preemption:
        for t in e.targets:
            if t.workload.key not in victims:
                victims[t.workload.key] = t.workload
                result.evictions.append((t, e))
        e.status, e.reason = "preempting", RequeueReason.PENDING_PREEMPTION
        e.message = f"pending the preemption of {len(e.targets)} workload(s)"
        return
    e.status = "admitted"
    result.admitted.append(e)


def _no_candidates(cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: tuple[str, str], value: int) -> Mode:
    return Mode.NO_CANDIDATES


def _to_reserve(a: Assignment, cq: ClusterQueueSnapshot) -> dict[tuple[str, str], int]:
    out = {}
    for fr, req in a.usage.items():
        lim = cq.node.limit(fr)
        used = cq.usage(fr)
        if a.borrows:
            v = req if lim.borrowing_limit is None else min(req, lim.nominal + lim.borrowing_limit - used)
        else:
            v = min(req, lim.nominal - used)
        out[fr] = max(0, v)
    return out


BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
"""Namespaces every Kubernetes cluster has, whether or not a manifest creates them."""


def namespace_refused(namespaces: Mapping[str, Mapping[str, str]], cq: ClusterQueueSnapshot, namespace: str) -> str:
    """Why ``cq`` takes no workload of ``namespace`` (it does not exist, or its namespaceSelector
    refuses it), in kueued's words; "" when it does."""
    labels = namespace_labels(namespaces, namespace)
    if labels is None:
        return f"namespace {namespace} not found"
    if not namespace_matches(cq.spec.namespace_selector, labels):
        return f"namespace {namespace} doesn't match the namespaceSelector of ClusterQueue {cq.name}"
    return ""


def namespace_labels(namespaces: Mapping[str, Mapping[str, str]], name: str) -> Mapping[str, str] | None:
    """A namespace's labels as the API server reports them, or None when it does not exist.

    The API server labels every namespace ``kubernetes.io/metadata.name``, and the
    built-in namespaces exist without being created.
    """
    labels = namespaces.get(name)
    if labels is None and name not in BUILTIN_NAMESPACES:
        return None
    return {"kubernetes.io/metadata.name": name, **(labels or {})}


def namespace_matches(selector: api.LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector; an unset selector matches nothing, ``{}`` everything."""
    if selector is None:
        return False
    for k, v in selector.match_labels.items():
        if labels.get(k) != v:
            return False
    for req in selector.match_expressions:
        has, value = req.key in labels, labels.get(req.key)
        ok = {
            "In": has and value in req.values,
            "NotIn": not has or value not in req.values,
            "Exists": has,
            "DoesNotExist": not has,
        }.get(req.operator, False)
        if not ok:
            return False
    return True
