"""Time in ``simulate``: arrivals, run times and a clock, driving the actor engine.

A workload may carry ``kueued.io/arrival`` (seconds after the start, or an RFC 3339
instant) and ``kueued.io/runtime`` (seconds it runs once admitted; absent: forever).
:func:`~kueued.trace.trace_from` splits manifests into the setup (everything applied before
time 0) and the arrivals (:mod:`kueued.trace`).  A :class:`Timeline` holds the events in a heap, finishes before
arrivals at one instant (a release should be seen by the workloads arriving with it),
and records what the engine decided.

:func:`play` is the loop, the same for both clocks::

    next event time t -> (virtual: jump to t | real: anyio.sleep until t)
      -> due finishes  -> driver.finish(key)   quota released, parked workloads of the tree requeued
      -> due arrivals  -> driver.arrive(doc)   World.apply, then queued in its ClusterQueue
      -> driver.settle(until)                   cycles to quiescence; admissions and evictions
                                                come back through Timeline.admitted/evicted,
                                                which schedules each admitted workload's finish

On the real clock ``until`` says "an event is due": settling stops after a cycle when
one is (every settle runs at least one), so a finish or an arrival is handled while the
queues still cycle, as Kueue's scheduler loop runs beside its controllers' event handlers.  Without it a
settle holds every due release back until each ClusterQueue has parked its whole
pending list, one head per cycle (BestEffortFIFO), and judges it all again after.  On
the virtual clock no time passes while settling, so ``until`` is never given.

Decisions are recorded where they leave the engine: the coordinator commits through
the API port (:class:`TimelinePort`).  An eviction cancels the victim's finish (a generation number per
workload makes the stale heap entry a no-op); when re-admitted it runs its full run time
again.  Time to admission is measured to the first admission, as Kueue's runner does.

ElasticQuota trees run beside Kueue's (:class:`ElasticDriver` wraps the coordinator's driver): an
arrival the World routes to an ElasticQuota goes to the elastic engine as well, and the
elastic engine runs on this clock, so forced recycling waits its delay
(``Settings.delay_evict_time``) in virtual time.  When a group is over its runtime the
engine says when recycling falls due, and the timeline schedules a *wake-up* then
(:meth:`Timeline.wake_at`, ordered after finishes and arrivals at one instant): the loop
settles at that instant even if nothing arrives or finishes.

Usage is integrated exactly: per ClusterQueue, reserved milli-cpu times microseconds,
updated at every admission, eviction and finish.  Times are integer microseconds so
``0.1 + 0.2`` lands on the same instant as an arrival at ``0.3``.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from kueued.kube.port import NoStatus
from kueued.model.quantity import parse
from kueued.trace import CLASS, US, Arrival, Trace
from kueued.world import Change, World

# Trace, Arrival and US live in kueued.trace; actors.simulation and bench/kueue_perf_api.py still import them here.
__all__ = ["Timeline", "TimelinePort", "CoordinatorDriver", "ElasticDriver", "Driver", "play", "Summary",
           "nominal_of", "Until"]

_FINISH, _ARRIVE, _WAKE = 0, 1, 2  # heap order at one instant: releases first, wake-ups last


class WorkloadTimes(msgspec.Struct, omit_defaults=True, rename="camel"):
    arrival_ms: float
    admitted_ms: float | None = None
    finished_ms: float | None = None
    cluster_queue: str | None = None
    evictions: int = 0


class WorkloadClassStats(msgspec.Struct, rename="camel"):
    workloads: int
    admitted: int
    average_time_to_admission_ms: float | None


class QueueClassStats(msgspec.Struct, rename="camel"):
    cluster_queues: int
    nominal_cpu: float
    cpu_usage_percent: float


class Summary(msgspec.Struct, rename="camel"):
    """What Kueue's checker reads (wall, usage per ClusterQueue class, time to admission per class)."""

    clock: str
    engine: str
    wall_ms: float                 # on the run's clock: the last event (finish) after the start
    host_seconds: float            # how long the run took on this machine
    admissions: int
    evictions: int
    finished: int
    pending: int
    cluster_queue_classes: dict[str, QueueClassStats]
    workload_classes: dict[str, WorkloadClassStats]
    workloads: dict[str, WorkloadTimes] = {}


