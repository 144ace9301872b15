"""Model checking the actor engine: a Hypothesis state machine over everything that can happen to it.

One :class:`~actors.harness.LiveEngine` (the real :class:`~actors.coordinator.Coordinator` and its
ClusterQueue and Cohort actors, held open in a blocking portal) per sequence, and a World it shares
with the machine.  The rules are what the API server can send the engine and what the engine's
own edge can do to it:

* create, update and delete Cohorts and ClusterQueues; reparent them (a ClusterQueue's
  ``cohortName``, a Cohort's ``parentName``), cycles and self-parents included: the World accepts
  them as Kueue's webhooks do, and the forest (KEP-79) makes every ClusterQueue on or under a
  cycle inactive, so nothing may be admitted there;
* change a quota, shrinking it below what is admitted too (the admitted workloads stay, so the
  tree is over its limits until they finish);
* submit workloads (random priorities, requests, LocalQueues, some of which route to a
  ClusterQueue that does not exist), finish them, delete them;
* make the API port refuse the next admissions, or "conflict" the next evictions (a 409: the
  commit fails and the engine must give the reservation back, or keep the victim);
* run a bounded number of rounds (1 to 4), never necessarily to quiescence, so changes land
  while heads are in flight.

What is reordered, as far as the engine's contract allows (each actor still handles its own
messages one at a time, in the order they were sent):

* arrivals take either door: ``Coordinator.apply`` (an ``Enqueue`` ask, as a watch event) or
  ``Coordinator.arrive`` (a deferred ``Enqueue`` that rides on whatever message the queue gets
  next: a round's ``Nominate``, a ``Finish``, a topology change's drain);
* finishes are posted, not awaited (``Coordinator.finish``): several are in flight at once and
  their releases climb the tree concurrently, and other changes (arrivals, deletions,
  topology) land before the next round collects them;
* any number of changes, from any rule, between two batches of rounds: a round's deferred
  requeues are still riding when the next change arrives;
* a "slow" port (``instant`` False) completes each commit after a random number of event-loop
  checkpoints, so a round's concurrent admissions and evictions complete in a shuffled order
  (and the refusals fall on whichever commit completes first);
* a slow port may also be ``pipelined`` (``actors.pipeline``, as the API server's is): a round's
  admissions are written while the next rounds run, settled (or reverted) at a later round's
  start or before its evictions, and every ``run_to_quiescence`` ends with none in flight.

Invariants, checked after every step on the actors' own state (every actor drained first, the
Cohorts deepest first, so nothing sent is unhandled; the coordinator is not asked to assemble,
which would settle finishes early and hide orderings):

1. balances: each ClusterQueue's usage is the sum of its admitted workloads' usage (from the
   World), and each Cohort's is the sum of its children's ``parent_share``, recomputed from
   scratch on ``forest_of(world)``; every live actor is a node of that forest and back;
2. limits: ``quota.node.violations`` is empty, except at a node that was already over its limit
   right after a topology or quota change (a shrink below usage, a reparent, a re-created
   queue adopting its admissions); such a node's usage may only go down until it is within its
   limit again (no admission is made into an over-limit node), and no admission is ever made
   in an inactive ClusterQueue;
3. one state per workload: admitted in exactly one ClusterQueue actor (the one it names, the
   same object the World holds), or pending in exactly one queue (the one its LocalQueue routes
   to), or unroutable with a reason; every workload an actor holds is in the World;
4. no leaks: a workload is admitted exactly when the port's last successful commit for it was an
   admission (a refused commit leaves no reservation behind, an evicted one is pending again).

Figures (sequences, steps, invariant checks, seconds) are written to
``build/reliability/model_check.json`` and quoted in ``docs/reliability.md``.
``KUEUED_SOAK=1`` (``make soak``) runs 20,000 sequences instead of 500; ``KUEUED_SOAK=<n>``
runs ``n``.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import structlog
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from actors.drains import drain_reason, held_back
from actors.harness import LiveEngine
from kueued.engine.wiring import forest_of
from kueued.kube.port import InMemoryPort
from kueued.quota import node as qn
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import Change, World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
from tests.reliability.conftest import record

_SOAK = os.environ.get("KUEUED_SOAK", "")
EXAMPLES = (int(_SOAK) if _SOAK.isdigit() and int(_SOAK) > 1 else 20_000) if _SOAK else 500
STEPS = 50
SETTLE_LIMIT = 200  # rounds; a settled run of these trees takes a few dozen at most

COHORTS = ("co0", "co1", "co2", "co3")
QUEUES = ("cq0", "cq1", "cq2", "cq3", "cq4")
LOCAL_QUEUES = {f"lq{i}": name for i, name in enumerate(QUEUES)}  # fixed: a deleted queue leaves its lq dangling
FAIR_SHARING = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}

FR = tuple[str, str]

cpu = st.sampled_from([4, 2, 8, 6, 0, 1, 3])  # Hypothesis leans to the first: mostly room for something
spot = st.sampled_from([0, 2, 4])
size = st.sampled_from([2, 3, 4, 1, 6])  # cpus a workload asks: a queue holds a handful, then preempts
maybe_cpu = st.one_of(st.none(), cpu)
within_cq = st.sampled_from(["LowerPriority", "Never", "LowerOrNewerEqualPriority"])
reclaim = st.sampled_from(["Any", "LowerPriority", "Never"])
priority = st.sampled_from([0, 10, 5, 0])


# --- the API port, with refusals and shuffled completions --------------------------------------
class FaultyPort(InMemoryPort):
    """An :class:`InMemoryPort` told to refuse its next admissions or evictions (a 409), and, given
    an ``rng``, to finish each commit after a random number of event-loop checkpoints, so the
    round's concurrent commits complete out of order.  ``history`` is every commit tried, in the
    order they completed: (kind, workload, ClusterQueue, committed)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse_admits = 0
        self.conflict_evicts = 0
        self.rng: random.Random | None = None
        self.pipelined = False
        self.history: list[tuple[str, str, str, bool]] = []

    @property
    def instant(self) -> bool:  # type: ignore[override]
        return self.rng is None

    async def _delay(self) -> None:
        if self.rng is not None:
            for _ in range(self.rng.randrange(4)):
                await anyio.lowlevel.checkpoint()

    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[FR, int]) -> bool:
        await self._delay()
        if self.refuse_admits:
            self.refuse_admits -= 1
            ok = False
        else:
            ok = await super().admit(workload, cluster_queue=cluster_queue, flavors=flavors, usage=usage)
        self.history.append(("admit", workload, cluster_queue, ok))
        return ok

    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str,
                    preempted: bool = True) -> bool:
        await self._delay()
        if self.conflict_evicts:
            self.conflict_evicts -= 1
            ok = False
        else:
            ok = await super().evict(workload, cluster_queue=cluster_queue, reason=reason, message=message)
        self.history.append(("evict", workload, cluster_queue, ok))
        return ok


