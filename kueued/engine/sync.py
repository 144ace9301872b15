"""The synchronous engine: the pure core driven cycle by cycle, no actors.

This is the reference the actor engine (``actors/``) must agree with, and the
baseline the benchmarks measure the actor layer against.  It owns a live
:class:`Snapshot` (the quota forest with admitted usage) and one
:class:`PendingQueue` per ClusterQueue; each :meth:`Engine.cycle` pops one head per
active ClusterQueue, runs :func:`run_cycle` on a private copy (one clone per forest,
refreshed each cycle: :meth:`Snapshot.cycle_copy`) and applies the result:

1. evictions first: the victim's quota is released, it counts one preemption, goes
   back to its queue, and every parked workload of its cohort tree is requeued;
2. admissions: usage added, workload marked admitted;
3. every other head is requeued by its queue's rules.

:meth:`run` repeats until a cycle changes nothing (no admission, no eviction, and
the queues hold the same workloads in the same places).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kueued.engine.wiring import forest_of, queue_order_hook
from kueued.quota.node import QuotaNode
from kueued.scheduling.cycle import CycleResult, Iterate, Preemptor, classical_order, run_cycle
from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
from kueued.scheduling.forest import build_forest
from kueued.scheduling.queues import PendingQueue
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.verdicts import Verdicts
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import World

__all__ = ["Engine", "PreemptorFactory"]


class PreemptorFactory(Protocol):
    """Makes each cycle's preemptor; ``afs`` is the engine's admission fair sharing."""

    def __call__(self, snapshot: Snapshot, world: World, /, *, afs: AdmissionFairSharing) -> Preemptor: ...


class Engine:
    def __init__(self, world: World, *, preemptor: PreemptorFactory,
                 iterate: Iterate = classical_order) -> None:
        self.world = world
        self.make_preemptor = preemptor
        self.iterate = iterate
        self.queues: dict[str, PendingQueue] = {}
        self.unrouted: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.events: list[tuple[str, str, str, str]] = []  # (kind, workload, by, detail)
        self.state = build_forest(cluster_queues={}, cohorts={}, flavors={})
        self.cycles = 0
        self.clock: Callable[[], float] | None = None  # epoch seconds; a timeline's clock when set
        self.verdicts = Verdicts()
        self._stale_trees: dict[int, QuotaNode] = {}  # roots whose parked workloads go back (heads())
        self.afs = AdmissionFairSharing(world, clock=self.now)

    # --- keeping up with the world ------------------------------------------------------------
    def rebuild(self) -> None:
        self.state = forest_of(self.world)
        self._stale_trees.clear()  # every parked workload goes back below
        for name, cq in self.state.cluster_queues.items():
            strict = cq.spec.queueing_strategy == "StrictFIFO"
            q = self.queues.get(name)
            if q is None or q.strict != strict:
                fresh = PendingQueue(name, strict=strict)
                for wl in (q.pending() if q else ()):
                    fresh.push(wl)
                self.queues[name] = fresh
            self.queues[name].usage_of = queue_order_hook(self, cq, afs=self.afs)
        for name in list(self.queues):
            if name not in self.state.cluster_queues:
                del self.queues[name]
        self.unrouted.clear()
        for wl in self.world.workloads.values():
            self._place(wl)
        for q in self.queues.values():
            q.requeue_inadmissible()
        self.verdicts.forget(self.state, self.world.settings)

    def _place(self, wl: WorkloadInfo) -> None:
        for q in self.queues.values():
            q.remove(wl.key)
        if wl.admitted:
            if wl.cluster_queue in self.state.cluster_queues:
                self.state.add_workload(wl)
            return
        self._enqueue(wl)

    def arrive(self, key: str) -> None:
        """A workload new to the World (already applied) joins its queue; no rebuild."""
        self._enqueue(self.world.workloads[key])

    def _enqueue(self, wl: WorkloadInfo) -> None:
        cq, why = self.world.route(wl)
        if cq is None or cq not in self.queues:
            self.unrouted[wl.key] = why or f"ClusterQueue {cq} doesn't exist"
            return
        self.queues[cq].push(wl)

    def finish(self, key: str) -> None:
        """A workload finished: it leaves the World, its quota is released and the parked
        workloads of its tree are requeued (Kueue's reaction to a Finished workload)."""
        wl = self.world.workloads.pop(key, None)
        self.world.raw.pop(f"Workload/{key}", None)
        if wl is None:
            return
        if wl.admitted and wl.cluster_queue in self.state.cluster_queues:
            self.state.remove_workload(wl)
            self.verdicts.touch(wl.cluster_queue)
            self._requeue_tree(wl.cluster_queue)  # type: ignore[arg-type]
            return
        for q in self.queues.values():
            q.remove(key)

    # --- cycles ------------------------------------------------------------------------------
    def heads(self) -> list[tuple[WorkloadInfo, str]]:
        self._flush_requeues()
        out = []
        for name, q in self.queues.items():
            cq = self.state.cluster_queues[name]
            if not cq.active:
                for wl in q.pending():
                    self.reasons[wl.key] = cq.inactive_reason
                continue
            head = q.pop_head()
            if head is not None:
                out.append((head, name))
        return out

    def cycle(self) -> CycleResult:
        self.cycles += 1
        heads = self.heads()
        if self.clock is not None:
            heads = self._fold_dead_rounds(heads)
        snap = self.state.cycle_copy()
        result = run_cycle(snap, heads, preemptor=self.make_preemptor(snap, self.world, afs=self.afs),
                           namespaces=self.world.namespaces, iterate=self.iterate, verdicts=self.verdicts)
        self.apply(result)
        return result

    def _fold_dead_rounds(self, heads: list[tuple[WorkloadInfo, str]]) -> list[tuple[WorkloadInfo, str]]:
        """Requeue the heads of every tree whose round is dead (:mod:`.verdicts`) and pop again.

        A tree stops folding when one of its heads needs judging, or when a dead round
        parked nothing (a StrictFIFO head goes straight back and would come out again).
        """
        stuck: set[str] = set()
        while True:
            dead = self.verdicts.dead(heads, self.state.cluster_queues)
            again: set[str] = set()
            for root, items in dead.items():
                if root in stuck:
                    continue
                parked = False
                for wl, name, v in items:
                    q = self.queues[name]
                    self.reasons[wl.key] = v.message
                    wl.preempting = False
                    q.requeue(wl, v.reason)
                    parked = parked or q.parks(v.reason)
                    again.add(name)
                if not parked:
                    stuck.add(root)
            if not again:
                return heads
            heads = self._repop(heads, again)

    def _repop(self, heads: list[tuple[WorkloadInfo, str]], names: set[str]) -> list[tuple[WorkloadInfo, str]]:
        """``heads`` with a fresh head for each queue in ``names``, in queue order as :meth:`heads` gives."""
        current = {name: wl for wl, name in heads if name not in names}
        out = []
        for name, q in self.queues.items():
            if name in names:
                head = q.pop_head()
                if head is not None:
                    out.append((head, name))
            elif name in current:
                out.append((current[name], name))
        return out

    def apply(self, result: CycleResult) -> None:
        touched: set[str] = set()
        for target, by in result.evictions:
            victim = target.workload
            if not victim.admitted:
                continue
            cq_name = victim.cluster_queue
            self.state.remove_workload(victim)
            victim.release()
            victim.evictions += 1
            self.events.append(("evicted", victim.key, by.wl.key, target.reason))
            self.queues[cq_name].push(victim)  # type: ignore[index]
            touched.add(cq_name)  # type: ignore[arg-type]
            self.verdicts.touch(cq_name)
        for e in result.admitted:
            assert e.assignment is not None
            e.wl.admit(e.cq, dict(e.assignment.usage), e.assignment.flavors(), at=self.now())
            self.state.add_workload(e.wl)
            self.verdicts.touch(e.cq)
            self.afs.record_admission(e)  # admission fair sharing: the entry penalty
            self.reasons.pop(e.wl.key, None)
        for e in result.entries:
            if e.status != "admitted":
                self.reasons[e.wl.key] = e.message
                self.queues[e.cq].requeue(e.wl, e.reason)
        for name in touched:
            self._requeue_tree(name)

    def now(self) -> float:
        """The clock's time if one is set, else after every timestamp a manifest carries, one second per cycle."""
        return self.clock() if self.clock is not None else 4_000_000_000.0 + self.cycles

    def _requeue_tree(self, cq_name: str) -> None:
        """The parked workloads of this tree go back to their heaps before the next heads are
        popped (:meth:`_flush_requeues`): once per tree however many of its workloads finished."""
        root = self.state.cluster_queues[cq_name].node.root()
        self._stale_trees[id(root)] = root

    def _flush_requeues(self) -> None:
        stack: list[QuotaNode] = list(self._stale_trees.values())
        self._stale_trees.clear()
        while stack:
            node = stack.pop()
            if not node.is_cohort:
                q = self.queues.get(node.name)
                if q is not None:
                    q.requeue_inadmissible()
            stack.extend(node.children)

    def fingerprint(self) -> tuple:
        return tuple((n, q.peek_keys(), tuple(sorted(q.inadmissible))) for n, q in sorted(self.queues.items()))

    def run(self, *, max_cycles: int = 100_000) -> int:
        """Cycle until nothing changes; returns the number of cycles run."""
        start = self.cycles
        before = self.fingerprint()
        while self.cycles - start < max_cycles:
            result = self.cycle()
            after = self.fingerprint()
            if not result.changed and after == before:
                break
            before = after
        return self.cycles - start