class Timeline:
    """The event heap and the record of decisions; pure, clock injected."""

    def __init__(self, trace: Trace, world: World, *, resource: str = "cpu") -> None:
        self.trace = trace
        self.world = world
        self.resource = resource
        self.virtual = 0
        self.clock: Callable[[], int] = lambda: self.virtual
        self._heap: list[tuple[int, int, int, int]] = []  # (at, kind, seq, generation)
        self._wakes: set[int] = set()
        self._arrivals = trace.arrivals
        for seq, a in enumerate(trace.arrivals):
            self._heap.append((a.at, _ARRIVE, seq, 0))
        heapq.heapify(self._heap)
        self._seq = {a.key: i for i, a in enumerate(trace.arrivals)}
        self.times: dict[str, WorkloadTimes] = {}
        self.running: dict[str, tuple[int, str, int]] = {}  # key -> (generation, cq, milli-cpu)
        self._generation = 0
        self.held: dict[str, int] = {}     # cq -> milli-cpu reserved now
        self.area: dict[str, int] = {}     # cq -> milli-cpu x microseconds so far
        self._since: dict[str, int] = {}
        self.samples: list[tuple[int, dict[str, int]]] = []  # (t, cq -> milli-cpu), for plots
        self.admissions = self.evictions = self.finished = 0
        self.end = 0

    # --- the heap ----------------------------------------------------------------------------
    def next_time(self) -> int | None:
        """When the next event is due; a finish cancelled by an eviction is no event (the clock
        does not go to it, so it does not stretch the run's wall)."""
        heap = self._heap
        while heap and heap[0][1] == _FINISH and self.running.get(
                self._arrivals[heap[0][2]].key, (None,))[0] != heap[0][3]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, now: int) -> tuple[list[str], list[Arrival]]:
        """Valid finishes and arrivals due by ``now``, each in heap order."""
        finishes, arrivals = [], []
        while self._heap and self._heap[0][0] <= now:
            at, kind, seq, gen = heapq.heappop(self._heap)
            if kind == _WAKE:
                self._wakes.discard(at)
                continue
            a = self._arrivals[seq]
            if kind == _ARRIVE:
                self.times[a.key] = WorkloadTimes(arrival_ms=a.at / 1000)
                arrivals.append(a)
            elif self.running.get(a.key, (None,))[0] == gen:
                finishes.append(a.key)
        return finishes, arrivals

    def wake_at(self, at: int) -> None:
        """Settle again at ``at`` even if nothing arrives or finishes then (a forced recycling deadline)."""
        if at > self.clock() and at not in self._wakes:
            self._wakes.add(at)
            heapq.heappush(self._heap, (at, _WAKE, -1, 0))

    # --- decisions ---------------------------------------------------------------------------
    def admitted(self, key: str, cq: str, usage: dict[tuple[str, str], int]) -> None:
        now = self.clock()
        cpu = sum(v for (_, res), v in usage.items() if res == self.resource)
        self._generation += 1
        self.running[key] = (self._generation, cq, cpu)
        self._hold(cq, cpu, now)
        self.admissions += 1
        times = self.times.get(key)
        if times is not None:
            if times.admitted_ms is None:
                times.admitted_ms = now / 1000
            times.cluster_queue = cq
        seq = self._seq.get(key)
        runtime = self._arrivals[seq].runtime if seq is not None else None
        if seq is not None and runtime is not None:
            heapq.heappush(self._heap, (now + runtime, _FINISH, seq, self._generation))

    def evicted(self, key: str) -> None:
        held = self.running.pop(key, None)
        if held is None:
            return
        self._hold(held[1], -held[2], self.clock())
        self.evictions += 1
        if key in self.times:
            self.times[key].evictions += 1

    def done(self, key: str) -> None:
        """A finish the driver has carried out."""
        now = self.clock()
        _, cq, cpu = self.running.pop(key)
        self._hold(cq, -cpu, now)
        self.finished += 1
        self.times[key].finished_ms = now / 1000
        self.end = max(self.end, now)

    def _hold(self, cq: str, delta: int, now: int) -> None:
        self.area[cq] = self.area.get(cq, 0) + self.held.get(cq, 0) * (now - self._since.get(cq, 0))
        self._since[cq] = now
        self.held[cq] = self.held.get(cq, 0) + delta

    def sample(self) -> None:
        self.samples.append((self.clock(), dict(self.held)))

    # --- the outcome -------------------------------------------------------------------------
    def summary(self, *, clock: str, engine: str, host_seconds: float, per_workload: bool = True) -> Summary:
        end = max(self.end, self.clock())
        for cq in list(self.held):
            self._hold(cq, 0, end)
        return Summary(clock=clock, engine=engine, wall_ms=end / 1000, host_seconds=round(host_seconds, 3),
                       admissions=self.admissions, evictions=self.evictions, finished=self.finished,
                       pending=sum(1 for t in self.times.values() if t.admitted_ms is None),
                       cluster_queue_classes=self._queue_classes(end), workload_classes=self._workload_classes(),
                       workloads=dict(sorted(self.times.items())) if per_workload else {})

    def _queue_classes(self, end: int) -> dict[str, QueueClassStats]:
        groups: dict[str, list[str]] = {}
        for name, cq in self.world.cluster_queues.items():
            groups.setdefault(cq.metadata.labels.get(CLASS, "all"), []).append(name)
        out = {}
        for klass, names in sorted(groups.items()):
            nominal = sum(nominal_of(self.world, n, self.resource) for n in names)
            area = sum(self.area.get(n, 0) for n in names)
            pct = 100.0 * area / (nominal * end) if nominal and end else 0.0
            out[klass] = QueueClassStats(len(names), nominal / 1000, round(pct, 2))
        return out

    def _workload_classes(self) -> dict[str, WorkloadClassStats]:
        waits: dict[str, list[float]] = {}
        counts: dict[str, int] = {}
        for a in self._arrivals:
            counts[a.klass] = counts.get(a.klass, 0) + 1
            t = self.times.get(a.key)
            if t is not None and t.admitted_ms is not None:
                waits.setdefault(a.klass, []).append(t.admitted_ms - t.arrival_ms)
        return {k: WorkloadClassStats(n, len(waits.get(k, [])),
                                      round(sum(waits[k]) / len(waits[k]), 3) if waits.get(k) else None)
                for k, n in sorted(counts.items())}