# --- what the actors hold, read in one trip through the event loop ------------------------------
@dataclass
class Observed:
    forest: Snapshot                       # forest_of(world), usage set to the actors' balances
    cq_usage: dict[str, dict[FR, int]]
    cohort_usage: dict[str, dict[FR, int]]
    admitted: dict[str, dict[str, WorkloadInfo]]   # ClusterQueue actor -> its admitted set
    pending: dict[str, list[WorkloadInfo]]         # ClusterQueue actor -> its heap and parked set
    unrouted: dict[str, str]
    workloads: dict[str, WorkloadInfo]
    placed: dict[str, tuple[str | None, dict[FR, int]]]  # key -> (ClusterQueue it is admitted in, usage)
    routes: dict[str, str | None]


async def _observe(engine: LiveEngine) -> Observed:
    coord = engine.coordinator
    for actor in list(coord.cluster_queues.values()):
        await actor.drain()
    await coord.drain_cohorts()  # deepest first: every release told upwards has landed
    world = engine.world
    forest = forest_of(world)
    cq_usage = {n: dict(a.node.usage) for n, a in coord.cluster_queues.items()}
    cohort_usage = {n: dict(a.node.usage) for n, a in coord.cohorts.items()}
    for name, usage in cq_usage.items():
        if name in forest.cluster_queues:
            forest.cluster_queues[name].node.usage = dict(usage)
    for name, usage in cohort_usage.items():
        if name in forest.cohorts:
            forest.cohorts[name].node.usage = dict(usage)
    return Observed(
        forest=forest, cq_usage=cq_usage, cohort_usage=cohort_usage,
        admitted={n: dict(a.admitted) for n, a in coord.cluster_queues.items()},
        pending={n: list(a.queue.pending()) for n, a in coord.cluster_queues.items()},
        unrouted=dict(coord.unrouted), workloads=dict(world.workloads),
        placed={k: (p.cluster_queue, dict(p.usage)) if (p := world.placed.get(k)) is not None else (None, {})
                for k in world.workloads},
        routes={k: world.route(wl)[0] for k, wl in world.workloads.items()})


