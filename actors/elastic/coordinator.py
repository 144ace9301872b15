"""The elastic coordinator: builds the tree of actors, runs rounds, commits, follows changes.

It owns no quota: every amount lives in a group actor or the root.  It owns the wiring
(which actor is whose parent), an index of which group holds which workload, the clock,
and the edge to the API port, with the evictions committed through it (for the outcome,
as ``ElasticRun`` records its own).

Changes (between rounds, never during one):

* a workload arrives, changes or goes (:meth:`hold`, :meth:`release`): one ``Hold`` or
  ``Release`` to its group, whose request then flows up and whose runtime flows down;
  a new version of a workload keeps what was decided for the old one (admitted stays
  admitted, with its new request: forced recycling corrects it if it no longer fits);
* a Node comes or goes: ``NodeTotal`` to the root, which divides again (min scaling
  included) at once;
* a group is added, changed or removed (or Nodes appear where there were none): the tree
  is rebuilt (:meth:`rebuild`).  Every group hands its workloads and its recycling timer
  over, the old actors stop, new ones start from the new setup and take the workloads
  back by key.  Validation (``World``) has already refused what Koordinator's webhook
  would, so the new tree is one Koordinator accepts.  No workload is lost (each key is
  handed back exactly once) and none is admitted twice (admission state travels with it;
  only a round's commit admits).

:meth:`sync` turns "the World now holds these objects" into those changes; the daemon
calls it after each batch.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

from actors.elastic.flow import Flow
from actors.elastic.group import ElasticGroupActor
from actors.elastic.messages import (
    BeginPass,
    Decision,
    GroupReply,
    GroupReport,
    GroupStats,
    Handed,
    Handover,
    Hold,
    NodeTotal,
    Order,
    Recycle,
    Recycled,
    Release,
    Restore,
    Revert,
    Stats,
    TryAdmit,
)
from actors.elastic.root import ElasticRootActor
from actors.elastic.status import StatusWriter
from kueued.engine.wiring import elastic_inputs
from kueued.kube.port import ApiPort
from kueued.model import koordinator as k
from kueued.quota.elastic import OUTSIDE_TREE, ElasticGroup, calculator_keys
from kueued.scheduling.elastic import (
    DEFAULT_DELAY_EVICT_TIME,
    ElasticEviction,
    ElasticOutcome,
    ElasticSetup,
    ElasticWorkload,
    GroupState,
    GroupStatus,
    outcome_of,
    prepare,
)
from kueued.world import World

__all__ = ["ElasticCoordinator", "simulate_elastic"]

log = structlog.get_logger("kueued.elastic")


def _on_cycle(groups: Mapping[str, ElasticGroup], name: str) -> bool:
    seen, parent = {name}, groups[name].parent
    while parent in groups:
        if parent in seen:
            return parent == name
        seen.add(parent)
        parent = groups[parent].parent
    return False


class ElasticCoordinator:
    """Starts one actor per group and the root, runs rounds, commits through the port.

    ``clock`` gives the time forced recycling measures its ``delay`` in (same unit);
    without one every run is a run to quiescence and the delay counts as elapsed.  ``recycle``:
    whether forced recycling runs (Koordinator's ``monitorAllQuotas``) while the World's settings
    do not say.
    """

    def __init__(self, setup: ElasticSetup, port: ApiPort, *, flow: Flow | None = None,
                 max_rounds: int | None = None, clock: Callable[[], float] | None = None,
                 delay: float = DEFAULT_DELAY_EVICT_TIME, recycle: bool = True,
                 keep_events: int | None = None) -> None:
        self.setup = setup
        self.port = port
        self.flow = flow or Flow()
        self.max_rounds = max_rounds  # None: 4 per workload held, plus 4
        self.clock = clock
        self.delay = delay
        self._recycle_default = recycle
        self.recycle = recycle
        self.status = StatusWriter(port)
        self.root: ElasticRootActor = None  # type: ignore[assignment]  # build() makes it
        self.groups: dict[str, ElasticGroupActor] = {}
        self.index: dict[str, tuple[str, tuple[Any, ...]]] = {}  # workload -> (its group, ElasticWorkload.spec_key)
        self.rounds = 0
        # every committed eviction, in order, for the outcome; ``keep_events`` bounds them
        self.evictions: deque[ElasticEviction] = deque(maxlen=keep_events)
        self._deadlines: dict[str, float] = {}
        self._tg: TaskGroup | None = None

    # --- the tree --------------------------------------------------------------------------
    def build(self, *, timers: Mapping[str, float] | None = None) -> dict[str, tuple[ElasticWorkload, ...]]:
        """Create and wire every actor of ``setup`` (no task yet); returns each group's workloads to hold."""
        setup, timers = self.setup, timers or {}
        self.root = ElasticRootActor(self.flow, keys=calculator_keys(None, setup.groups.values()),
                                     node_total=setup.node_total)
        sink = self.root  # the system and default groups' usage shrinks the root's total, Nodes or not
        self.groups = {}
        for name in sorted(setup.groups):
            state = GroupState(setup.groups[name], inner=name in setup.inner, over_since=timers.get(name))
            self.groups[name] = ElasticGroupActor(state, self.flow, usage_sink=sink if name in OUTSIDE_TREE else None)
        for name, actor in self.groups.items():
            parent = setup.groups[name].parent or k.ROOT_QUOTA
            if name in OUTSIDE_TREE or _on_cycle(setup.groups, name):
                continue  # outside the tree; a cycle is refused by validation, its groups stay detached
            if parent == k.ROOT_QUOTA:
                self.root.adopt(actor)
            elif parent in self.groups and parent not in OUTSIDE_TREE:
                self.groups[parent].adopt(actor)
        held: dict[str, list[ElasticWorkload]] = {name: [] for name in self.groups}
        for w in setup.workloads:
            held[w.group].append(w)
        self.index = {w.key: (w.group, w.spec_key()) for w in setup.workloads}
        self._deadlines = {}
        return {name: tuple(ws) for name, ws in held.items()}

    async def start(self, tg: TaskGroup, *, timers: Mapping[str, float] | None = None) -> None:
        """Wire the tree, start every actor, hand each group its workloads, let the tree settle."""
        self._tg = tg
        held = self.build(timers=timers)
        await tg.start(self.root.run)
        for actor in self.groups.values():
            await tg.start(actor.run)
        for name, actor in self.groups.items():
            await actor.ask(Hold(held[name]))
        await self.flow.settled()

    async def rebuild(self, setup: ElasticSetup) -> None:
        """A new tree for a new topology, carrying every workload still in ``setup`` over by key."""
        assert self._tg is not None, "start() first"
        await self.flow.settled()
        carried: dict[str, ElasticWorkload] = {}
        timers: dict[str, float] = {}
        for name, actor in self.groups.items():
            handed: Handed = await actor.ask(Handover())
            carried.update((w.key, w) for w in handed.workloads)
            if handed.over_since is not None:
                timers[name] = handed.over_since
        self.stop()
        for w in setup.workloads:
            if w.key in carried:
                w.carry(carried[w.key])
        self.setup = setup
        await self.start(self._tg, timers=timers)
        log.info("elastic_tree_rebuilt", groups=len(self.groups), workloads=len(self.index))

    # --- changes ---------------------------------------------------------------------------
    async def hold(self, workloads: Iterable[ElasticWorkload]) -> None:
        """New workloads, or new versions of held ones (which keep what was decided for them)."""
        by_group: dict[str, list[ElasticWorkload]] = {}
        for w in workloads:
            held = self.index.get(w.key)
            if held is not None and held[0] != w.group:
                old = await self.release(w.key)  # moved to another group: its state moves with it
                if old is not None:
                    w.carry(old)
            by_group.setdefault(w.group, []).append(w)
            self.index[w.key] = (w.group, w.spec_key())
        for name, ws in by_group.items():
            await self.groups[name].ask(Hold(tuple(ws)))
        await self.flow.settled()

    async def release(self, key: str) -> ElasticWorkload | None:
        """A workload finished or was deleted; returns it as its group last knew it."""
        held = self.index.pop(key, None)
        if held is None:
            return None
        w = await self.groups[held[0]].ask(Release(key))
        await self.flow.settled()
        return w

    async def arrive(self, manifest: Mapping[str, Any]) -> None:
        """A Workload manifest new to the tree (a timeline's arrival), placed as ``prepare`` places one."""
        await self.hold([self.setup.place(manifest)])

    async def finish(self, key: str) -> bool:
        return await self.release(key) is not None

    async def sync(self, setup: ElasticSetup) -> None:
        """Make the tree hold what ``setup`` says: topology, Nodes' total, workloads."""
        if setup.topology() != self.setup.topology():
            await self.rebuild(setup)
            return
        if setup.node_total != self.setup.node_total and setup.node_total is not None:
            await self.root.ask(NodeTotal(setup.node_total))
            await self.flow.settled()
            log.info("elastic_cluster_total", total=setup.node_total)
        self.setup = setup
        fresh = {w.key for w in setup.workloads}
        for key in [key for key in self.index if key not in fresh]:
            await self.release(key)
        await self.hold(w for w in setup.workloads if self.index.get(w.key, ("", None))[1] != w.spec_key())

    async def sync_world(self, world: World) -> None:
        """:meth:`sync` to a World's ElasticQuotas, the Workloads they hold, its Nodes and settings."""
        self.delay = world.settings.delay_evict_time
        monitor = world.settings.monitor_all_quotas
        self.recycle = self._recycle_default if monitor is None else monitor
        before = {k.name_of(q) for q in self.setup.quotas}
        inputs = elastic_inputs(world) or ([], [], list(world.nodes.values()))
        await self.sync(prepare(*inputs))
        for name in before - {k.name_of(q) for q in self.setup.quotas}:
            self.status.forget(name)

    # --- rounds ----------------------------------------------------------------------------
    def now(self) -> float | None:
        return self.clock() if self.clock is not None else None

    async def round(self) -> bool:
        """One scheduling pass and one recycling pass; returns whether anything changed."""
        self.rounds += 1
        changed = await self._schedule_pass()
        if await self._recycle_pass():
            changed = True
        return changed

    async def _schedule_pass(self) -> bool:
        heads: list[tuple[Order, str]] = []
        for name, actor in self.groups.items():
            head = await actor.ask(BeginPass())
            if head is not None:
                heapq.heappush(heads, (head, name))
        changed = False
        while heads:
            _, name = heapq.heappop(heads)
            actor = self.groups[name]
            decision: Decision = await actor.ask(TryAdmit())
            if decision.admitted:
                changed = True
                await self._commit(actor, decision)
            await self.flow.settled()
            if decision.head is not None:
                heapq.heappush(heads, (decision.head, name))
        return changed

    async def _commit(self, actor: ElasticGroupActor, d: Decision) -> None:
        """Victims' evictions first, then the admission; a refused commit is undone in the group."""
        refused = [v for v in d.victims
                   if not await self._evict(actor, ElasticEviction.preempted(v, by=d.workload),
                                            f"preempted by {d.workload}")]
        for v in refused:
            await actor.ask(Restore(v))
        if refused:
            await actor.ask(Revert(d.workload, "an eviction it needed was refused by the API server; retrying"))
            return
        usage = {("", r): v for r, v in d.usage.items()}  # no flavors in an elastic quota
        if not await self.port.admit(d.workload, cluster_queue=actor.name, flavors={}, usage=usage):
            leading = getattr(self.port, "leading", True)
            await actor.ask(Revert(d.workload, "the API server refused the admission; retrying" if leading
                                   else "this process follows: the leader admits it"))
            return
        log.info("elastic_workload_admitted", workload=d.workload, quota=actor.name)

    async def _evict(self, actor: ElasticGroupActor, eviction: ElasticEviction, why: str) -> bool:
        """Commit one eviction; once the port accepts it, it is recorded for the outcome."""
        ok = await self.port.evict(eviction.workload, cluster_queue=actor.name, reason=eviction.reason,
                                   message=f"{why} in quota {actor.name}")
        if ok:
            self.evictions.append(eviction)
            log.info("elastic_workload_evicted", workload=eviction.workload, quota=actor.name,
                     reason=eviction.reason, preemptor=eviction.by or None, message=why)
        return ok

    async def _recycle_pass(self) -> bool:
        if not self.recycle:
            self._deadlines.clear()
            return False
        changed = False
        now = self.now()
        for name, actor in self.groups.items():  # by name, as the pure pass
            recycled: Recycled = await actor.ask(Recycle(now, self.delay))
            for v in recycled.victims:
                if not await self._evict(actor, ElasticEviction.revoked(v), "revoked: used above runtime"):
                    await actor.ask(Restore(v))
            if recycled.deadline is None:
                self._deadlines.pop(name, None)
            else:
                self._deadlines[name] = recycled.deadline
            changed = changed or bool(recycled.victims)
            await self.flow.settled()
        return changed

    async def run_to_quiescence(self) -> int:
        start = self.rounds
        limit = self.max_rounds if self.max_rounds is not None else 4 * len(self.index) + 4
        while self.rounds - start < limit and await self.round():
            pass
        log.info("elastic_settled", rounds=self.rounds - start)
        return self.rounds - start

    def deadline(self) -> float | None:
        """When forced recycling is next due somewhere, on the clock (None: nowhere).

        Read after a run to quiescence: its last round asked every group.
        """
        return min(self._deadlines.values(), default=None)

    # --- what leaves -----------------------------------------------------------------------
    async def publish(self) -> int:
        """Write each ElasticQuota's request and runtime annotations and its ``status.used`` (what the
        workloads of its subtree hold, as Koordinator's GetUsed sums it up the tree) where they
        moved; how many were written."""
        stats: dict[str, GroupStats] = {}
        for name, actor in self.groups.items():
            stats[name] = await actor.ask(Stats())
        used = _subtree_used(self.setup.groups, {name: s.used for name, s in stats.items()})
        written = 0
        for quota in self.setup.quotas:
            s = stats.get(k.name_of(quota))
            if s is not None:
                written += await self.status.publish(quota, request=s.request, runtime=s.runtime,
                                                     used=used.get(s.name, {}))
        return written

    async def validated(self, quota: Mapping[str, Any], reason: str | None) -> None:
        """An ElasticQuota was refused (``reason``) or accepted: say so on the object."""
        await self.status.validated(quota, reason)

    async def outcome(self) -> ElasticOutcome:
        results: dict[str, Any] = {}
        statuses: dict[str, GroupStatus] = {}
        for actor in self.groups.values():
            reply: GroupReply = await actor.ask(GroupReport())
            results.update(reply.results)
            statuses[reply.name] = GroupStatus(request=reply.request, runtime=reply.runtime,
                                               min=reply.min, max=reply.max)
        return outcome_of(self.setup, results, statuses, self.evictions)

    def stop(self) -> None:
        for actor in [*self.groups.values(), *([self.root] if self.root is not None else [])]:
            actor.stop()


def _subtree_used(groups: Mapping[str, Any], own: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Each group's used with its descendants' added (a child's used counts in every ancestor)."""
    total: dict[str, dict[str, int]] = {}
    for name, amounts in own.items():
        seen: set[str] = set()
        node: str | None = name
        while node is not None and node in groups and node not in seen:  # a cycle is refused, but never loop
            seen.add(node)
            into = total.setdefault(node, {})
            for r, v in amounts.items():
                into[r] = into.get(r, 0) + v
            node = groups[node].parent
    return total


async def simulate_elastic(quotas: list[dict], workloads: list[dict], nodes: list[dict], port: ApiPort, *,
                           flow: Flow | None = None, max_rounds: int | None = None) -> ElasticOutcome:
    """``run_elastic`` on actors: start them, run to quiescence, stop them (structured concurrency)."""
    coord = ElasticCoordinator(prepare(quotas, workloads, nodes), port, flow=flow, max_rounds=max_rounds)
    async with anyio.create_task_group() as tg:
        try:
            await coord.start(tg)
            await coord.run_to_quiescence()
            outcome = await coord.outcome()
        finally:
            coord.stop()
    return outcome