def nominal_of(world: World, cq_name: str, resource: str = "cpu") -> int:
    """A ClusterQueue's nominal quota of ``resource``, summed over its flavors, in milli-units."""
    cq = world.cluster_queues.get(cq_name)
    if cq is None:
        return 0
    return sum(parse(r.nominal_quota) for g in cq.spec.resource_groups for f in g.flavors for r in f.resources
               if r.name == resource)


class TimelinePort(NoStatus):
    """The API port for a timed run: every commit succeeds and is recorded at the clock's time."""

    instant = True  # answers without waiting: a round's commits run in order, with no task each

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline

    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int], counts: dict[str, int] | None = None) -> bool:
        self.timeline.admitted(workload, cluster_queue, usage)
        return True

    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str,
                    preempted: bool = True) -> bool:
        self.timeline.evicted(workload)
        return True

    async def annotate_quota(self, quota: str, *, namespace: str, annotations: dict[str, str]) -> bool:
        return True  # status is not part of a timed run's record

    async def set_quota_condition(self, quota: str, *, namespace: str, condition: Any) -> bool:
        return True

    async def quota_used(self, quota: str, *, namespace: str, used: dict[str, str | None]) -> bool:
        return True


Until = Callable[[], bool]
"""Asked between cycles: stop settling now (an event is due on the real clock)."""


