"""Remembered verdicts: a head that cannot be admitted is not re-judged while nothing changed.

Measured on Kueue's own scalability configurations, a saturated cohort re-nominates the
same kind of head over and over: 99.4 % of the failed nominations of the baseline run
(1.33 M of 1.34 M, for 21 k admissions) judged a workload of the same shape, in the same
ClusterQueue, against a cohort tree in exactly the state an earlier failed nomination
had seen.  Nomination is a function of that state and of the workload's *shape*:

* the ClusterQueue (its spec, its node in the tree, its admitted workloads);
* the tree's usage and admitted workloads, everywhere (preemption looks across the tree);
* the workload's pod sets (requests, node selectors, tolerations: flavor assignment and the
  requests-exceed-limits check read the spec), priority and namespace (the
  namespaceSelector), and its creation time only where a LowerOrNewerEqualPriority policy
  compares it.

Every change to a tree's state goes through the owner of the live state (the synchronous
engine, or the actor coordinator, which commits every admission, eviction and finish),
which calls :meth:`Verdicts.touch` with the tree's root; a topology or configuration
change calls :meth:`Verdicts.forget`.  A verdict is kept only for an outcome that has no
effect outside its entry's own requeue: the head does not fit and preemption found no
targets (and no target was dropped for having been evicted by this workload before).
Fair sharing (its shares) and admission fair sharing (its decaying usage) depend on more
than the tree's state and the clock, so the cycle does not consult verdicts when either
is on.

A remembered verdict stands in for the nomination: :func:`~.cycle.run_cycle` builds the
entry from it, and it is processed as usual (a no-candidate preemptor still reserves
capacity for the rest of the cycle).  The decisions are those of the full nomination,
which the agreement tests check by running both.

*Verdicts that outlive their generation.*  Any admission in a tree moves its generation,
yet most of its queues' failures read nothing that moved: in a saturated tree a queue's
available quota stays at zero while others take what frees up (measured on
``bench/throughput.py``'s contended shape: 226,705 of 239,553 failed nominations repeated
a stale verdict exactly).  Flavor assignment reads the tree's state only through
:func:`~.flavors.fits_resource_quota`'s lowest fitting height and available quota, for the
FRs and amounts it tries, and everything else it reads (quota, specs, namespaces,
flavors) changes only with the topology or configuration, which forgets every verdict.
So a verdict keeps those reads (:data:`~.flavors.Reads`), and a stale one is recalled when
every read gives the same value on the snapshot at hand (:func:`~.flavors.reads_hold`): the
same calls then return the same results, in the same order, and nomination would build
the same entry.  Only for a queue that never preempts: a preempting queue's oracle also
reads the admitted workloads (its candidates).  The verdict then carries the current
generation, so the queues' own look-ahead (:class:`Known`) sees it too.

*Dead rounds.*  When every head of a tree is answered by a verdict, the round changes
nothing in that tree except that each head is requeued; the next round pops the next
heads against the same state.  :meth:`Verdicts.dead` tells the engine so; it then
requeues those heads and pops again without a cycle.  Trees share no quota, so each
tree sees exactly the sequence of rounds it would have seen; only the cycle counter,
which stamps admissions when no clock is set, would run differently, so engines fold dead
rounds only under a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from types import MappingProxyType

import msgspec

from kueued.quota.node import FR
from kueued.scheduling.flavors import Assignment, Mode, Reads, reads_hold
from kueued.scheduling.preemption import policy
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["Verdict", "Verdicts", "Known", "shape_of"]

def shape_of(wl: WorkloadInfo) -> bytes:
    """What nomination reads of a workload besides its creation time, as one comparable value
    (worked out with its spec: :class:`~kueued.scheduling.workload.WorkloadSpec`)."""
    return wl.spec.shape


Key = bytes | tuple[bytes, float]
"""A verdict's key in its ClusterQueue: the workload's shape, with its creation time where the
queue's policies compare creation times (one kind of key per queue)."""


