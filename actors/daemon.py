"""The long-running daemon: actors started once, objects streaming in, rounds on change.

One root task group holds every actor and two tasks: the *source* (a manifest
directory polled every ``interval`` seconds until the Kubernetes layer's watches
replace it) feeds apply/delete events to the coordinators, and after each batch they
run rounds to quiescence, for at most ``interval`` seconds at a time: a long backlog
(every ClusterQueue parking its pending workloads one per round) pauses to read the
source again, so a deletion or a new object is seen while it is worked through, and
the rounds resume right after (``rounds_paused`` in the log; ``settled`` at quiescence,
when ``on_settled`` is called).  Decisions leave through the API port and are logged as
structlog events.

systemd (``kueued.notify``) is told READY once every actor has started and the first load is
applied, a STATUS line (leader or follower, queues, pending, admitted) after each pass, and
WATCHDOG from this loop: at the end of every pass, between rounds when half the watchdog period
has passed, and with idle waits cut to that half, so a wedged loop stops pinging and is killed.
SIGTERM or SIGINT (``_Stop``) stops taking work: an idle wait is cut short, a stretch of rounds
ends after the round in flight (its commits answered, committed or reverted), the pass's
evictions and status writes go out, and the loop ends (STOPPING); what is still running
``STOP_GRACE`` seconds after the signal is cancelled.

Two coordinators share the World and the port: Kueue's (ClusterQueues, Cohorts) and
the ElasticQuota one (``actors.elastic``).  Every object goes through Kueue's
coordinator first (it applies it to the World); after the batch the elastic coordinator
is synced to the World (ElasticQuotas, Nodes, the Workloads labelled for a quota, the
recycling delay), both run to quiescence, and each ElasticQuota's request and runtime
are written back as Koordinator's annotations.  An ElasticQuota that validation refuses
gets an ``Accepted=False`` condition and an ``object_rejected`` warning; the earlier
version stays in force and nothing else is affected.  On a cluster, ``status``
(``kueued.kube.status_publisher``) writes every ClusterQueue's, LocalQueue's and Cohort's
status after each pass, and the Kueue objects validation refuses get ``Accepted=False`` and
a warning Event.

Forced recycling waits ``delay_evict_time`` on ``clock`` (monotonic seconds unless a
test injects one): when a group's delay runs out with nothing else happening, the next
poll runs the rounds all the same.

``health`` (``kueued.health``) hears a tick at the end of every pass (``/healthz`` fails when
they stop: a wedged loop), that the first load is applied when READY is sent (``/readyz``),
and whether this process is the one that commits (always, until there is leader election).
``metrics`` are refreshed as :mod:`actors.observe` says: the queues' gauges at most once a
second while changes keep arriving.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import structlog

from actors.coordinator import Coordinator
from actors.elastic import ElasticCoordinator
from actors.observe import Gauges, observe_pass
from actors.reasons import ReasonLog
from kueued.config_live import Live
from kueued.engine.wiring import make_preemptor
from kueued.health import Health, stale_after
from kueued.kube.in_force import earlier_of
from kueued.kube.port import ApiPort, StatusPublisher
from kueued.metrics import Metrics
from kueued.metrics_local_queue import enabled as local_queue_metrics_on
from kueued.metrics_recorder import DecisionRecorder
from kueued.model.api import object_key
from kueued.model.koordinator import parents_first
from kueued.native import engine
from kueued.notify import Notifier, sd_notify
from kueued.scheduling.elastic import prepare
from kueued.sources import ManifestDirectory, Source
from kueued.world import Change, World

__all__ = ["run_daemon", "sd_notify"]

log = structlog.get_logger("kueued.daemon")

# What the elastic tree is built from: a change to anything else leaves it as it is.
EVENTS_KEPT = 10_000
"""Decisions (evictions) a running daemon keeps in memory; older ones are in the log only."""

_ELASTIC_KINDS = frozenset({"ElasticQuota", "Node", "Workload", "Configuration"})

STOP_GRACE = 10.0
"""Seconds a stop waits for the pass in flight before cancelling it (the unit's TimeoutStopSec is longer)."""


async def _start(world: World, port: ApiPort, tg: Any, *, clock: Callable[[], float],
                 status: StatusPublisher | None, metrics: Metrics | None) -> tuple[Coordinator, ElasticCoordinator]:
    """Both coordinators with their actors started, and who records their decisions."""
    # A run's outcome reads every eviction; a daemon runs for months and reads none (the
    # structured log and the API carry them), so it keeps only the latest for debugging.
    coord = Coordinator(world, port, preemptor=make_preemptor,
                        keep_events=EVENTS_KEPT)
    coord.clock = _wall_seconds  # admissions are stamped with the wall clock (and AFS decays on it)
    coord.stop_on_refusal = True  # a refused commit: apply what the watch brought before deciding again
    elastic = ElasticCoordinator(prepare([], [], []), port, clock=clock,
                                 delay=world.settings.delay_evict_time, keep_events=EVENTS_KEPT,
                                 recycle=world.settings.monitor_all_quotas is True)
    await coord.sync_topology(tg)
    await elastic.start(tg)
    if status is not None:
        await tg.start(status.run)  # its Event writers
        coord.recorder = status.recorder  # admissions and evictions become Events
    if metrics is not None:  # each committed admission's wait, each preemption by the preemptor's queue
        coord.recorder = DecisionRecorder(metrics, coord.recorder, cluster_queue_of=partial(_queue_of, world),
                                          local_queue_metrics=lambda: local_queue_metrics_on(world.settings))
    return coord, elastic


async def _rounds(coord: Coordinator, elastic: ElasticCoordinator, port: ApiPort, reasons: ReasonLog,
                  until: Callable[[], bool], changed: int, gauges: Gauges | None) -> bool:
    """Both coordinators' rounds, for at most an interval (``until``), and what follows them:
    the pending reasons noted, metrics refreshed.  Whether the rounds paused before quiescence."""
    rounds = await coord.run_to_quiescence(until=until)
    unsettled = not coord.quiescent
    elastic_rounds = await elastic.run_to_quiescence()
    await elastic.publish()
    log.info("rounds_paused" if unsettled else "settled", changes=changed, rounds=rounds,
             elastic_rounds=elastic_rounds)
    await reasons.update(coord, port, elastic)
    if gauges is not None:
        await gauges.after_rounds(port, rounds + elastic_rounds)
    return unsettled


async def run_daemon(source: Path | Source, port: ApiPort, *, interval: float = 2.0,
                     on_settled: Callable[[Coordinator], None] | None = None,
                     handle_signals: bool = True, metrics: Metrics | None = None,
                     clock: Callable[[], float] = time.monotonic, world: World | None = None,
                     status: StatusPublisher | None = None, health: Health | None = None,
                     elected: bool = False, notifier: Notifier | None = None, config: Live | None = None) -> None:
    """Run until SIGTERM (``handle_signals``) or cancelled; ``world`` may be given to share it with the
    port; ``status`` writes the queues' status, Accepted conditions and Events (a cluster; None offline);
    ``health`` is told of progress, readiness and leadership; ``notifier`` (default: from the
    environment) tells systemd; ``config`` (``kueued run --config``) is reloaded on SIGHUP."""
    if isinstance(source, Path):
        source = ManifestDirectory(source)
    world = world if world is not None else World()
    async with anyio.create_task_group() as tg:
        coord, elastic = await _start(world, port, tg, clock=clock, status=status, metrics=metrics)
        health = health if health is not None else Health()
        notifier = notifier if notifier is not None else Notifier()
        stop = _supervise(tg, health, elected=elected, signals=handle_signals, config=config)
        batch: list[tuple[str, dict]] = []
        with stop.interruptible():
            batch = _as_created(await source.initial())  # nothing is decided before every kind's first list is in
        ready = False
        unsettled = False  # the last rounds stopped at the interval, before quiescence
        wrote_at = clock()  # the last pass that wrote status and pending reasons
        reasons = ReasonLog()
        gauges = Gauges(metrics, coord, elastic, source, clock) if metrics is not None else None
        try:
            while not stop.requested:
                changed, elastic_changed = await _apply(batch, coord, elastic, port, tg, status)
                if config is not None:  # the file's interval and scheduling settings (SIGHUP changes them)
                    interval = config.interval
                    if await _apply_config(config, coord, tg):
                        changed, elastic_changed = changed + 1, True
                _log_problems(source)
                if changed or unsettled or not ready or _due(coord, elastic, clock) <= clock():
                    if elastic_changed:
                        await elastic.sync_world(world)
                    until = partial(_pause, clock, clock() + interval, stop, notifier)
                    unsettled = await _rounds(coord, elastic, port, reasons, until, changed, gauges)
                    if on_settled is not None and not unsettled:
                        on_settled(coord)
                elif gauges is not None:
                    await gauges.catch_up()
                if not source.queued() or clock() - wrote_at >= interval:
                    unsettled = await _writes(port, status, coord, source) or unsettled
                    wrote_at = clock()
                _pass_done(world, source, health, notifier, metrics, first=not ready)
                ready = True
                wait = 0 if unsettled else _idle_wait(interval, _due(coord, elastic, clock), clock, notifier)
                if status is not None:  # statuses whose working out was paced (kueued.pace): not later than that
                    wait = min(wait, status.put_off())
                batch = []
                with stop.interruptible():
                    batch = await source.changes(wait)
        finally:
            notifier.stopping()
            notifier.close()
            coord.stop()
            elastic.stop()
        tg.cancel_scope.cancel()  # stopped: the actors' and the signal's tasks end too


def _wall_seconds() -> float:
    """The wall clock in whole seconds, as the API server keeps a condition's time: an admission
    stamped finer orders preemption candidates by sub-second times no one else sees, so the daemon
    chose another victim than ``simulate`` of the same cluster, and than itself after a restart."""
    return float(math.floor(time.time()))


def _as_created(batch: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The first list, its ElasticQuotas put in the order they were made, parents first
    (``koordinator.parents_first``), in the places the list gave them: validated in name order, a
    child came before its parent and was refused, and workloads went to the default quota."""
    slots = [i for i, (verb, m) in enumerate(batch) if verb == "apply" and m.get("kind") == "ElasticQuota"]
    ordered = parents_first([batch[i][1] for i in slots])
    out = list(batch)
    for i, manifest in zip(slots, ordered, strict=True):
        out[i] = ("apply", dict(manifest))
    return out


def _due(coord: Coordinator, elastic: ElasticCoordinator, clock: Callable[[], float]) -> float:
    """When the rounds must run although nothing changes, on ``clock``: forced recycling (the elastic
    coordinator runs on ``clock``) or a maximum execution time (the coordinator's own clock); inf if never."""
    recycling = elastic.deadline()
    expiry = coord.next_deadline()
    now = clock()
    return min(math.inf if recycling is None else recycling,
               math.inf if expiry is None else now + (expiry - coord.now()))


def _idle_wait(interval: float, due: float, clock: Callable[[], float], notifier: Notifier) -> float:
    """How long a settled pass waits for changes: an interval, less when forced recycling or a
    maximum execution time is due sooner or systemd's watchdog must hear from us before."""
    pause = min(interval, max(0.0, due - clock()))
    return min(pause, notifier.ping_every or pause)


async def _writes(port: ApiPort, status: StatusPublisher | None, coord: Coordinator, source: Source) -> bool:
    """The writes that say what was decided, after the decisions: evictions' second phases,
    pending reasons, the queues' status.  On every pass, idle ones too, so a write that failed at
    the end of a burst is retried while the cluster is quiet (each is a no-op when nothing is
    due), but not while changes keep arriving, for at most an interval: admissions go first
    (each write costs the API server what an admission does, and on Kueue's large-scale config
    they held rounds back for seconds).  The pending reasons go a batch at a time and stop once
    changes wait (a finish's quota waited a second and more behind 256 reasons on Kueue's
    baseline through the API server); the rest go on a later pass.  Whether an eviction's
    reservation is now cleared: the next pass's rounds release its quota."""
    cleared = await port.finish_evictions()
    await port.flush_pending(busy=lambda: source.queued() > 0)
    if status is not None:
        await status.publish(coord)
    return bool(cleared)


def _supervise(tg: Any, health: Health, *, elected: bool, signals: bool, config: Live | None) -> _Stop:
    """Who commits, and the signals: SIGTERM stops the loop, SIGHUP reloads the config.

    Without leader election this process commits from the start; with it (``elected``), the
    elector calls health.set_leader as it wins or loses the lease, and the port is fenced
    (kueued.kube.fencing): a follower decides every round but its writes are refused."""
    if not elected:
        health.set_leader(True)
    stop = _Stop()
    if signals:
        tg.start_soon(_stop_on_signal, stop, tg.cancel_scope)
        tg.start_soon(_reload_on_signal, config, health)
    return stop


def _pass_done(world: World, source: Source, health: Health, notifier: Notifier, metrics: Metrics | None, *,
               first: bool) -> None:
    """A pass of the loop is done: READY after the first (every actor runs and the first load
    is applied), STATUS after the others, the pass's metrics, and the liveness signals (a
    wedged loop stops them: ``/healthz`` fails and systemd's watchdog fires)."""
    line = _status_line(world, health) if notifier.enabled else None
    if first:
        health.ready()
        notifier.ready(line)
        log.info("daemon_ready", source=source.name, objects=len(world.raw), engine=engine())
    elif line is not None:
        notifier.status(line)
    if metrics is not None:
        observe_pass(metrics, source, health)
    health.tick()
    notifier.watchdog()


async def _apply(batch: list[tuple[str, dict]], coord: Coordinator, elastic: ElasticCoordinator, port: ApiPort,
                 tg: anyio.abc.TaskGroup, status: StatusPublisher | None = None) -> tuple[int, bool]:
    """Apply one batch of source events; (how many, whether the elastic tree must follow)."""
    elastic_changed = False
    coord.held = set()  # the tree is rebuilt once for the batch, after it (Coordinator.release_held)
    try:
        for verb, manifest in batch:
            elastic_changed = await _apply_one(verb, manifest, coord, elastic, port, tg, status) or elastic_changed
        world = coord.world
        if world.refused_elastic and any(m.get("kind") == "ElasticQuota" for _, m in batch):
            # refused for what the others were (a parent not there yet, their mins): the API server
            # holds them, so they are what the user asked for, and Koordinator's webhook would have
            # let a user's retry in; oldest first, parents first
            await _retry("apply", world.refused_elastic, world.retry_elastic, coord, elastic, port, tg, status)
        if world.deleting_elastic and any(verb == "delete" and m.get("kind") in ("ElasticQuota", "Workload")
                                          for verb, m in batch):
            # deleted while Koordinator's webhook would have refused it (child quotas, bound workloads):
            # in force until then, since its children's runtime and its workloads' quota came from it
            gone = await _retry("delete", world.deleting_elastic, world.retry_elastic_deletes, coord, elastic,
                                port, tg, status)
            for key in sorted(gone):
                log.info("elastic_quota_deleted", object=key, reason="no longer refused")
            elastic_changed = elastic_changed or bool(gone)
    except BaseException:
        coord.held = None  # not held for ever: what is not applied comes again (a relist)
        raise
    await coord.release_held(tg)
    return len(batch), elastic_changed


async def _retry(verb: str, waiting: dict[str, Any], candidates: Callable[[], list[dict[str, Any]]],
                 coord: Coordinator, elastic: ElasticCoordinator, port: ApiPort, tg: anyio.abc.TaskGroup,
                 status: StatusPublisher | None) -> set[str]:
    """The ElasticQuotas ``waiting`` for Koordinator's webhook rules (a refused version, a refused
    deletion), applied with ``verb`` again in the order ``candidates()`` gives, and again while one
    gets through (a parent accepted lets its child in, a child deleted lets its parent go); the keys
    that got through."""
    first = set(waiting)
    while waiting:
        before = len(waiting)
        for manifest in candidates():
            await _apply_one(verb, manifest, coord, elastic, port, tg, status)
        if len(waiting) >= before:  # (a nameless refused quota comes back under a new key: no progress)
            break
    return first - waiting.keys()


async def _apply_one(verb: str, manifest: dict, coord: Coordinator, elastic: ElasticCoordinator, port: ApiPort,
                     tg: anyio.abc.TaskGroup, status: StatusPublisher | None) -> bool:
    """One source event; whether the elastic tree must follow."""
    key = object_key(manifest)
    if verb == "apply" and key not in coord.world.raw and (earlier := earlier_of(manifest)) is not None:
        await coord.apply(earlier, tg)  # refused before a restart: that version is still the one in force
    logged = coord.world.rejected.get(key)
    change = await (coord.apply(manifest, tg) if verb == "apply" else coord.delete(manifest, tg))
    reason = coord.world.rejected.get(key, "") if change is Change.REJECTED else None
    if reason is not None and reason != logged:  # not again for the echo of its Accepted condition's write
        log.warning("object_rejected", object=key, reason=reason)
    elif reason is None:  # accepted, or gone: a daemon keeps no refusal of a version no longer current
        coord.world.rejected.pop(key, None)
    if status is not None and verb == "delete":
        status.forget(key)
    elif status is not None:  # an Accepted condition and a warning Event say what a webhook would have
        status.validated(manifest, reason)
        status.in_force(manifest, coord.world.raw.get(key), refused=reason is not None)
    kind = manifest.get("kind")
    if verb == "delete" and kind == "Workload":
        port.forget(key.split("/", 1)[1])
    if kind == "ElasticQuota" and verb != "delete":  # (a deleted one has no status to say it on)
        await elastic.validated(manifest, reason)
    return isinstance(kind, str) and kind in _ELASTIC_KINDS


def _queue_of(world: World, manifest: Mapping[str, Any]) -> str | None:
    """The ClusterQueue a Workload queues in (a preemptor is not admitted yet: its route)."""
    wl = world.workloads.get(object_key(dict(manifest)).split("/", 1)[-1])
    return None if wl is None else world.route(wl)[0]


def _pause(clock: Callable[[], float], at: float, stop: _Stop, notifier: Notifier) -> bool:
    """Asked after each round: ping the watchdog if due (a long stretch is not a wedge), and end
    the stretch at ``at`` or once a stop is asked."""
    if notifier.watchdog_due():
        notifier.watchdog()
    return stop.requested or clock() >= at


def _status_line(world: World, health: Health) -> str:
    """systemd's STATUS: who commits, and how much is waiting and admitted."""
    admitted = sum(1 for key in world.workloads if key in world.placed)
    return (f"{'leader' if health.leader else 'follower'}: {len(world.cluster_queues)} cluster queues, "
            f"{len(world.workloads) - admitted} pending, {admitted} admitted")


def _log_problems(source: Source) -> None:
    """Each unreadable file or document once when it appears or changes, and once when it reads again."""
    new, cleared = source.problem_changes()
    for problem in new:
        log.warning("manifest_unreadable", file=problem.source, document=problem.document, error=problem.reason)
    for where in cleared:
        log.info("manifest_readable", file=where)


class _Stop:
    """A stop asked for: the loop checks :attr:`requested` between steps; a wait inside
    :meth:`interruptible` (reading the source) is cut short at once."""

    def __init__(self) -> None:
        self.requested = False
        self._waiting: anyio.CancelScope | None = None

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        with anyio.CancelScope() as scope:
            if self.requested:
                scope.cancel()
            self._waiting = scope
            try:
                yield
            finally:
                self._waiting = None

    def request(self) -> None:
        self.requested = True
        if self._waiting is not None:
            self._waiting.cancel()


async def _stop_on_signal(stop: _Stop, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("daemon_stopping", signal=signal.Signals(signum).name, grace=STOP_GRACE)
            stop.request()
            break
    await anyio.sleep(STOP_GRACE)  # the loop ends the pass in flight and cancels this task; if not:
    log.warning("daemon_stop_forced", grace=STOP_GRACE)
    scope.cancel()


async def _apply_config(config: Live, coord: Coordinator, tg: anyio.abc.TaskGroup) -> bool:
    """The config file's scheduling sections, through the World's door as the Configuration they stand
    for, when they changed; a Configuration among the objects wins as a whole (it is left alone)."""
    current = coord.world.raw.get("Configuration")
    if current is not None and current is not config.applied:
        return False
    wanted = config.configuration()
    if wanted == current:
        return False
    config.applied = wanted
    if wanted is None:
        await coord.delete(current or {"kind": "Configuration"}, tg)  # back to Kueue's defaults
    else:
        await coord.apply(wanted, tg)
    return True


async def _reload_on_signal(config: Live | None, health: Health) -> None:
    """SIGHUP: read the config file again (``kueued.config_live.Live.reload`` logs what changed); the next
    pass applies the interval and the scheduling settings.  Without a file there is nothing to read."""
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            if config is None:
                log.warning("config_reload_skipped", reason="no --config file")
                continue
            config.reload()
            health.stale_after = max(health.stale_after, stale_after(config.interval))