def _nonzero(amounts: dict[FR, int]) -> dict[FR, int]:
    return {fr: v for fr, v in amounts.items() if v}


def _expected_balances(obs: Observed) -> tuple[dict[str, dict[FR, int]], dict[str, dict[FR, int]]]:
    """Every node's usage from scratch: admitted workloads per ClusterQueue, parent shares up."""
    cq: dict[str, dict[FR, int]] = {name: {} for name in obs.forest.cluster_queues}
    for cq_name, usage in obs.placed.values():
        if cq_name in cq:
            for fr, v in usage.items():
                cq[cq_name][fr] = cq[cq_name].get(fr, 0) + v
    cohorts: dict[str, dict[FR, int]] = {}

    def usage_of(node: qn.QuotaNode) -> dict[FR, int]:
        if not node.is_cohort:
            return cq[node.name]
        if node.name not in cohorts:
            total: dict[FR, int] = {}
            for child in node.children:
                for fr, v in usage_of(child).items():
                    total[fr] = total.get(fr, 0) + qn.parent_share(child, fr, v)
            cohorts[node.name] = total
        return cohorts[node.name]

    for co in obs.forest.cohorts.values():
        usage_of(co.node)
    return cq, cohorts


# --- figures, summed over every sequence of the run ---------------------------------------------
TALLY: Counter[str] = Counter()


