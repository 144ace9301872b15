"""The root coordinator: owns the topology and the round clock, places workloads, commits decisions.

It owns the topology (rebuilt from the :class:`World` whenever a Cohort, ClusterQueue,
flavor or the Configuration changes: actors are started or stopped, each is told its
limits, subtree quota, parent actor and, for a Cohort, its children, and ClusterQueues
re-charge their admitted usage up the tree), places every workload in the queue it
routes to (or the queue it is admitted in), and reacts to changes while running (a watch
event in the daemon, an arrival or a finish on a timeline; a Workload's new version:
:mod:`actors.versions`).  It holds no queue's workloads and no balance of its own: each
round reads the balances the actors own and asks the tree for the candidates a preemptor
may take quota from (:mod:`actors.rounds`, :mod:`actors.reclaim`).

A workload reaches its queue as its immutable spec; the queue builds and owns its
scheduling state.  The coordinator keeps only an index of where each workload holds quota
(``World.placed``), written from its queues' replies (an admission committed, an adoption,
an eviction's second phase, a finish), which the readers outside the queues use (status,
metrics, reasons, the policies that weigh what a LocalQueue holds); a spec's status
admission is read once, when a queue first takes that version.

Everything a round starts is an ask it awaits, a tell or deferred tell ahead of the next
ask to the same actor, a release climbing ahead of the next level-by-level read, or an
admission being written (:mod:`actors.pipeline`), which every run waits for before it ends,
so nothing a reader could miss is in flight when quiescence is detected.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import structlog
from anyio.abc import TaskGroup

from actors.balances import Balances
from actors.cluster_queue import ClusterQueueActor
from actors.cohort import CohortActor
from actors.deadlines import Deadlines
from actors.drains import Drains, held_back
from actors.events import Recording
from actors.fold import FOLD_LIMIT, Fold
from actors.messages import (
    Adopt,
    Configure,
    Enqueue,
    Finish,
    Forget,
    Left,
    Queued,
    Recharge,
    RequeueParked,
)
from actors.node import NodeActor, node_key, within_quota
from actors.pipeline import Pipeline
from actors.rounds import Rounds
from actors.runtime import ActorStopped
from actors.versions import Versions
from kueued.engine.wiring import PreemptorFactory, forest_of, make_iterate, queue_order_hook
from kueued.kube.port import ApiPort, Recorder
from kueued.scheduling.cycle import Iterate
from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
from kueued.scheduling.forest import build_forest
from kueued.scheduling.snapshot import ClusterQueueSnapshot, CohortSnapshot, Snapshot
from kueued.scheduling.verdicts import Verdicts
from kueued.scheduling.workload import WorkloadSpec
from kueued.world import Change, World

__all__ = ["Coordinator", "FOLD_LIMIT"]

log = structlog.get_logger("kueued.coordinator")

ATTEMPTS_KEPT = 10_000
"""Admission attempts kept until the metrics read them (bounded: nothing may read them at all)."""


class Coordinator(Rounds, Fold, Pipeline, Versions, Drains, Deadlines, Recording, Balances):
    def __init__(self, world: World, port: ApiPort, *,
                 preemptor: PreemptorFactory,
                 iterate: Iterate | None = None, keep_events: int | None = None) -> None:
        self.world = world
        self.port = port
        self.make_preemptor = preemptor
        # None: the admission order the World's settings call for (``make_iterate``), chosen again at
        # every topology change, where a Configuration lands (fair sharing turned on after the start
        # once left the daemon on the classical order for good)
        self._own_iterate = iterate
        self.iterate = iterate if iterate is not None else make_iterate(world)
        self.forest = build_forest(cluster_queues={}, cohorts={}, flavors={})
        self.cluster_queues: dict[str, ClusterQueueActor] = {}
        self.cohorts: dict[str, CohortActor] = {}
        self.reasons: dict[str, str] = {}
        self.unrouted: dict[str, str] = {}
        # decisions, oldest first; ``keep_events`` bounds them (a daemon reads none of them)
        self.events: deque[tuple[str, str, str, str]] = deque(maxlen=keep_events)
        self.rounds = 0
        self.quiescent = True  # did the last run_to_quiescence end on a round that changed nothing
        # The daemon's: a commit the API port refused ends the run, so the watch's newer versions are
        # applied before deciding again (without, a stale version was re-committed, and refused, in a loop)
        self.stop_on_refusal = False
        self.refused_in_round = False
        self.admissions = 0  # committed by this process
        self.attempts: deque[tuple[bool, float]] = deque(maxlen=ATTEMPTS_KEPT)  # (admitted one, seconds): metrics
        self.preemption_skips: deque[dict[str, int]] = deque(maxlen=ATTEMPTS_KEPT)  # per cycle that had any
        self.final: Snapshot | None = None
        self.clock: Callable[[], float] | None = None  # epoch seconds; a timeline's clock when set
        self.verdicts = Verdicts()
        self._depths: dict[str, int] = {}  # Cohort actor -> depth, for reading children first
        # Queues that had nothing to pop, with the balance they reported then: not asked again
        # until a message that can change them is sent (every such message is the coordinator's).
        self._idle: dict[str, dict] = {}
        self._evicting: dict[str, str] = {}  # workload -> its queue: eviction committed, quota still held
        self._uncounted: set[str] = set()  # of those, the ones that are no preemption of this run: found
        # evicted (committed before it), or drained (actors.drains)
        self._drain_due = True  # a change since the last drain may call for one (actors.drains)
        self._stale_trees: dict[int, Any] = {}  # roots whose parked workloads go back before the next pop
        self._fold_limit: dict[str, int] = {}  # tree root -> how far its queues look ahead next round
        self._finishing: list[tuple[str, bool, Any]] = []  # Finish asks posted, not yet answered
        self._cohort_usage: dict[str, dict] = {}  # Cohort -> usage it last reported, until _changed
        self.afs = AdmissionFairSharing(world, clock=self.now)
        self.recorder: Recorder | None = None  # Events about decisions (the daemon sets it on a cluster)
        self._tg: TaskGroup | None = None  # where the actors run (the last sync_topology's)
        self.held: set[Change] | None = None  # topology and routing changes a batch holds back (release_held)
        self._taken: set[str] = set()  # workloads whose current version a queue has taken (status read once)
        self.evicted: dict[str, int] = {}  # workload -> evictions completed (for reports; its queue keeps its own)
        self._left: dict[str, Left] = {}  # pending workloads taken out of their queue, until placed again
        self._deadlines: dict[str, tuple[float, float]] = {}  # admitted -> (out of time at, admitted at)
        self._past: dict[str, int] = {}  # workload -> seconds its earlier admissions ran (actors.deadlines)
        self._init_pipeline()

    # --- topology ----------------------------------------------------------------------------
    async def sync_topology(self, tg: TaskGroup) -> None:
        self._tg = tg
        if self.commits_in_flight:  # reaped mid-run: a workload being written is held, queued nowhere
            await self.settle_commits(wait=True)  # route_all would queue it again (actors.pipeline)
        for actor in self.cluster_queues.values():
            await actor.drain()  # every deferred arrival and requeue in place before the tree changes
        # releases still climbing must land before Configure resets a balance, not after
        await self.drain_cohorts()
        self._depths.clear()
        self.forest = forest_of(self.world)
        if self._own_iterate is None:
            self.iterate = make_iterate(self.world)
        self.usage_ordered = False
        for name, cq in self.forest.cluster_queues.items():
            if name not in self.cluster_queues:
                fresh = ClusterQueueActor(name, strict=_strict(cq))
                await tg.start(fresh.run)
                self.cluster_queues[name] = fresh
            hook = queue_order_hook(self, cq, afs=self.afs)
            self.usage_ordered = self.usage_ordered or hook is not None
            self.cluster_queues[name].order_by(hook)
        for name in self.forest.cohorts:
            if name not in self.cohorts:
                actor_c = CohortActor(name)
                await tg.start(actor_c.run)
                self.cohorts[name] = actor_c
        for name in [n for n in self.cluster_queues if n not in self.forest.cluster_queues]:
            gone = self.cluster_queues.pop(name)  # its pending go elsewhere, with their history
            self._left.update(await gone.ask(Forget(None)))
            gone.stop()
        for name in [n for n in self.cohorts if n not in self.forest.cohorts]:
            self.cohorts.pop(name).stop()
        items: list[ClusterQueueSnapshot | CohortSnapshot] = [*self.forest.cluster_queues.values(),
                                                              *self.forest.cohorts.values()]
        for item in items:
            node = item.node
            parent = self.cohorts[node.parent.name] if node.parent is not None else None
            children = tuple((node_key(c.name, is_cohort=c.is_cohort), self._actor(c.name, c.is_cohort),
                              within_quota(c)) for c in node.children)
            queue = (item.active, _strict(item)) if isinstance(item, ClusterQueueSnapshot) else (True, False)
            await self._actor(item.name, node.is_cohort).ask(
                Configure(node.limits, node.subtree, parent, children, *queue))
        for actor in self.cluster_queues.values():
            await actor.ask(Recharge())
            actor.tell(RequeueParked())  # a quota or tree change may let parked workloads in
        self.verdicts.forget(self.forest, self.world.settings)
        self._cohort_usage.clear()
        self._idle.clear()
        await self.route_all()

    async def reap_terminated(self) -> None:
        """Terminating ClusterQueues (:meth:`~kueued.world.World.forget_terminated`) whose last
        admitted workload has left are removed now."""
        gone = [name for name in sorted(self.world.terminating) if self.world.forget_terminated(name)]
        for name in gone:
            log.info("cluster_queue_deleted", cluster_queue=name, reason="no workload is admitted in it any more")
        if gone and self._tg is not None:
            await self.sync_topology(self._tg)

    def _actor(self, name: str, is_cohort: bool) -> NodeActor:
        return self.cohorts[name] if is_cohort else self.cluster_queues[name]

    async def route_all(self, queued: set[str] | None = None) -> None:
        """Every workload no queue holds is placed; ``queued``: the pending workloads the queues
        hold, when the caller knows (else each queue is asked)."""
        self._idle.clear()  # any queue may be given workloads below
        self.unrouted.clear()
        for actor in self.cluster_queues.values():
            if actor.deferring:
                await actor.drain()  # a deferred requeue must be back in its queue, read below
        if queued is None:
            queued = set()
            for actor in self.cluster_queues.values():
                queued.update(await actor.ask(Queued()))
        placed = self.world.placed
        for spec in self.world.workloads.values():
            if spec.key in placed or spec.key not in queued:
                await self._place(spec)
        # what is left is of workloads routed nowhere now (they keep it), or gone meanwhile
        self._left = {key: left for key, left in self._left.items() if key in self.world.workloads}

    async def _place(self, spec: WorkloadSpec, history: Left | None = None) -> None:
        """One workload into the running system: adopted by the queue it holds quota in (the
        index's placement, or for a version no queue has taken yet the one its status carries),
        else queued where its LocalQueue routes (or noted as unrouted, with why).  ``history``:
        what an earlier version's queue gave back, carried on to this one."""
        key = spec.key
        self.unrouted.pop(key, None)
        if history is not None:
            self._left[key] = history  # until a queue takes it
        placement = self.world.placed.get(key) or (spec.observed if key not in self._taken else None)
        cq, why = (placement.cluster_queue, "") if placement is not None else self.world.route(spec)
        actor = self.cluster_queues.get(cq or "")
        if actor is None:
            if placement is None:
                self.unrouted[key] = why or f"ClusterQueue {cq} doesn't exist"
            return
        history = self._left.pop(key, None)
        self._taken.add(key)
        self._idle.pop(actor.name, None)
        if placement is not None:
            adopted = key not in self.world.placed
            self.world.placed[key] = placement
            self._watch_deadline(key, placement)
            await actor.ask(Adopt(spec, placement, history))
            self._changed(actor.name)
            evicted = next((c for c in spec.obj.status.conditions if c.type == "Evicted" and c.status == "True"), None)
            if adopted and evicted is not None:
                # evicted, its reservation not yet cleared (a restart between an eviction's phases, or
                # another scheduler's eviction): its eviction is finished, never issued again (Kueue's
                # IssuePreemptions counts such a target for its preemptor and writes nothing)
                self._evicting[key] = actor.name
                self._uncounted.add(key)  # evicted before this run: not counted as one of its evictions
                self.port.resume_eviction(key, evicted.message)
            return
        why = held_back(self.world, spec)
        if why:  # deactivated, or its LocalQueue stopped: it waits outside the queues (still taken: an
            self.unrouted[key] = why  # admission this version's status carries was had, never adopted again)
            if history is not None:
                self._left[key] = history
            return
        await actor.ask(Enqueue(spec, history))
        snap_cq = self.forest.cluster_queues[actor.name]
        if not snap_cq.active:
            self.reasons[key] = snap_cq.inactive_reason

    # --- changes while running ---------------------------------------------------------------
    async def apply(self, manifest: dict, tg: TaskGroup) -> Change:
        """Apply one object to the running system (a watch event in the daemon)."""
        key = _workload_key(manifest)
        old = self.world.workloads.get(key)
        change, _ = self.world.apply(manifest)
        await self._react(change, key, old, tg, status_kept=bool(manifest.get("status")))
        return change

    async def delete(self, manifest: dict, tg: TaskGroup) -> Change:
        key = _workload_key(manifest)
        old = self.world.workloads.get(key)
        change, _ = self.world.delete(manifest)
        await self._react(change, key, old, tg)
        return change

    async def _react(self, change: Change, key: str, old: WorkloadSpec | None, tg: TaskGroup, *,
                     status_kept: bool = False) -> None:
        """``status_kept``: the new version comes with a status (a cluster's Workload; a file's
        manifest has none, unless it describes a workload admitted beforehand)."""
        if change in (Change.TOPOLOGY, Change.ROUTING) or (
                change is Change.WORKLOAD and (new := self.world.workloads.get(key)) is not None
                and not new.obj.spec.active):
            self._drain_due = True  # a stop policy may have changed, or a Workload was deactivated
        if self.held is not None and change in (Change.TOPOLOGY, Change.ROUTING):
            self.held.add(change)
        elif change is Change.TOPOLOGY:
            await self.sync_topology(tg)
        elif change is Change.ROUTING:
            await self._reroute_pending()
        elif change is Change.WORKLOAD:
            await self._new_version(key, old, self.world.workloads.get(key), status_kept)

    async def release_held(self, tg: TaskGroup) -> None:
        """Once for a batch (``held`` set before it): the tree rebuilt or the pending re-routed (each
        a pass over every queue: a first list of 1,000 queues, one by one, took 22 s to start)."""
        held, self.held = self.held, None
        if held and Change.TOPOLOGY in held:
            await self.sync_topology(tg)
        elif held:
            await self._reroute_pending()

    async def _reroute_pending(self) -> None:
        self._idle.clear()
        self.verdicts.forget(self.forest, self.world.settings)  # namespaces or LocalQueues changed
        pending = frozenset(key for key in self.world.workloads if key not in self.world.placed)
        for actor in self.cluster_queues.values():  # one message a queue, not one a workload
            self._left.update(await actor.ask(Forget(pending)))
        await self.route_all(queued=set())  # every pending workload was just taken out

    # --- a timeline's hooks (kueued.timeline): route_all and _drop for one workload ----------
    async def arrive(self, key: str) -> None:
        """A workload new to the World (already applied) joins its ClusterQueue actor."""
        spec = self.world.workloads[key]
        cq, why = self.world.route(spec)
        why = why or held_back(self.world, spec)
        if cq is None or cq not in self.cluster_queues or why:
            self.unrouted[key] = why or f"ClusterQueue {cq} doesn't exist"
            return
        self._idle.pop(cq, None)
        self._taken.add(key)
        # rides on the next message to the queue (its next Nominate, a Finish, a drain):
        # handled where a tell would be, without waking the queue once per arrival
        self.cluster_queues[cq].defer(Enqueue(spec))

    async def finish(self, key: str) -> None:
        """A workload finished: it leaves the World, its actor releases the quota, and the
        parked workloads of its tree are requeued (Kueue's reaction to a Finished workload)."""
        spec = self.world.workloads.pop(key, None)
        placed = self.world.placed.pop(key, None)
        self._evicting.pop(key, None)
        self._uncounted.discard(key)
        self._taken.discard(key)
        self.evicted.pop(key, None)
        self._left.pop(key, None)
        self._deadlines.pop(key, None)
        self._past.pop(key, None)
        self.world.raw.pop(f"Workload/{key}", None)
        self.reasons.pop(key, None)
        if spec is None:
            return
        name = placed.cluster_queue if placed is not None else self.world.route(spec)[0]
        actor = self.cluster_queues.get(name or "")
        if name is not None and actor is not None:
            # answered before the next round reads a balance (_settle_finishes): the
            # finishes of one instant release their quota concurrently
            self._idle.pop(name, None)
            self._finishing.append((name, placed is not None, actor.post(Finish(key))))

    async def _settle_finishes(self) -> None:
        finishing, self._finishing = self._finishing, []
        for name, admitted, reply in finishing:
            try:
                left = await reply.result(ClusterQueueActor.ask_timeout)
            except ActorStopped:  # its ClusterQueue was deleted meanwhile: nothing is left to release
                continue
            if left is not None and admitted and name in self.forest.cluster_queues:
                self._changed(name)
                self._requeue_tree(name)

    def now(self) -> float:
        return self.clock() if self.clock is not None else 4_000_000_000.0 + self.rounds

    async def run_to_quiescence(self, *, max_rounds: int = 100_000,
                                until: Callable[[], bool] | None = None) -> int:
        """Run rounds until one changes nothing; ``until()``, asked after each round, stops it early.

        ``quiescent`` says afterwards whether the last round changed nothing.
        """
        start = self.rounds
        self.quiescent = False
        while self.rounds - start < max_rounds:
            # a round that changed nothing is the last unless a write still in flight is refused
            if not await self.round() and not await self.settle_commits(wait=True):
                self.quiescent = True
                break
            if until is not None and until():
                break
            if self.stop_on_refusal and self.refused_in_round:
                break
        if await self.settle_commits(wait=True):  # nothing in flight between runs (actors.pipeline)
            self.quiescent = False
        return self.rounds - start

    def stop(self) -> None:
        for a in [*self.cluster_queues.values(), *self.cohorts.values()]:
            a.stop()


def _strict(cq: ClusterQueueSnapshot) -> bool:
    return cq.spec.queueing_strategy == "StrictFIFO"


def _workload_key(manifest: dict) -> str:
    meta = manifest.get("metadata")
    if manifest.get("kind") != "Workload" or not isinstance(meta, dict):
        return ""  # (a malformed one is refused by the World, never placed)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
