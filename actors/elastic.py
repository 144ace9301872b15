"""ElasticQuota trees on the actor engine: one actor per group, requests up, runtime down.

An ElasticQuota tree is a quota tree whose admission policy is runtime quota.  It lives
beside the Kueue-style trees: its :class:`ElasticCoordinator` is the sibling of
``actors.coordinator.Coordinator``, started in the same task group and committing
through the same API port.  Every decision is made by the pure code
(``kueued.quota.elastic`` for amounts, ``kueued.scheduling.elastic.GroupState`` for
admission, preemption and recycling), one group at a time, so this engine and
``run_elastic`` decide identically.

Who owns what:

* :class:`ElasticGroupActor` (one per group, the system and default groups included)
  owns its spec, its workloads (:class:`GroupState`: the admitted set, plus a pending
  heap here), the last limited request each child told it and the runtime its parent
  gave it.
* :class:`ElasticRootActor` is Koordinator's root quota: it owns the cluster total (the
  Nodes' allocatable minus what the system and default groups use, or without Nodes the
  top-level groups' max) and divides it among the top-level groups.

Data flow (every message a tell through one :class:`Flow`, which counts them):

1. Requests go UP.  When a group's request moves (a workload held, a child's
   ``RequestUp``), it computes ``limit_request`` (min(request, max), raised to min for
   a group that does not lend) and tells its parent ``RequestUp``.  The system and
   default groups sit outside the tree; when Nodes are modelled they tell the root
   ``OutsideUsage`` whenever what they use moves.
2. Runtime goes DOWN.  When a parent's inputs move (a child's request, its own total),
   it divides its total among its children with ``divide_runtime`` and tells each
   child whose share changed ``RuntimeDown``; an inner child divides in turn.  A group
   the root never reaches (a missing parent) never gets a runtime: zero, as in
   ``compute_runtime``.
3. Each message carries its sender's sequence number and a receiver keeps only the
   newest per sender, so the state the tree settles in depends only on the last value
   each group sent, never on the order messages were delivered in: it is the pure
   computation's.

Rounds (the coordinator, asks only; after each one it waits for the flow to settle, so
every decision sees the runtime the pure engine would):

* scheduling pass: ``BeginPass`` to every group (what was set aside returns to its
  heap; the reply is its head), then repeatedly ``TryAdmit`` to the group whose head
  comes first (priority, creation, key: a k-way merge of the heaps is the pure pass's
  global order).  The group decides with ``GroupState.schedule``; victims and failures
  are set aside until the next pass, as the pure pass snapshots its pending list.  The
  coordinator commits victims' evictions, then the admission, through the port; a
  refused commit is ``Restore``-d / ``Revert``-ed and retried next round.
* recycling pass: ``Recycle`` to every group by name; the victims are committed.

A round that admits and evicts nothing is quiescence.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

from actors.elastic_messages import (
    Amounts,
    BeginPass,
    Decision,
    GroupReply,
    GroupReport,
    GroupStats,
    Hold,
    Order,
    OutsideUsage,
    Recycle,
    RequestUp,
    Restore,
    Revert,
    RuntimeDown,
    Stats,
    TryAdmit,
)
from actors.runtime import Actor, ActorStopped
from kueued.kube.port import ApiPort
from kueued.model import koordinator as k
from kueued.quota.elastic import (
    OUTSIDE_TREE,
    ElasticGroup,
    calculator_keys,
    divide_runtime,
    limit_request,
    masked_runtime,
    sum_resources,
)
from kueued.scheduling.elastic import (
    ElasticOutcome,
    ElasticSetup,
    ElasticWorkload,
    GroupState,
    GroupStatus,
    max_rounds_for,
    outcome_of,
    prepare,
    result_of,
)

__all__ = ["Flow", "ElasticGroupActor", "ElasticRootActor", "ElasticCoordinator", "simulate_elastic"]

log = structlog.get_logger("kueued.elastic")


class Flow:
    """Counts the tree's messages from send to handled; :meth:`settled` waits for none.

    Requests and runtimes are told, never asked (a child asking its parent while the
    parent asks the child would deadlock), so the coordinator needs this to know when
    the tree is at rest.  ``deliver`` is the seam a test uses to reorder messages.
    """

    def __init__(self) -> None:
        self.in_flight = 0
        self._idle: anyio.Event | None = None

    def tell(self, actor: Actor, msg: Any) -> None:
        self.in_flight += 1
        try:
            self.deliver(actor, msg)
        except ActorStopped:
            self.done()
            raise

    def deliver(self, actor: Actor, msg: Any) -> None:
        actor.tell(msg)

    def done(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None

    async def settled(self) -> None:
        while self.in_flight:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()


def _koord(amounts: Mapping[str, int]) -> Amounts:
    return {r: k.koord_value(r, v) for r, v in amounts.items()}


class _Parent(Actor):
    """What the root and an inner group share: children's requests in, their runtimes out."""

    def __init__(self, name: str, flow: Flow) -> None:
        super().__init__(name)
        self.flow = flow
        self.children: dict[str, ElasticGroupActor] = {}
        self.child_limited: dict[str, Amounts] = {}
        self._child_seq: dict[str, int] = {}
        self._sent_down: dict[str, tuple[Amounts, Amounts]] = {}
        self._seq = 0

    def adopt(self, child: ElasticGroupActor) -> None:
        self.children[child.name] = child
        child.parent = self

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def divide_total(self) -> Amounts | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def division_keys(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_request(self, child: str, limited: Amounts, seq: int) -> bool:
        """A child's limited request; False when it is older than one already seen."""
        if seq <= self._child_seq.get(child, 0):
            return False
        self._child_seq[child] = seq
        self.child_limited[child] = dict(limited)
        return True

    def divide(self) -> None:
        """Split the total among the children; tell each whose share moved."""
        total = self.divide_total()
        if total is None or not self.children:
            return
        kids = sorted(self.children)
        runtime, scaled = divide_runtime(
            total, [(self.children[c].spec, self.child_limited.get(c, {})) for c in kids],
            keys=self.division_keys(),
        )
        for c in kids:
            share = (runtime[c], scaled[c])
            if self._sent_down.get(c) != share:
                self._sent_down[c] = share
                self.flow.tell(self.children[c], RuntimeDown(runtime[c], scaled[c], self.next_seq()))


class ElasticRootActor(_Parent):
    """Koordinator's root quota: the cluster total, divided among the top-level groups."""

    def __init__(self, flow: Flow, *, keys: Iterable[str], node_total: Mapping[str, int] | None) -> None:
        super().__init__(k.ROOT_QUOTA, flow)
        self.keys = sorted(keys)
        self.node_total = None if node_total is None else dict(node_total)
        self.outside: dict[str, Amounts] = {}
        self._outside_seq: dict[str, int] = {}

    def cluster_total(self) -> Amounts:
        """What the root shares, in milli-units (updateClusterTotalResourceNoLock)."""
        if self.node_total is None:
            return sum_resources(self.children[c].spec.max for c in sorted(self.children))
        total = dict(self.node_total)
        for r, v in sum_resources(self.outside[g] for g in sorted(self.outside)).items():
            total[r] = total.get(r, 0) - v  # quotav1.Subtract keeps every key
        return total

    def divide_total(self) -> Amounts:
        return _koord(self.cluster_total())

    def division_keys(self) -> list[str]:
        return self.keys

    def handle(self, msg: Any) -> Any:
        match msg:
            case RequestUp(child=child, limited=limited, seq=seq):
                try:
                    if self.on_request(child, limited, seq):
                        self.divide()
                finally:
                    self.flow.done()
                return None
            case OutsideUsage(group=group, used=used, seq=seq):
                try:
                    if seq > self._outside_seq.get(group, 0):
                        self._outside_seq[group] = seq
                        self.outside[group] = dict(used)
                        self.divide()
                finally:
                    self.flow.done()
                return None
            case Stats():
                s = self.stats()
                return GroupStats(self.name, s.mailbox, s.handled, 0, 0, {}, self.cluster_total())
        raise TypeError(f"{self.name}: unexpected message {type(msg).__name__}")


class ElasticGroupActor(_Parent):
    """One ElasticQuota group: its workloads, its children's requests, its runtime."""

    def __init__(self, state: GroupState, flow: Flow, *, usage_sink: ElasticRootActor | None = None) -> None:
        super().__init__(state.name, flow)
        self.state = state
        self.spec: ElasticGroup = state.spec
        self.outside = state.name in OUTSIDE_TREE
        self.parent: _Parent | None = None  # where requests go; None: outside the tree or detached
        self.usage_sink = usage_sink  # the root, for the system and default groups when Nodes are modelled
        self.total: Amounts | None = None  # runtime from the parent, Koordinator values; None: never reached
        self.scaled_min: Amounts = _koord(self.spec.min)
        self._down_seq = 0
        self._sent_up: Amounts | None = None
        self._sent_usage: Amounts | None = None
        self.heap: list[tuple[Order, str]] = []
        self.aside: list[str] = []  # tried, evicted or reverted during this pass

    # --- amounts ---------------------------------------------------------------------------
    def request(self) -> tuple[Amounts, Amounts]:
        """(request, limited request): children's limited requests for a parent, workloads' for a leaf."""
        if self.outside:
            own = {r: max(v, 0) for r, v in self.state.own_request().items()}
            return own, dict(own)
        if self.state.inner:
            asked = sum_resources(self.child_limited[c] for c in sorted(self.child_limited))
        else:
            asked = self.state.own_request()
        return limit_request(self.spec, asked)

    def runtime(self) -> Amounts:
        """The runtime in milli-units on max's keys; the system and default groups' is their max."""
        if self.outside:
            return dict(self.spec.max)
        return masked_runtime(self.spec, self.total or {})

    def divide_total(self) -> Amounts | None:
        return self.total

    def division_keys(self) -> list[str]:
        return calculator_keys(self.spec)

    def request_moved(self) -> None:
        limited = self.request()[1]
        if self.parent is not None and limited != self._sent_up:
            self._sent_up = limited
            self.flow.tell(self.parent, RequestUp(self.name, limited, self.next_seq()))
        self.divide()

    def usage_moved(self) -> None:
        if self.usage_sink is None:
            return
        used = self.state.used()
        if used != self._sent_usage:
            self._sent_usage = used
            self.flow.tell(self.usage_sink, OutsideUsage(self.name, used, self.next_seq()))

    def on_runtime(self, runtime: Amounts, scaled_min: Amounts, seq: int) -> None:
        if seq <= self._down_seq:
            return
        self._down_seq = seq
        self.total, self.scaled_min = dict(runtime), dict(scaled_min)
        self.divide()

    # --- workloads -------------------------------------------------------------------------
    def hold(self, workloads: Iterable[ElasticWorkload]) -> None:
        for w in workloads:
            self.state.workloads[w.key] = w
            if not w.admitted:
                heapq.heappush(self.heap, (w.order(), w.key))
        self.request_moved()
        self.usage_moved()

    def head(self) -> Order | None:
        return self.heap[0][0] if self.heap else None

    def begin_pass(self) -> Order | None:
        for key in self.aside:
            w = self.state.workloads[key]
            if not w.admitted:
                heapq.heappush(self.heap, (w.order(), key))
        self.aside.clear()
        return self.head()

    def try_admit(self) -> Decision:
        _, key = heapq.heappop(self.heap)
        w = self.state.workloads[key]
        victims = self.state.schedule(w, self.runtime())
        if victims is None:
            self.aside.append(key)
            return Decision(key, False, (), w.reason, {}, self.head())
        self.aside.extend(v.key for v in victims)
        self.usage_moved()
        return Decision(key, True, tuple(v.key for v in victims), "", dict(w.request), self.head())

    def recycle(self) -> tuple[str, ...]:
        victims = self.state.recycle(self.runtime())
        self.aside.extend(v.key for v in victims)
        if victims:
            self.usage_moved()
        return tuple(v.key for v in victims)

    def revert(self, key: str, reason: str) -> None:
        w = self.state.workloads[key]
        w.admitted, w.reason = False, reason
        self.aside.append(key)
        self.usage_moved()

    def restore(self, key: str) -> None:
        w = self.state.workloads[key]
        w.admitted, w.reason, w.preemptions = True, "", w.preemptions - 1
        if key in self.aside:
            self.aside.remove(key)
        self.usage_moved()

    def report(self) -> GroupReply:
        runtime = self.runtime()
        results = {}
        for key, w in self.state.workloads.items():
            if not w.admitted:
                w.reason = self.state.prefilter(w, runtime) or w.reason
            results[key] = result_of(w)
        return GroupReply(self.name, self.request()[0], runtime, dict(self.spec.min), dict(self.spec.max), results)

    # --- the shell -------------------------------------------------------------------------
    def handle(self, msg: Any) -> Any:
        match msg:
            case RequestUp(child=child, limited=limited, seq=seq):
                try:
                    if self.on_request(child, limited, seq):
                        self.request_moved()
                finally:
                    self.flow.done()
                return None
            case RuntimeDown(runtime=runtime, scaled_min=scaled_min, seq=seq):
                try:
                    self.on_runtime(runtime, scaled_min, seq)
                finally:
                    self.flow.done()
                return None
            case Hold(workloads=workloads):
                return self.hold(workloads)
            case BeginPass():
                return self.begin_pass()
            case TryAdmit():
                return self.try_admit()
            case Recycle():
                return self.recycle()
            case Revert(workload=key, reason=reason):
                return self.revert(key, reason)
            case Restore(workload=key):
                return self.restore(key)
            case GroupReport():
                return self.report()
            case Stats():
                s = self.stats()
                admitted = sum(1 for w in self.state.workloads.values() if w.admitted)
                return GroupStats(self.name, s.mailbox, s.handled, len(self.state.workloads) - admitted,
                                  admitted, self.request()[0], self.runtime())
        raise TypeError(f"{self.name}: unexpected message {type(msg).__name__}")


def _on_cycle(groups: Mapping[str, ElasticGroup], name: str) -> bool:
    seen, parent = {name}, groups[name].parent
    while parent in groups:
        if parent in seen:
            return parent == name
        seen.add(parent)
        parent = groups[parent].parent
    return False


class ElasticCoordinator:
    """Starts one actor per group and the root, runs rounds, commits through the port."""

    def __init__(self, setup: ElasticSetup, port: ApiPort, *, flow: Flow | None = None,
                 max_rounds: int | None = None) -> None:
        self.setup = setup
        self.port = port
        self.flow = flow or Flow()
        self.max_rounds = max_rounds if max_rounds is not None else max_rounds_for(setup)
        self.root = ElasticRootActor(self.flow, keys=calculator_keys(None, setup.groups.values()),
                                     node_total=setup.node_total)
        self.groups: dict[str, ElasticGroupActor] = {}
        self.rounds = 0

    def build(self) -> dict[str, tuple[ElasticWorkload, ...]]:
        """Create and wire every group actor (no task yet); returns each group's workloads to hold."""
        groups = self.setup.groups
        sink = self.root if self.setup.node_total is not None else None
        states = self.setup.states()
        held = {name: tuple(state.workloads.values()) for name, state in states.items()}
        for name, state in sorted(states.items()):
            state.workloads = {}
            self.groups[name] = ElasticGroupActor(state, self.flow, usage_sink=sink if name in OUTSIDE_TREE else None)
        for name, actor in self.groups.items():
            parent = groups[name].parent or k.ROOT_QUOTA
            if name in OUTSIDE_TREE or _on_cycle(groups, name):
                continue  # outside the tree; a cycle is refused by validation, its groups stay detached
            if parent == k.ROOT_QUOTA:
                self.root.adopt(actor)
            elif parent in self.groups and parent not in OUTSIDE_TREE:
                self.groups[parent].adopt(actor)
        return held

    async def start(self, tg: TaskGroup) -> None:
        """Wire the tree, start every actor, hand each group its workloads, let the tree settle."""
        held = self.build()
        await tg.start(self.root.run)
        for actor in self.groups.values():
            await tg.start(actor.run)
        for name, actor in self.groups.items():
            await actor.ask(Hold(held[name]))
        await self.flow.settled()

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
        refused = [v for v in d.victims if not await self._evict(actor, v, f"preempted by {d.workload}")]
        for v in refused:
            await actor.ask(Restore(v))
        if refused:
            await actor.ask(Revert(d.workload, "an eviction it needed was refused by the API server; retrying"))
            return
        usage = {("", r): v for r, v in d.usage.items()}  # no flavors in an elastic quota
        if not await self.port.admit(d.workload, cluster_queue=actor.name, flavors={}, usage=usage):
            await actor.ask(Revert(d.workload, "the API server refused the admission; retrying"))
            return
        log.info("elastic_workload_admitted", workload=d.workload, quota=actor.name)

    async def _evict(self, actor: ElasticGroupActor, key: str, why: str) -> bool:
        ok = await self.port.evict(key, cluster_queue=actor.name, reason="Preempted",
                                   message=f"{why} in quota {actor.name}")
        if ok:
            log.info("elastic_workload_evicted", workload=key, quota=actor.name, reason=why)
        return ok

    async def _recycle_pass(self) -> bool:
        changed = False
        for actor in self.groups.values():  # by name, as the pure pass
            victims: tuple[str, ...] = await actor.ask(Recycle())
            for v in victims:
                if not await self._evict(actor, v, "revoked: used above runtime"):
                    await actor.ask(Restore(v))
            changed = changed or bool(victims)
            await self.flow.settled()
        return changed

    async def run_to_quiescence(self) -> int:
        start = self.rounds
        while self.rounds - start < self.max_rounds and await self.round():
            pass
        log.info("elastic_settled", rounds=self.rounds - start)
        return self.rounds - start

    async def outcome(self) -> ElasticOutcome:
        results: dict[str, Any] = {}
        statuses: dict[str, GroupStatus] = {}
        for actor in self.groups.values():
            reply: GroupReply = await actor.ask(GroupReport())
            results.update(reply.results)
            statuses[reply.name] = GroupStatus(request=reply.request, runtime=reply.runtime,
                                               min=reply.min, max=reply.max)
        return outcome_of(self.setup, results, statuses)

    def stop(self) -> None:
        for actor in [*self.groups.values(), self.root]:
            actor.stop()


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