class Verdict:
    """A failed nomination: what the entry carried after nomination and after processing."""

    __slots__ = ("generation", "assignment", "nominated", "message", "reason", "reads")

    def __init__(self, generation: int, assignment: Assignment, nominated: str,
                 reads: tuple[tuple[FR, int, int, bool, int], ...] | None = None) -> None:
        self.generation = generation
        self.assignment = assignment
        self.nominated = nominated  # the message nomination wrote
        self.message = ""           # the message after processing ("; no preemption candidates")
        self.reason = ""
        self.reads = reads          # what nomination read of the tree (None: held for its generation only)


class Known(msgspec.Struct, frozen=True):
    """One ClusterQueue's remembered verdicts as data a queue can read on its own (what a
    ``Nominate`` carries to fold ahead): a read-only view of them by shape, and the tree's
    generation a verdict must carry to hold."""

    verdicts: Mapping[Key, Verdict]
    generation: int
    by_created: bool  # a LowerOrNewerEqualPriority policy: creation times are part of the shape
    # whether an older verdict's reads hold on the round's snapshot (then it is brought up to
    # ``generation``); None before the round's balances are read (a Nominate's)
    check: Callable[[Verdict], bool] | None = None

    def lookup(self, wl: WorkloadInfo) -> Verdict | None:
        """The complete verdict for ``wl``'s shape that still holds, if any."""
        v = self.verdicts.get((wl.spec.shape, wl.created) if self.by_created else wl.spec.shape)
        if v is None or not v.reason:
            return None
        if v.generation == self.generation:
            return v
        return v if self.check is not None and self.check(v) else None