class EngineMachine(RuleBasedStateMachine):
    """The actor engine, driven by every change the API server and the port can make."""

    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.port = FaultyPort()
        self.engine: LiveEngine | None = None
        self.now = 0.0
        self.cohorts: dict[str, dict] = {}        # accepted manifests, by name
        self.queues: dict[str, dict] = {}
        self.live: set[str] = set()               # workloads submitted and neither finished nor deleted
        self.manifests: dict[str, dict] = {}
        self.serial = 0
        self.tolerated: dict[tuple[str, FR], int] = {}  # over-limit nodes after a topology change -> usage
        self.retopologized = True                 # the next check takes the new over-limit set as given
        self.queues_seen: frozenset[str] = frozenset()  # the ClusterQueues at the last check
        TALLY["sequences"] += 1

    # --- set-up and tear-down ---------------------------------------------------------------
    @initialize(data=st.data(), fair=st.booleans(), clocked=st.booleans())
    def start(self, data: st.DataObject, fair: bool, clocked: bool) -> None:
        """A random forest (the same shapes the rules make), then the engine on it; with a clock
        the coordinator folds dead rounds (``kueued.scheduling.verdicts``), without one it does not."""
        docs: list[dict] = [namespace("ns"), flavor("default"), flavor("spot")]
        if fair:
            docs.append(FAIR_SHARING)
        docs += [local_queue(lq, "ns", cq) for lq, cq in LOCAL_QUEUES.items()]
        for name in data.draw(st.lists(st.sampled_from(COHORTS), unique=True, max_size=3)):
            docs.append(data.draw(_cohort_manifest(name)))
        for name in data.draw(st.lists(st.sampled_from(QUEUES), unique=True, min_size=1, max_size=4)):
            docs.append(data.draw(_queue_manifest(name)))
        for doc in docs:
            self._remember(doc, self.world.apply(doc)[0])
        for _ in range(data.draw(st.integers(0, 12))):  # waiting when the engine starts, as after a restart
            doc = self._workload(data)
            assert self.world.apply(doc)[0] is Change.WORKLOAD
        event(f"fair sharing: {fair}; folding dead rounds: {clocked}")
        self.engine = LiveEngine(self.world, port=self.port, clock=(lambda: self.now) if clocked else None)
        self.engine.__enter__()

    def teardown(self) -> None:
        if self.engine is not None:
            self.engine.__exit__(None, None, None)
        for kind in ("admit", "evict"):
            done = sum(1 for k, *_, ok in self.port.history if k == kind and ok)
            event(f"{kind} commits in the sequence: {'0' if not done else '1-4' if done < 5 else '5+'}")

    def _remember(self, doc: dict, change: Change) -> None:
        if change is Change.REJECTED:
            TALLY["objects refused by the World"] += 1
            return
        name = doc.get("metadata", {}).get("name", "")
        if doc["kind"] == "Cohort":
            self.cohorts[name] = doc
        elif doc["kind"] == "ClusterQueue":
            self.queues[name] = doc

    def _put(self, doc: dict) -> None:
        assert self.engine is not None
        self.engine.apply(doc)
        accepted = self.world.raw.get(f"{doc['kind']}/{doc['metadata']['name']}") is doc
        self._remember(doc, Change.TOPOLOGY if accepted else Change.REJECTED)
        self.retopologized = True

    # --- topology -------------------------------------------------------------------------------
    @rule(data=st.data())
    def put_cohort(self, data: st.DataObject) -> None:
        """Create or replace a Cohort: new quota, new parent (itself, or a cycle, included)."""
        self._put(data.draw(_cohort_manifest(data.draw(st.sampled_from(COHORTS)))))

    @rule(data=st.data())
    def put_queue(self, data: st.DataObject) -> None:
        """Create or replace a ClusterQueue: quota, cohort, strategy, preemption policy."""
        self._put(data.draw(_queue_manifest(data.draw(st.sampled_from(QUEUES)))))

    @rule(data=st.data(), parent=st.sampled_from(("", *COHORTS)))
    def reparent_cohort(self, data: st.DataObject, parent: str) -> None:
        if not self.cohorts:
            return  # nothing to act on: this step changes nothing
        name = data.draw(st.sampled_from(sorted(self.cohorts)))
        doc = _copy(self.cohorts[name])
        if parent:
            doc["spec"]["parentName"] = parent
        else:  # a root: borrowing and lending limits need a parent
            doc["spec"].pop("parentName", None)
            _strip_limits(doc)
        if _on_cycle(name, parent, self.cohorts):
            TALLY["cycles made"] += 1
        self._put(doc)

    @rule(data=st.data(), parent=st.sampled_from(("", *COHORTS)))
    def reparent_queue(self, data: st.DataObject, parent: str) -> None:
        if not self.queues:
            return  # nothing to act on: this step changes nothing
        name = data.draw(st.sampled_from(sorted(self.queues)))
        doc = _copy(self.queues[name])
        if parent:
            doc["spec"]["cohortName"] = parent
        else:
            doc["spec"].pop("cohortName", None)
            _strip_limits(doc)
        self._put(doc)

    @rule(data=st.data())
    def change_quota(self, data: st.DataObject) -> None:
        """A new nominal quota for one node, usually smaller (often below what it holds)."""
        if not (self.cohorts or self.queues):
            return  # nothing to act on: this step changes nothing
        name = data.draw(st.sampled_from(sorted([*self.cohorts, *self.queues])))
        doc = _copy(self.cohorts.get(name) or self.queues[name])
        groups = doc["spec"].get("resourceGroups")
        if not groups:
            return
        res = groups[0]["flavors"][0]["resources"][0]
        old = int(res["nominalQuota"])
        new = data.draw(st.one_of(st.integers(0, old), cpu))
        res["nominalQuota"] = str(new)
        if "lendingLimit" in res and doc["kind"] == "ClusterQueue" and int(res["lendingLimit"]) > new:
            res["lendingLimit"] = str(new)
        TALLY["quotas shrunk" if new < old else "quotas grown or kept"] += 1
        self._put(doc)

    @rule(data=st.data())
    def delete_cohort(self, data: st.DataObject) -> None:
        """Its ClusterQueues and child Cohorts keep naming it: it becomes implicit (no quota)."""
        assert self.engine is not None
        if not self.cohorts:
            return  # nothing to act on: this step changes nothing
        name = data.draw(st.sampled_from(sorted(self.cohorts)))
        self.engine.delete(self.cohorts.pop(name))
        self.retopologized = True

    @rule(data=st.data())
    def delete_queue(self, data: st.DataObject) -> None:
        """A queue with nothing admitted goes, and its pending workloads become unroutable; one in
        which workloads are admitted terminates (inactive, its quota and theirs still in the tree)
        until they leave (kueued.world), or until it is created again."""
        assert self.engine is not None
        if not self.queues:
            return  # nothing to act on: this step changes nothing
        name = data.draw(st.sampled_from(sorted(self.queues)))
        self.engine.delete(self.queues.pop(name))
        self.retopologized = True

    # --- workloads -------------------------------------------------------------------------------
    @rule(data=st.data(), n=st.integers(1, 4))
    def submit(self, data: st.DataObject, n: int) -> None:
        self._submit(data, n)

    @rule(data=st.data(), rounds=st.integers(0, 2))
    def submit_one(self, data: st.DataObject, rounds: int) -> None:
        """One arrival, then up to two rounds: time passes even in a sequence whose rule set
        (Hypothesis tries subsets of the rules) leaves the round rules out."""
        self._submit(data, 1)
        if rounds:
            self._rounds(rounds)

    @rule(data=st.data(), n=st.integers(1, 3))
    def submit_urgent(self, data: st.DataObject, n: int) -> None:
        """A burst above every other priority: preemption, where the queue's policy allows it."""
        self._submit(data, n, urgent=True)

    def _submit(self, data: st.DataObject, n: int, *, urgent: bool = False) -> None:
        assert self.engine is not None
        for _ in range(n):
            doc = self._workload(data, urgent=urgent)
            if data.draw(st.booleans()):
                self.engine.apply(doc)  # a watch event: an Enqueue ask
            else:
                self.engine._call(_arrive, self.engine, doc)  # a timeline's arrival: a deferred Enqueue

    def _workload(self, data: st.DataObject, *, urgent: bool = False) -> dict:
        """A new Workload, mostly for a LocalQueue whose ClusterQueue exists, now and then for any
        (some route nowhere)."""
        self.serial += 1
        routed = [lq for lq, cq in LOCAL_QUEUES.items() if cq in self.queues]
        lq = data.draw(st.sampled_from(routed) if routed and data.draw(st.integers(0, 4))
                       else st.sampled_from(sorted(LOCAL_QUEUES)))
        doc = workload(f"w{self.serial}", "ns", lq, created=self.serial, priority=20 if urgent else data.draw(priority),
                       cpu=str(data.draw(size)))
        self.live.add(f"ns/w{self.serial}")
        self.manifests[f"ns/w{self.serial}"] = doc
        return doc

    @rule(data=st.data(), rounds=st.integers(0, 1))
    def finish(self, data: st.DataObject, rounds: int) -> None:
        """Posted, not awaited: the next round collects it (several may be in flight); a round
        may follow at once."""
        assert self.engine is not None
        if not self.live:
            return  # nothing to act on: this step changes nothing
        key = data.draw(st.sampled_from(sorted(self.live)))
        TALLY["admitted workloads finished" if key in self.world.placed else "pending workloads finished"] += 1
        self.engine.finish(key)
        self.live.discard(key)
        if rounds:
            self._rounds(rounds)

    @rule(data=st.data())
    def delete_workload(self, data: st.DataObject) -> None:
        assert self.engine is not None
        if not self.live:
            return  # nothing to act on: this step changes nothing
        key = data.draw(st.sampled_from(sorted(self.live)))
        self.engine.delete(self.manifests[key])
        self.live.discard(key)

    # --- the port ---------------------------------------------------------------------------------
    @rule(n=st.integers(1, 3))
    def refuse_admissions(self, n: int) -> None:
        self.port.refuse_admits = n

    @rule(n=st.integers(1, 2))
    def conflict_evictions(self, n: int) -> None:
        self.port.conflict_evicts = n

    @rule(seed=st.one_of(st.none(), st.integers(0, 2**16)), pipelined=st.booleans())
    def port_speed(self, seed: int | None, pipelined: bool) -> None:
        """``None``: commits complete at once, in order; a seed: concurrently, in a shuffled order,
        and (``pipelined``) while the next rounds run."""
        self.port.rng = None if seed is None else random.Random(seed)
        self.port.pipelined = seed is not None and pipelined
        TALLY["pipelined ports"] += self.port.pipelined

    # --- rounds -----------------------------------------------------------------------------------
    @rule(rounds=st.integers(1, 4))
    def run_rounds(self, rounds: int) -> None:
        self._rounds(rounds)

    @rule()
    def run_a_round(self) -> None:
        """The same as ``run_rounds(1)``, as a rule of its own so that rounds are drawn more often."""
        self._rounds(1)

    @rule()
    def settle(self) -> None:
        """Rounds until one changes nothing: a run ends (no flopping, KEP-1337), whatever came before."""
        assert self.engine is not None
        self._rounds(SETTLE_LIMIT)
        assert self.engine.coordinator.quiescent, f"no quiescence in {SETTLE_LIMIT} rounds: the engine flops"
        TALLY["settled to quiescence"] += 1
        for key, placed in self.world.placed.items():  # every drain due has been made
            spec = self.world.workloads[key]
            assert drain_reason(self.world, spec, placed) is None or placed.cluster_queue not in self.queues, (
                key, "still admitted though it must be drained")

    # --- stop policies and deactivation (actors.drains) ---------------------------------------------
    @rule(data=st.data(), policy=st.sampled_from(["None", "Hold", "HoldAndDrain"]))
    def stop_local_queue(self, data: st.DataObject, policy: str) -> None:
        """Hold keeps what is admitted and queues nothing new; HoldAndDrain evicts what is admitted."""
        assert self.engine is not None
        name = data.draw(st.sampled_from(sorted(LOCAL_QUEUES)))
        doc = local_queue(name, "ns", LOCAL_QUEUES[name])
        doc["spec"]["stopPolicy"] = policy
        TALLY[f"LocalQueues set to {policy}"] += 1
        self.engine.apply(doc)

    @rule(data=st.data(), active=st.booleans())
    def set_active(self, data: st.DataObject, active: bool) -> None:
        """Deactivated, a workload is evicted if admitted and waits outside the queues; active again, it queues."""
        assert self.engine is not None
        if not self.live:
            return  # nothing to act on: this step changes nothing
        key = data.draw(st.sampled_from(sorted(self.live)))
        doc = copy.deepcopy(self.manifests[key])
        doc["spec"]["active"] = active
        self.manifests[key] = doc
        TALLY["workloads deactivated" if not active else "workloads activated"] += 1
        self.engine.apply(doc)

    def _rounds(self, rounds: int) -> None:
        assert self.engine is not None
        inactive = {n for n, cq in forest_of(self.world).cluster_queues.items() if not cq.active}
        seen = len(self.port.history)
        self.now += 1.0
        ran = self.engine._call(self.engine.coordinator.run_to_quiescence, max_rounds=rounds)
        TALLY["rounds"] += ran
        fresh = self.port.history[seen:]
        TALLY["admissions committed"] += sum(1 for k, *_, ok in fresh if k == "admit" and ok)
        TALLY["evictions committed"] += sum(1 for k, *_, ok in fresh if k == "evict" and ok)
        TALLY["commits refused"] += sum(1 for *_, ok in fresh if not ok)
        wrong = [(key, cq) for kind, key, cq, ok in fresh if kind == "admit" and ok and cq in inactive]
        assert not wrong, f"admitted into an inactive ClusterQueue: {wrong}"

    # --- invariants -----------------------------------------------------------------------------
    @invariant()
    def engine_agrees_with_a_recomputation(self) -> None:
        if self.engine is None:
            return
        TALLY["states checked"] += 1
        obs: Observed = self.engine._call(_observe, self.engine)
        self._balances(obs)
        self._limits(obs)
        self._one_state_each(obs)
        self._no_leaks(obs)
        self._victims_were_evicted(obs)
        TALLY["invariant checks"] += 5

    def _balances(self, obs: Observed) -> None:
        assert set(obs.cq_usage) == set(obs.forest.cluster_queues), "ClusterQueue actors differ from the forest"
        assert set(obs.cohort_usage) == set(obs.forest.cohorts), "Cohort actors differ from the forest"
        cq, cohorts = _expected_balances(obs)
        for name, usage in obs.cq_usage.items():
            assert _nonzero(usage) == _nonzero(cq[name]), (name, usage, cq[name])
        for name, usage in obs.cohort_usage.items():
            assert _nonzero(usage) == _nonzero(cohorts[name]), (name, usage, cohorts[name])

    def _limits(self, obs: Observed) -> None:
        queues = frozenset(obs.forest.cluster_queues)
        if queues != self.queues_seen:  # also the engine's own: a terminating queue's last workload left
            self.queues_seen, self.retopologized = queues, True
        over = {(node.name, fr): used for node, fr, used, _ in qn.violations(obs.forest.nodes())}
        if self.retopologized:
            self.tolerated, self.retopologized = over, False
            if over:
                TALLY["topology changes leaving nodes over their limits"] += 1
            return
        for where, used in over.items():
            was = self.tolerated.get(where)
            assert was is not None, f"{where} exceeds what the tree allows: {used} (no topology change put it there)"
            assert used <= was, f"{where} was over its limit at {was} and was given more: {used}"
        self.tolerated = over

    def _one_state_each(self, obs: Observed) -> None:
        admitted_in: dict[str, list[str]] = {}
        pending_in: dict[str, list[str]] = {}
        for name, held in obs.admitted.items():
            for key, wl in held.items():
                admitted_in.setdefault(key, []).append(name)
                assert obs.workloads.get(key) is wl.spec, f"{name} holds {key}, which the World does not"
                assert obs.placed[key] == (name, wl.usage), (key, "the index says", obs.placed[key])
        for name, queued in obs.pending.items():
            for wl in queued:
                pending_in.setdefault(wl.key, []).append(name)
                assert obs.workloads.get(wl.key) is wl.spec, f"{name} queues {wl.key}, which the World does not"
        assert set(obs.workloads) == self.live, "the World's workloads are not those submitted and not gone"
        for key in obs.workloads:
            cq_name, _ = obs.placed[key]
            where = (admitted_in.get(key, []), pending_in.get(key, []), key in obs.unrouted)
            if cq_name is not None and cq_name in obs.admitted:
                assert where == ([cq_name], [], False), (key, "admitted in", cq_name, where)
            elif cq_name is not None:  # its ClusterQueue was deleted: it keeps its admission, held nowhere
                assert where == ([], [], False), (key, "admitted in the deleted", cq_name, where)
                TALLY["admitted workloads whose ClusterQueue was deleted (checks)"] += 1
            elif pending_in.get(key):
                assert where == ([], [obs.routes[key]], False), (key, "pending", obs.routes[key], where)
            else:
                assert where[:2] == ([], []) and obs.unrouted.get(key), (key, "in no state", where)
                assert obs.routes[key] not in obs.admitted or held_back(self.world, obs.workloads[key]), (
                    key, "unroutable, but its queue exists")

    def _no_leaks(self, obs: Observed) -> None:
        last: dict[str, str] = {}
        for kind, key, _, ok in self.port.history:
            if ok:
                last[key] = kind
        for key, (cq_name, _) in obs.placed.items():
            committed = last.get(key) == "admit"
            assert committed == (cq_name is not None), (
                f"{key}: {'admitted' if cq_name else 'not admitted'} in the engine, but the API server's last "
                f"commit for it is {last.get(key)!r}")


    def _victims_were_evicted(self, obs: Observed) -> None:
        """A preemptor never evicts the same workload twice; only an eviction the API server took
        counts, or one it refused would leave the preemptor waiting behind its intended victim."""
        evicted = {key for kind, key, _, ok in self.port.history if kind == "evict" and ok}
        held = [*(wl for a in obs.admitted.values() for wl in a.values()),
                *(wl for q in obs.pending.values() for wl in q)]
        for wl in held:
            assert wl.victims <= evicted, f"{wl.key} counts as evicted {sorted(wl.victims - evicted)}, never evicted"


