"""``kueued run``: the daemon's settings, its metrics and probes server, and its wiring.

:func:`run` settles the settings (flags over ``--config FILE`` over the defaults), opens the
metrics port, and runs :func:`actors.daemon.run_daemon` on one of two sources: a directory of
manifests (offline, decisions in memory) or a cluster, watched and written through its API,
with the batch/v1 Job integration beside it and, with ``--leader-elect``, every write fenced
by a Lease.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kueued.config import DEFAULTS
from kueued.logging import configure, fail

if TYPE_CHECKING:
    from kueued.kube.client import KubeClient
    from kueued.kube.lease import LeaderElector
    from kueued.kube.port import ApiPort
    from kueued.world import World

__all__ = ["run", "settle"]


def run(args: argparse.Namespace) -> int:
    from functools import partial

    import anyio
    from prometheus_client import disable_created_metrics

    from kueued.health import Health, HealthServer, stale_after
    from kueued.metrics import Metrics
    args.live = settle(args)
    if args.manifests is not None and not args.manifests.is_dir():
        fail(f"--manifests {args.manifests} is not a directory")
        return 2
    if args.leader_elect and args.manifests is None:
        from kueued.kube.lease_record import check_timings
        try:
            check_timings(lease_duration=args.leader_elect_lease_duration,
                          renew_deadline=args.leader_elect_renew_deadline,
                          retry_period=args.leader_elect_retry_period)
        except ValueError as exc:
            fail(f"--leader-elect: {exc}")
            return 2
    disable_created_metrics()  # no *_created series: Kueue's Go client has none, dashboards expect none
    metrics = Metrics()
    health = Health(stale_after=stale_after(args.interval))
    server = None
    if args.metrics_port:
        try:
            server = HealthServer(health, metrics.registry, host=args.metrics_address, port=args.metrics_port)
        except OSError as exc:
            fail(f"--metrics-port {args.metrics_port}: cannot serve metrics there (address {args.metrics_address}): "
                 f"{exc.strerror or exc}")
            return 2
    main = _run_offline if args.manifests is not None else _run_cluster
    try:
        anyio.run(partial(main, args, metrics, health))
    finally:
        if server is not None:
            server.close()
    return 0


async def _run_offline(args: argparse.Namespace, metrics, health) -> None:
    from actors.daemon import EVENTS_KEPT, run_daemon
    from kueued.kube.port import InMemoryPort
    await run_daemon(args.manifests, InMemoryPort(keep=EVENTS_KEPT), interval=args.interval, metrics=metrics,
                     health=health, config=args.live)


async def _run_cluster(args: argparse.Namespace, metrics, health) -> None:
    """Watch the cluster (an initial sync before any decision), commit through its API, and run the
    batch/v1 Job integration beside the scheduler.  With --leader-elect every write is fenced."""
    from functools import partial

    import anyio

    from actors.daemon import run_daemon
    from kueued.kube.connect import connect
    from kueued.kube.events import EventRecorder
    from kueued.kube.fencing import FencedClient, FencedPort, FencedStatus, run_while_leading
    from kueued.kube.jobs import JobController
    from kueued.kube.port import StatusPublisher
    from kueued.kube.retention import Retention
    from kueued.kube.status_publisher import STATUS_WRITES_PER_SECOND, TreeStatusPublisher
    from kueued.kube.watch import ClusterSource
    from kueued.world import World
    client = await connect(args.kubeconfig, context=args.context,
                           insecure_skip_tls_verify=args.insecure_skip_tls_verify)
    world = World()
    port = _kube_port(client, world)
    writes: Any = client  # what the tree's status, the Events and the Job controller write with
    elector: LeaderElector | None = None
    if args.leader_elect:
        # A connection of its own: a renewal never waits behind a round's commits.
        leases = await connect(args.kubeconfig, context=args.context,
                               insecure_skip_tls_verify=args.insecure_skip_tls_verify,
                               request_timeout=args.leader_elect_renew_deadline)
        elector = _elector(args, leases, health)
        port = FencedPort(port, elector, hold=args.interval)
        writes = FencedClient(client, elector)
    live = args.live  # None without --config: the defaults, for good
    recorder = EventRecorder(writes)  # Events about Workloads and Jobs alike (its writers run in ``status``)
    status: StatusPublisher = TreeStatusPublisher(
        writes, recorder=recorder,
        rate=(lambda: live.config.daemon.status_writes_per_second) if live is not None else STATUS_WRITES_PER_SECOND)
    if elector is not None:
        status = FencedStatus(status, elector)  # a follower does not even try (nor log a refusal per object)
    jobs = JobController(client, events=recorder) if args.job_integration and elector is None else None
    retention = Retention(writes, world, events=recorder)
    async with client, anyio.create_task_group() as tg:
        if elector is not None:
            await tg.start(elector.run)  # its first try is done: leader or follower from the start
        source = ClusterSource(client, name=str(args.kubeconfig or "cluster"))
        tg.start_soon(source.run)
        if jobs is not None:  # start_soon: a cluster that grants kueued no Jobs must not hold scheduling back
            tg.start_soon(jobs.run, name="job controller")
        elif args.job_integration and elector is not None:  # Kueue's way: only the leader runs controllers
            tg.start_soon(partial(run_while_leading, elector, lambda: JobController(writes, events=recorder).run(),
                                  name="job controller"), name="job controller")
        tg.start_soon(retention.run if elector is None  # a follower does not delete: only the leader runs
                      else partial(run_while_leading, elector, retention.run, name="retention"), name="retention")
        await run_daemon(source, port, interval=args.interval, metrics=metrics, world=world, status=status,
                         health=health, elected=elector is not None, config=args.live)
        if jobs is not None:
            with anyio.move_on_after(5):
                await jobs.drain()  # stop between requests, not in the middle of one
        if elector is not None:
            await elector.release()  # nothing commits any more: a follower takes over at its next try
            await leases.aclose()
        tg.cancel_scope.cancel()


def _kube_port(client: KubeClient, world: World) -> ApiPort:
    """Commits through the API, each Workload's manifest and requests read from ``world``."""
    from kueued.kube.commits import KubePort

    def requests_of(key: str) -> list[tuple[str, int, dict[str, int]]] | None:
        wl = world.workloads.get(key)
        return None if wl is None else [(ps.name, ps.count, ps.requests) for ps in wl.pod_sets]

    return KubePort(client, manifest_of=lambda key: world.raw.get(f"Workload/{key}"), requests_of=requests_of)