class Driver(Protocol):
    """An engine as :func:`play` drives it (the actor one lives with the composition root)."""

    timeline: Timeline

    async def arrive(self, arrival: Arrival) -> None: ...
    async def finish(self, key: str) -> None: ...
    async def settle(self, until: Until | None = None) -> None: ...


class CoordinatorDriver:
    """The actor engine's coordinator under a timeline (duck-typed: ``kueued`` never imports ``actors``).

    Its decisions reach the timeline through the API port it commits to (:class:`TimelinePort`).
    """

    def __init__(self, coordinator: Any, timeline: Timeline) -> None:
        self.coordinator = coordinator
        self.timeline = timeline
        coordinator.clock = lambda: timeline.trace.epoch + timeline.clock() / US

    async def arrive(self, arrival: Arrival) -> None:
        change, _ = self.coordinator.world.apply(arrival.manifest)
        if change is Change.WORKLOAD:
            await self.coordinator.arrive(arrival.key)

    async def finish(self, key: str) -> None:
        self.timeline.done(key)
        await self.coordinator.finish(key)

    async def settle(self, until: Until | None = None) -> None:
        await self.coordinator.run_to_quiescence(until=until)
        due = self.coordinator.next_deadline()  # a maximum execution time runs out then (actors.deadlines)
        if due is not None:
            self.timeline.wake_at(math.ceil((due - self.timeline.trace.epoch) * US))


class ElasticDriver:
    """A driver with an ElasticQuota tree beside it; ``elastic`` is the elastic coordinator (duck-typed).

    The World routes a workload carrying the quota label to the elastic tree
    (``World.route``): the inner driver applies every arrival and leaves such a workload
    unrouted, this one hands it to ``elastic``.  ``elastic`` runs on the timeline's clock
    (microseconds; its recycling delay is converted to match) and says when forced
    recycling is next due, which becomes a wake-up: a group over its runtime is recycled
    when its delay has passed even if nothing else happens then.
    """

    def __init__(self, inner: Driver, elastic: Any) -> None:
        self.inner = inner
        self.elastic = elastic
        self.timeline = inner.timeline
        self.held: set[str] = set()

    async def arrive(self, arrival: Arrival) -> None:
        await self.inner.arrive(arrival)
        world = self.timeline.world
        wl = world.workloads.get(arrival.key)
        if wl is not None and world.route(wl)[1] == "elastic":
            self.held.add(arrival.key)
            await self.elastic.arrive(world.raw[f"Workload/{arrival.key}"])

    async def finish(self, key: str) -> None:
        await self.inner.finish(key)  # recorded, and the World forgets it
        if key in self.held:
            self.held.discard(key)
            await self.elastic.finish(key)

    async def settle(self, until: Until | None = None) -> None:
        await self.inner.settle(until)
        await self.elastic.run_to_quiescence()
        due = self.elastic.deadline()
        if due is not None:
            self.timeline.wake_at(math.ceil(due))


async def play(driver: Driver, *, real: bool = False,
               progress: Callable[[int, int], None] | None = None) -> None:
    """Run the timeline to its last event; ``real`` sleeps until each event (Kueue's test does)."""
    t = driver.timeline
    total = len(t.trace.arrivals)
    until: Until | None = None
    if real:
        import anyio
        start = time.monotonic()
        t.clock = lambda: round((time.monotonic() - start) * US)

        def until() -> bool:
            due = t.next_time()
            return due is not None and due <= t.clock()
    while (at := t.next_time()) is not None:
        if real:
            await anyio.sleep(max(0.0, (at - t.clock()) / US))
            now = t.clock()
        else:
            t.virtual = now = at
        finishes, arrivals = t.pop_due(now)
        for key in finishes:
            await driver.finish(key)
        for a in arrivals:
            await driver.arrive(a)
        await driver.settle(until)
        t.sample()
        if progress is not None:
            progress(len(t.times), total)