# --- the rules' shapes -------------------------------------------------------------------------
@st.composite
def _cohort_manifest(draw: Any, name: str) -> dict:
    parent = draw(st.sampled_from(("", "", *COHORTS)))  # itself, or a cycle, now and then
    if not draw(st.integers(0, 4)):
        return cohort(name, parent=parent)  # no quota of its own
    limits = (str(draw(cpu)), _s(draw(maybe_cpu)) if parent else None, _s(draw(maybe_cpu)) if parent else None)
    return cohort(name, quotas("default", cpu=limits), parent=parent)


@st.composite
def _queue_manifest(draw: Any, name: str) -> dict:
    parent = draw(st.sampled_from(("", *COHORTS, *COHORTS)))
    nominal = draw(cpu)
    lending = draw(maybe_cpu) if parent else None
    if lending is not None and lending > nominal:
        lending = nominal
    borrowing = draw(maybe_cpu) if parent else None
    policy = draw(reclaim)
    preemption: dict[str, Any] = {"withinClusterQueue": draw(within_cq), "reclaimWithinCohort": policy}
    if policy != "Never" and draw(st.booleans()):
        preemption["borrowWithinCohort"] = {"policy": "LowerPriority"}
    stop = draw(st.sampled_from(["None"] * 8 + ["Hold", "HoldAndDrain"]))
    return cluster_queue(name, quotas("default", cpu=(str(nominal), _s(borrowing), _s(lending))),
                         quotas("spot", cpu=str(draw(spot))), cohort=parent,
                         strategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])), preemption=preemption,
                         stopPolicy=stop)