class Verdicts:
    """The coordinator's memory of failed nominations, valid while their tree's generation holds."""

    __slots__ = ("_generation", "_roots", "_newer", "_kept", "_never_preempt", "enabled")

    def __init__(self) -> None:
        self._generation: dict[str, int] = {}   # tree root name -> generation
        self._roots: dict[str, str] = {}        # ClusterQueue -> its tree root
        self._kept: dict[str, dict[Key, Verdict]] = {}  # ClusterQueue -> shape -> verdict
        self._newer: set[str] = set()           # ClusterQueues whose policies compare creation times
        self._never_preempt: set[str] = set()   # ClusterQueues whose verdicts may outlive their generation
        self.enabled = True

    # --- keeping up with the state -----------------------------------------------------------
    def forget(self, snapshot: Snapshot, settings: object) -> None:
        """The topology or configuration changed: nothing remembered holds.

        ``snapshot`` is the new live state (which tree each ClusterQueue is in);
        ``settings`` the World's (verdicts are off under fair sharing of either kind).
        """
        self._kept.clear()
        for root in self._generation:
            self._generation[root] += 1
        self._roots = {}
        for name, cq in snapshot.cluster_queues.items():
            top = cq.node.root()
            self._roots[name] = ("cohort/" if top.is_cohort else "queue/") + top.name
        for root in set(self._roots.values()):
            self._generation[root] = self._generation.get(root, 0) + 1
        self._newer = {name for name, cq in snapshot.cluster_queues.items()
                       if policy.LOWER_OR_NEWER_EQUAL_PRIORITY in (cq.spec.preemption.within_cluster_queue,
                                                                   cq.spec.preemption.reclaim_within_cohort)}
        self._never_preempt = {name for name, cq in snapshot.cluster_queues.items() if policy.never_preempts(cq)}
        self.enabled = not (getattr(settings, "fair_sharing", False)
                            or getattr(settings, "admission_fair_sharing", None) is not None)

    def touch(self, cluster_queue: str | None) -> None:
        """Usage or admitted workloads changed somewhere in this ClusterQueue's tree."""
        root = self._roots.get(cluster_queue or "")
        if root is not None:
            self._generation[root] = self._generation.get(root, 0) + 1

    def root_of(self, cluster_queue: str) -> str | None:
        return self._roots.get(cluster_queue)

    # --- recall ------------------------------------------------------------------------------
    def _key(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo) -> Key:
        # a LowerOrNewerEqualPriority policy compares creation times: then they are part of the shape
        return (wl.spec.shape, wl.created) if cq.name in self._newer else wl.spec.shape

    def recall(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo) -> Verdict | None:
        if not self.enabled:
            return None
        name = cq.name
        kept = self._kept.get(name)
        if not kept:  # asked three times a head a round: the common miss costs one lookup
            return None
        v = kept.get(self._key(cq, wl))
        if v is None:
            return None
        generation = self._generation.get(self._roots.get(name, ""), 0)
        if v.generation != generation and not self._brought_up(cq, generation, v):
            return None  # (``cq`` is the snapshot nomination would read: the tree's state at ``generation``)
        return v

    def reads_for(self, cq: ClusterQueueSnapshot) -> Reads | None:
        """A list for nomination to record its reads in, when a verdict of ``cq`` may outlive
        its generation; else None."""
        return [] if self.enabled and cq.name in self._never_preempt else None

    def keep(self, cq: ClusterQueueSnapshot, wl: WorkloadInfo, assignment: Assignment,
             nominated: str, reads: Reads | None = None) -> Verdict | None:
        """Remember a nomination that failed without targets; processing fills in the rest.
        ``reads``: what the nomination read (from :meth:`reads_for`), or None."""
        mode = assignment.mode
        if not self.enabled or (mode is not Mode.NO_FIT and not mode.needs_preemption):
            return None
        v = Verdict(self._generation.get(self._roots.get(cq.name, ""), 0), assignment, nominated,
                    tuple(reads) if reads is not None and cq.name in self._never_preempt else None)
        self._kept.setdefault(cq.name, {})[self._key(cq, wl)] = v
        return v

    def known(self, cluster_queue: str, snapshot: ClusterQueueSnapshot | None = None) -> Known | None:
        """One ClusterQueue's verdicts as data (:class:`Known`), or None when verdicts are off.
        ``snapshot``: the queue on the round's snapshot, once its balances are read: an older
        verdict then holds where its reads do (the queue looks ahead past it on its own,
        while the round's state stands still, as a fold's does)."""
        if not self.enabled:
            return None
        kept = self._kept.setdefault(cluster_queue, {})
        generation = self._generation.get(self._roots.get(cluster_queue, ""), 0)
        check = None
        if snapshot is not None and cluster_queue in self._never_preempt:
            check = partial(self._brought_up, snapshot, generation)
        return Known(MappingProxyType(kept), generation, cluster_queue in self._newer, check)

    @staticmethod
    def _brought_up(cq: ClusterQueueSnapshot, generation: int, v: Verdict) -> bool:
        """``v`` holds on ``cq``'s snapshot, at ``generation``: it carries that generation now."""
        if v.reads is None or not reads_hold(cq, v.reads):
            return False
        v.generation = generation
        return True

    def dead(self, heads: Iterable[tuple[WorkloadInfo, str]], cluster_queues: dict[str, ClusterQueueSnapshot]
             ) -> dict[str, list[tuple[WorkloadInfo, str, Verdict]]]:
        """The trees whose every head has a complete verdict, with the verdicts.  ``cluster_queues``:
        the snapshot's the heads would be nominated on (a verdict may be recalled by its reads)."""
        by_root: dict[str, list[tuple[WorkloadInfo, str, Verdict]]] = {}
        live: set[str] = set()
        for wl, name in heads:
            root = self._roots.get(name)
            if root is None or root in live:
                continue
            cq = cluster_queues.get(name)
            v = self.recall(cq, wl) if cq is not None and cq.active else None
            if v is None or not v.reason:
                live.add(root)
                by_root.pop(root, None)
                continue
            by_root.setdefault(root, []).append((wl, name, v))
        return by_root
