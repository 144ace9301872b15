"""A round of the root coordinator: nominate, ask for candidates, decide, evict, admit, requeue.

:class:`Rounds` is the half of :class:`~actors.coordinator.Coordinator` that runs cycles (the
other half keeps the topology and places workloads).  A round:

1. the finishes posted since the last round are collected (their releases ran concurrently,
   climbing the tree as tells); ``Nominate`` goes to every ClusterQueue actor at once: it
   requeues its parked workloads if its tree was marked, pops its head (if active) and
   reports its balance.  The Cohorts are read a level at a time, deepest first, so every
   release has landed (``_fill_cohorts``).  The snapshot holds balances only;
2. under a clock, each tree's dead rounds are folded (:mod:`actors.fold`: the heads the
   verdicts answer are parked, and the others judged ahead on the snapshot);
3. each head whose search for victims could run asks the tree for its candidates
   (:mod:`actors.reclaim`): the query climbs from its ClusterQueue and goes down only into
   subtrees that can hold candidates; the queues reached put their workloads in the snapshot;
4. the pure :func:`run_cycle` decides, and chooses the victims (answering remembered
   failures from the verdicts);
5. evictions first (API port, then ``Evict`` to the victims' ClusterQueue actors, which
   release the quota up the tree and requeue them); then admissions (``Admit`` reserves up
   the tree; a grant is committed through the port, a failed commit is ``Revert``-ed; a
   denial requeues); each batch is asked at once and read in order; on the API server the
   grants are written while the next rounds run (:mod:`actors.pipeline`); then every other
   head is ``Requeue``-d by its queue's rules (deferred: it rides on the next message to that
   actor, usually the next round's ``Nominate``).

Evictions are two-phase where there is something to wait for: the port's ``evict`` returns
once the eviction is committed *and* the quota may be handed on (``kueued.kube.commits``: on
a cluster, after the Workload's reservation is cleared); only then does the queue release
the victim's quota, so a preemptor is admitted in a later round, never beside its victim.
In ``simulate`` the second phase follows the first at once.

A round that admits, evicts and parks nothing leaves every queue as it was, so the next
would repeat it: that is quiescence.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog

from actors.cluster_queue import ClusterQueueActor
from actors.commits import commit_all
from actors.fold import FOLD_LIMIT
from actors.messages import Admit, Denied, Evict, Nominate, Nomination, Reclaim, Released, Requeue
from actors.reclaim import ask_all, query_for, searches
from kueued.kube.port import ApiPort
from kueued.scheduling.cycle import CycleResult, Entry, run_cycle
from kueued.scheduling.fairsharing import gates
from kueued.scheduling.flavors import Assignment
from kueued.scheduling.queues import RequeueReason, parks
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.workload import AFTER_PREEMPTOR, RECLAIMED_WHILE_BORROWING, Placement, WorkloadInfo

if TYPE_CHECKING:
    from collections import deque

    from anyio.abc import TaskGroup  # noqa: F401

    from kueued.engine.wiring import PreemptorFactory
    from kueued.scheduling.cycle import Iterate
    from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
    from kueued.scheduling.verdicts import Verdicts
    from kueued.world import World

__all__ = ["Rounds"]

log = structlog.get_logger("kueued.coordinator")

Heads = list[tuple[WorkloadInfo, str]]
_NONE: frozenset[str] = frozenset()


class Rounds:
    """The cycle half of the Coordinator (a mixin: every attribute is the Coordinator's)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        world: World
        port: ApiPort
        make_preemptor: PreemptorFactory
        iterate: Iterate
        forest: Snapshot
        cluster_queues: dict[str, ClusterQueueActor]
        reasons: dict[str, str]
        events: deque[tuple[str, str, str, str]]
        rounds: int
        clock: Callable[[], float] | None
        verdicts: Verdicts
        afs: AdmissionFairSharing
        _idle: dict[str, dict]
        _fold_limit: dict[str, int]
        _evicting: dict[str, str]
        _uncounted: set[str]
        evicted: dict[str, int]
        refused_in_round: bool
        stop_on_refusal: bool
        admissions: int
        attempts: deque[tuple[bool, float]]
        preemption_skips: deque[dict[str, int]]
        commits_in_flight: bool

        async def settle_commits(self, *, wait: bool) -> bool: ...
        async def _commit(self, granted: list[tuple[Entry, Placement]], now: float) -> None: ...

        async def _fold(self, nominations: list[tuple[str, Nomination]], snap: Snapshot) -> tuple[Heads, bool]: ...
        async def _settle_finishes(self) -> None: ...
        async def reap_terminated(self) -> None: ...
        def _take_requeues(self) -> set[str]: ...
        async def _fill_cohorts(self, snap: Snapshot) -> None: ...
        def _changed(self, cluster_queue: str | None) -> None: ...
        async def drain_cohorts(self, names: Any = None) -> None: ...
        def _requeue_tree(self, cq_name: str) -> None: ...
        def now(self) -> float: ...
        async def drain(self) -> bool: ...
        async def hold_back(self, key: str, cq_name: str) -> None: ...
        async def expire(self) -> bool: ...
        def _watch_deadline(self, key: str, placement: Placement) -> None: ...
        def _ran(self, key: str, placement: Placement | None) -> None: ...
        def _record_admission(self, wl: WorkloadInfo, cluster_queue: str, now: float) -> None: ...
        def _record_eviction(self, victim: WorkloadInfo, preemptor: WorkloadInfo, reason: str, message: str,
                             cluster_queue: str) -> None: ...
        def _preemption_message(self, preemptor: str, preemptor_cq: str, victim_cq: str, reason: str) -> str: ...

    async def round(self) -> bool:
        """One cycle; returns whether anything changed."""
        self.rounds += 1
        self.refused_in_round = False
        started = time.perf_counter()
        await self.settle_commits(wait=False)  # the last rounds' writes that landed (actors.pipeline)
        if self.refused_in_round and self.stop_on_refusal:  # a refused write: the daemon applies the
            return True  # watch's newer version before deciding again (else re-granted on the stale one)
        await self._settle_finishes()
        await self._settle_evictions()
        expired = await self.expire()  # a maximum execution time run out: deactivated, drained below
        drained = await self.drain()
        if self.world.terminating:
            await self.reap_terminated()
        self.afs.observe()  # KEP-4136 samples due by now, and what is held now; the queues pop below
        snap, nominations = await self._nominate()
        if self.clock is not None and self.verdicts.enabled:
            heads, parked = await self._fold(nominations, snap)
        else:
            heads, parked = [(n.head, name) for name, n in nominations if n.head is not None], False
        fitting = await self._reclaim(snap, heads)
        result = run_cycle(snap, heads, preemptor=self.make_preemptor(snap, self.world, afs=self.afs),
                           namespaces=self.world.namespaces, iterate=self.iterate, verdicts=self.verdicts,
                           fitting=fitting)
        touched, tried, evicted = await self._evict(result)
        settled, committed = await self._admit(result)
        parks = self._requeue_rest(result, settled, touched, evicted)
        if heads:  # Kueue's admission attempt: a cycle with heads to judge, and whether one was admitted
            # (granted: Kueue counts the workloads it assumed, whatever their write's fate)
            self.attempts.append((committed, time.perf_counter() - started))
        if result.preemption_skips:
            self.preemption_skips.append(result.preemption_skips)
        # a write refused since the last round (actors.pipeline) gave its quota back: that is a change too
        return parks or parked or committed or tried or drained or expired or self.refused_in_round

    async def _nominate(self) -> tuple[Snapshot, list[tuple[str, Nomination]]]:
        """Every ClusterQueue is asked at once, then the answers are read in order: one trip
        through the event loop per round instead of one per ClusterQueue.  Every balance of the
        cycle's copy is replaced (asked, idle, or a Cohort's cached report), and every admitted
        set emptied: the round's reclaim queries fill in what they reach."""
        snap = self.forest.cycle_copy(refresh=False)
        fold = self.clock is not None and self.verdicts.enabled
        requeue = self._take_requeues()
        limits, idle = self._fold_limit, self._idle
        for name in requeue:
            idle.pop(name, None)
        asked = []
        cqs, root_of, known_of = snap.cluster_queues, self.verdicts.root_of, self.verdicts.known
        for name, actor in self.cluster_queues.items():
            cq = cqs[name]
            if cq.workloads:
                cq.workloads = {}
            if name in idle:
                cq.node.usage = dict(idle[name])  # nothing to pop, nothing changed
                continue
            limit = limits.get(root_of(name) or name, FOLD_LIMIT) if fold else 0
            asked.append((name, actor.post(Nominate(known_of(name) if limit else None, limit, name in requeue))))
        nominations: list[tuple[str, Nomination]] = []
        for name, reply in asked:
            nomination: Nomination = await reply.result(self.cluster_queues[name].ask_timeout)
            snap.cluster_queues[name].node.usage = nomination.report.usage
            if nomination.head is None and not nomination.parked:
                idle[name] = dict(nomination.report.usage)  # before the cycle charges the snapshot's
            nominations.append((name, nomination))
        await self._fill_cohorts(snap)
        return snap, nominations

    async def _reclaim(self, snap: Snapshot, heads: Heads) -> dict[str, Assignment]:
        """The candidates of every head whose search for victims could run, asked of the tree
        (:mod:`actors.reclaim`) and put in the snapshot; a head the verdicts answer asks nothing.
        Returns the heads found to fit on the way, with their assignments (for ``run_cycle``)."""
        fair = bool(self.world.settings.fair_sharing)
        queries = []
        fitting: dict[str, Assignment] = {}
        for wl, name in heads:
            cq = snap.cluster_queues[name]
            if not searches(cq) or self.verdicts.recall(cq, wl) is not None:
                continue  # (searching first: a recall may check what its verdict read)
            query = query_for(snap, cq, wl, fair=fair)
            if isinstance(query, Reclaim):
                queries.append(query)
            elif query is not None:
                fitting[wl.key] = query
        if queries:
            found = await ask_all(self.cluster_queues, queries, timeout=ClusterQueueActor.ask_timeout)
            for name, workloads in found.items():
                snap.cluster_queues[name].workloads = {wl.key: wl for wl in workloads}
        return fitting

    async def _evict(self, result: CycleResult) -> tuple[set[str], bool, dict[str, set[str]]]:
        """Commit the cycle's evictions (their first phase) and tell each victim's queue; a victim
        keeps its quota until the port says its reservation is cleared (``released``), which in
        ``simulate`` is at once and on a cluster once the Workload no longer holds its admission
        (a later round's :meth:`_settle_evictions` releases it then).  Returns the ClusterQueues
        whose victims left (their trees' Cohorts drained of the releases), whether any
        eviction was tried (one the API refused is tried again next round), and each preemptor's
        victims whose eviction is committed (its queue records them with its requeue).  A victim
        whose admission is still being written waits for it (refused: it holds nothing, dropped)."""
        if result.evictions and self.commits_in_flight:
            await self.settle_commits(wait=True)
        wanted = [(target, by, target.workload.cluster_queue) for target, by in result.evictions
                  if target.workload.cluster_queue is not None]
        evicted: dict[str, set[str]] = {}  # preemptor -> its victims whose eviction is committed
        for target, by, _ in wanted:  # already evicted, its reservation not yet cleared: Kueue's
            if target.workload.key in self._evicting:  # IssuePreemptions counts it, writes nothing
                evicted.setdefault(by.wl.key, set()).add(target.workload.key)
        wanted = [w for w in wanted if w[0].workload.key not in self._evicting]
        messages = [self._preemption_message(by.wl.key, by.cq, cq, target.reason) for target, by, cq in wanted]
        committed = await commit_all(self.port, [partial(
            self.port.evict, target.workload.key, cluster_queue=cq, reason=target.reason, message=message)
            for (target, by, cq), message in zip(wanted, messages, strict=True)])
        evicting = []
        for (target, by, cq_name), message, ok in zip(wanted, messages, committed, strict=True):
            if not ok or cq_name is None:
                self.refused_in_round = self.refused_in_round or not ok
                continue
            self._record_eviction(target.workload, by.wl, target.reason, message, cq_name)
            self._idle.pop(cq_name, None)
            evicting.append((target, by, cq_name, self.cluster_queues[cq_name].post(
                Evict(target.workload.key, requeue_at=self._requeue_at(target.reason)))))
        releasing = []
        for target, by, cq_name, reply in evicting:
            key = target.workload.key
            if not await reply.result(self.cluster_queues[cq_name].ask_timeout):
                continue  # it had left its queue meanwhile
            # the no-flopping rule (cycle._nominate) counts only evictions that happened: one the
            # API refused is not one, or its preemptor would wait behind that victim forever.  The
            # preemptor's queue records it, with the preemptor's requeue (_requeue_rest)
            evicted.setdefault(by.wl.key, set()).add(key)
            self.events.append(("evicted", key, by.wl.key, target.reason))
            log.info("workload_evicted", workload=key, cluster_queue=cq_name,
                     preemptor=by.wl.key, reason=target.reason)
            if self.port.released(key):
                releasing.append((key, cq_name, self.cluster_queues[cq_name].post(Released(key))))
            else:
                self._evicting[key] = cq_name  # quota held until the reservation is cleared
        touched: set[str] = set()
        for key, cq_name, reply in releasing:
            if await reply.result(self.cluster_queues[cq_name].ask_timeout):
                self._released(key)
                self._changed(cq_name)
                touched.add(cq_name)
                await self.hold_back(key, cq_name)  # requeued through its LocalQueue
        # every release has climbed the victims' trees before a borrow request could miss one
        if touched:
            await self.drain_cohorts({n.name for name in touched
                                      for n in self.forest.cluster_queues[name].node.ancestors()})
        return touched, bool(wanted), evicted  # a refused eviction is retried, as a refused admission is

    def _requeue_at(self, reason: str) -> float | None:
        """A victim's queue order time once evicted for ``reason`` (``queue_order_time``), or None to keep its own."""
        sorting = gates.enabled(self.world.settings, "PrioritySortingWithinCohort")
        return None if reason != RECLAIMED_WHILE_BORROWING or sorting else self.now() + AFTER_PREEMPTOR

    async def _settle_evictions(self) -> None:
        """Release the victims whose reservation the port has since cleared (an eviction's second
        phase, on a cluster after the first): their quota goes back and their tree is requeued."""
        for key, cq_name in list(self._evicting.items()):
            if not self.port.released(key):
                continue
            del self._evicting[key]
            resumed = key in self._uncounted
            self._uncounted.discard(key)
            actor = self.cluster_queues.get(cq_name)
            if actor is not None and await actor.ask(Released(key)):
                self._released(key, counted=not resumed)
                await self.hold_back(key, cq_name)
                self._idle.pop(cq_name, None)
                self._changed(cq_name)
                self._requeue_tree(cq_name)

    async def _admit(self, result: CycleResult) -> tuple[set[int], bool]:
        """Reserve every admission up the tree at once, then commit the granted ones together.

        The cycle checked that its admissions fit together once its victims are gone, and a
        set of reservations that fits together is granted in any order (each node's check is
        an upper bound on usage, and what a node charges its parent sums to the same whatever
        the order), so this decides as one ask at a time would.  Returns the ids of the entries
        granted (held by their queue: committed, reverted, or being written) and whether any
        commit was attempted."""
        now = self.now()
        reserving = []
        for e in result.admitted:
            assert e.assignment is not None
            placement = Placement(e.cq, dict(e.assignment.usage), e.assignment.flavors(), now, e.counts)
            reserving.append((e, placement, self.cluster_queues[e.cq].post(Admit(e.wl, placement))))
        granted = []
        for e, placement, reply in reserving:
            answer = await reply.result(self.cluster_queues[e.cq].ask_timeout)
            self._changed(e.cq)
            if isinstance(answer, Denied):
                e.status, e.reason = "skipped", RequeueReason.FAILED_AFTER_NOMINATION
                e.message = (f"{answer.node}: {answer.fr[1]} in flavor {answer.fr[0]} would reach "
                             f"{answer.used} + request, above {answer.allowed}")
                continue
            granted.append((e, placement))
        if granted:
            await self._commit(granted, now)  # here, or in a task settled next round (actors.pipeline)
        settled = {id(e) for e, _ in granted}
        return settled, bool(granted)

    def _requeue_rest(self, result: CycleResult, settled: set[int], touched: set[str],
                      evicted: dict[str, set[str]]) -> bool:
        """Every other head goes back by its queue's rules (deferred to the next message to its
        queue); whether one was parked (that changes the next round)."""
        changed = False
        reasons, actors, forest = self.reasons, self.cluster_queues, self.forest.cluster_queues
        for e in result.entries:
            if id(e) in settled:
                continue
            key = e.wl.key
            reasons[key] = e.message
            if not changed and parks(forest[e.cq].spec.queueing_strategy == "StrictFIFO", e.reason):
                changed = True
            victims = evicted.get(key)
            actors[e.cq].defer(Requeue(e.wl, e.reason, e.status == "preempting",
                                       frozenset(victims) if victims else _NONE))
        for name in touched:
            self._requeue_tree(name)
        return changed

    def _released(self, key: str, *, counted: bool = True) -> None:
        """An eviction's second phase landed: the victim holds no quota, and it counts as evicted
        (unless the eviction was found already made, before this run)."""
        self._ran(key, self.world.placed.pop(key, None))
        if counted:
            self.evicted[key] = self.evicted.get(key, 0) + 1