def _s(v: int | None) -> str | None:
    return None if v is None else str(v)


def _copy(doc: dict) -> dict:
    return copy.deepcopy(doc)


def _strip_limits(doc: dict) -> None:
    for group in doc["spec"].get("resourceGroups", []):
        for fl in group["flavors"]:
            for res in fl["resources"]:
                res.pop("borrowingLimit", None)
                res.pop("lendingLimit", None)


def _on_cycle(name: str, parent: str, cohorts: dict[str, dict]) -> bool:
    seen = {name}
    while parent:
        if parent in seen:
            return True
        seen.add(parent)
        parent = cohorts.get(parent, {}).get("spec", {}).get("parentName", "")
    return False


async def _arrive(engine: LiveEngine, doc: dict) -> None:
    """A timeline's arrival: into the World, then ``Coordinator.arrive`` (a deferred Enqueue)."""
    change, key = engine.world.apply(doc)
    assert change is Change.WORKLOAD, engine.world.rejected.get(key)
    await engine.coordinator.arrive(key.split("/", 1)[1])


SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.fixture(scope="module", autouse=True)
def figures() -> Iterator[None]:
    """Quiet logs while the machine runs (every admission is a log line), then the figures."""
    config = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    TALLY.clear()
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        structlog.configure(**config)
    if TALLY["sequences"]:
        cpu = time.process_time() - cpu_start
        figures = {**TALLY, "rule steps": TALLY["states checked"] - TALLY["sequences"],
                   "seconds": round(time.perf_counter() - start, 1), "cpu seconds": round(cpu, 1),
                   "max_examples": EXAMPLES, "max_steps": STEPS}
        record("model_check_soak" if _SOAK else "model_check", figures)
        print("\nmodel check:", ", ".join(f"{k}={v}" for k, v in sorted(figures.items())))


TestEngineMachine = pytest.mark.timeout(0 if _SOAK else 280)(EngineMachine.TestCase)
TestEngineMachine.settings = SETTINGS


def test_a_finish_in_flight_survives_the_deletion_of_its_cluster_queue() -> None:
    """Found by the machine: a finish posted to a ClusterQueue, the queue deleted before the next
    round collects it; the round failed with a KeyError (``cluster_queues[name]``)."""
    world = World()
    for doc in [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
                local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", created=1, cpu="1")]:
        world.apply(doc)
    with LiveEngine(world) as engine:
        engine.run()
        engine.finish("ns/a")
        engine.delete(cluster_queue("cq", quotas("default", cpu="2")))
        engine.run()