def _elector(args: argparse.Namespace, leases: KubeClient, health) -> LeaderElector:
    """The Lease's elector, on a connection of its own; ``health`` follows whether we lead."""
    from kueued.kube.lease import LeaderElector
    from kueued.kube.lease_record import KubeLeases
    elector = LeaderElector(KubeLeases(leases), namespace=args.leader_elect_namespace,
                            name=args.leader_elect_name, identity=args.leader_elect_identity,
                            lease_duration=args.leader_elect_lease_duration,
                            renew_deadline=args.leader_elect_renew_deadline,
                            retry_period=args.leader_elect_retry_period)
    elector.on_change(health.set_leader)
    return elector


def settle(args: argparse.Namespace):  # -> kueued.config_live.Live | None
    """``run``'s settings: its flags over ``--config FILE`` over the defaults, written back into ``args``
    (what the rest of ``run`` reads); the logging follows them.  A bad file raises ConfigError."""
    from kueued.config import FLAGS, load, with_flags
    from kueued.config_live import Live
    flags = {dest: getattr(args, dest, None) for dest in FLAGS.values()}
    cfg = with_flags(load(args.config) if args.config is not None else DEFAULTS, flags)
    configure(level=cfg.log.level, format=cfg.log.format, daemon=True)
    kube, le = cfg.kube, cfg.leader_election
    args.kubeconfig = Path(kube.kubeconfig) if kube.kubeconfig else None
    args.context = kube.context or None
    args.insecure_skip_tls_verify, args.job_integration = kube.insecure_skip_tls_verify, kube.job_integration
    args.metrics_address, args.metrics_port = cfg.metrics.address, cfg.metrics.port
    args.leader_elect, args.leader_elect_namespace, args.leader_elect_name = le.enabled, le.namespace, le.name
    args.leader_elect_identity = le.identity or None
    args.leader_elect_lease_duration, args.leader_elect_renew_deadline = le.lease_duration, le.renew_deadline
    args.leader_elect_retry_period = le.retry_period
    args.interval = cfg.daemon.interval
    return Live(args.config, cfg, flags=flags) if args.config is not None else None

