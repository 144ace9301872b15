"""kueued's command line: ``simulate``, ``validate``, ``run``.

The composition root: the only module of ``kueued`` that may import ``actors``.
Logging is configured once here (structlog, JSON lines or console).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import NoReturn

import msgspec

from kueued.config import DEFAULTS
from kueued.errors import KueuedError
from kueued.logging import configure, fail, is_json, warn
from kueued.manifests import Problem, read_manifests

EPILOG = """examples:
  kueued simulate config/examples/organisation.yaml            # a table for people
  kueued simulate scenario.yaml --output json                  # FORMAT.md's JSON
  kueued simulate --generator baseline-generator.yaml --plot out/ # Kueue's perf test, virtual time
  kueued simulate trace.yaml --clock real                      # kueued.io/arrival + runtime, live
  kueued validate manifests/*.yaml                             # refuse what Kueue would
  kueued manifests | kubectl apply --server-side -f -         # CRDs and RBAC for a cluster
  kueued --log-format json --log-level INFO run                # the daemon: $KUBECONFIG or in-cluster
  kueued run --manifests /etc/kueued/manifests                 # the daemon offline, on a directory
  kueued run --config /etc/kueued/kueued.toml                  # settings from a file (SIGHUP reloads it)
  kueued config check /etc/kueued/kueued.toml                  # the file's errors, with FILE:LINE
  kueued status                                                # the live quota tree (or kubectl kueued status)
  kueued explain team-a/train-1                                # why it waits, what would admit it
  kueued simulate --from-cluster more-gpus.yaml                # the live cluster, now and after a change
"""


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors follow ``--log-format`` (one JSON event in JSON mode)."""

    def error(self, message: str) -> NoReturn:
        if is_json():
            fail(f"{self.prog}: {message}", usage=self.format_usage().strip())
            sys.exit(2)
        super().error(message)


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.01 <= value <= 3600:  # also refuses NaN; 0 would poll in a busy loop
        raise argparse.ArgumentTypeError(f"must be between 0.01 and 3600 seconds, got {text}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="kueued",
        description="Hierarchical quota scheduler for Kubernetes batch workloads: Kueue's cohorts, "
                    "ClusterQueues and preemption, and Koordinator's elastic quota.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log-level", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                    help=f"structlog level on stderr (default {DEFAULTS.log.level}; `run`: [log] level)")
    ap.add_argument("--log-format", choices=["auto", "console", "json"],
                    help="json lines, console, or auto (default): json for `run` when stderr is not a terminal "
                         "(journald), console otherwise")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sim = sub.add_parser("simulate", help="run manifests to quiescence in memory and report decisions",
                         description="Apply the manifests (or conformance scenarios) in order, schedule until "
                                     "nothing more can change, and print every workload's outcome.")
    sim.add_argument("files", nargs="*", type=Path, help="YAML manifests or scenario files")
    sim.add_argument("--output", "-o", choices=["table", "json"], default="table")
    sim.add_argument("--generator", type=Path, metavar="FILE",
                     help="Kueue's scheduler-perf generator YAML (test/performance/scheduler) instead of files")
    sim.add_argument("--clock", choices=["virtual", "real"], default="virtual",
                     help="for timed runs (kueued.io/arrival, kueued.io/runtime, --generator): virtual jumps "
                          "from event to event; real sleeps until each, as Kueue's test does")
    sim.add_argument("--plot", type=Path, metavar="DIR",
                     help="write PNG charts of a timed run to DIR (needs the 'plot' extra: matplotlib)")
    from kueued.ops.commands import add_parsers, add_simulate_flags
    add_simulate_flags(sim)  # --from-cluster and the cluster's flags
    run = sub.add_parser("run", help="run the daemon against a Kubernetes API server (or a manifest directory)",
                         description="Start one actor per ClusterQueue and Cohort and a root coordinator; watch the "
                                     "cluster's Kueue and Koordinator objects, admit and evict Workloads by writing "
                                     "their status as Kueue does, and log decisions as structured events. With "
                                     "--manifests, read a directory of YAML manifests instead (offline; decisions "
                                     "stay in memory and in the log).")
    # Each flag below overrides its setting in --config FILE (kueued.config); both default to DEFAULTS.
    d = DEFAULTS
    run.add_argument("--config", type=Path, metavar="FILE",
                     help="kueued's TOML settings (config/kueued.toml; check with `kueued config check FILE`); "
                          "flags override it, SIGHUP reloads it")
    run.add_argument("--kubeconfig", type=Path,
                     help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
    run.add_argument("--context", help="kubeconfig context (default: its current one)")
    run.add_argument("--insecure-skip-tls-verify", action="store_true", default=None,
                     help="do not verify the API server's certificate (logged as a warning)")
    run.add_argument("--no-job-integration", dest="job_integration", action="store_false", default=None,
                     help="do not manage batch/v1 Jobs labelled kueue.x-k8s.io/queue-name (on by default)")
    run.add_argument("--manifests", type=Path, metavar="DIR",
                     help="offline: follow this directory of YAML manifests instead of an API server")
    run.add_argument("--interval", type=_interval,
                     help="seconds a backlog is worked on before new events are read, and between directory "
                          f"scans; 0.01 to 3600 (default {d.daemon.interval:g})")
    run.add_argument("--metrics-port", type=_port,
                     help="serve Prometheus metrics (/metrics) and the probes (/healthz, /readyz) on this port "
                          f"(default {d.metrics.port}: off)")
    run.add_argument("--leader-elect", action="store_true", default=None,
                     help="compete for a coordination.k8s.io Lease and commit only while holding it; the others "
                          "watch and decide but write nothing (default off; the systemd unit turns it on)")
    run.add_argument("--leader-elect-namespace", metavar="NAMESPACE",
                     help=f"namespace of the Lease (default {d.leader_election.namespace}, where `kueued manifests` "
                          "grants it)")
    run.add_argument("--leader-elect-name", metavar="NAME",
                     help=f"name of the Lease (default {d.leader_election.name})")
    run.add_argument("--leader-elect-identity", metavar="ID",
                     help="this process's holderIdentity (default: the host name and a random suffix)")
    run.add_argument("--leader-elect-lease-duration", type=_interval, metavar="SECONDS",
                     help="how long followers wait after the last renewal they saw before taking over "
                          f"(default {d.leader_election.lease_duration:g})")
    run.add_argument("--leader-elect-renew-deadline", type=_interval, metavar="SECONDS",
                     help="how long the leader keeps trying to renew before it steps down "
                          f"(default {d.leader_election.renew_deadline:g})")
    run.add_argument("--leader-elect-retry-period", type=_interval, metavar="SECONDS",
                     help=f"between two tries to acquire or renew (default {d.leader_election.retry_period:g})")
    run.add_argument("--metrics-address", metavar="ADDRESS",
                     help=f"address that port listens on (default {d.metrics.address}: this host only; 0.0.0.0 or "
                          ":: for a Prometheus or a kubelet elsewhere)")
    cfg = sub.add_parser("config", help="check a kueued config file (config/kueued.toml)")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, parser_class=_Parser)
    check = cfg_sub.add_parser("check", help="decode FILE strictly: exit 0 and a summary, or 2 and each error "
                                             "with its FILE:LINE and key")
    check.add_argument("file", type=Path, metavar="FILE")
    val = sub.add_parser("validate", help="check manifests as Kueue's and Koordinator's webhooks would")
    val.add_argument("files", nargs="+", type=Path)
    man = sub.add_parser("manifests", help="print the CRDs and RBAC kueued needs (kubectl apply --server-side -f -)",
                         description="The CustomResourceDefinitions of every kind kueued reads (Kueue's "
                                     "kueue.x-k8s.io/v1beta2 kinds and Koordinator's ElasticQuota), generated from "
                                     "kueued's own API structs, and a least-privilege ClusterRole, a lease Role, "
                                     "a ServiceAccount and their bindings.")
    man.add_argument("--no-crds", action="store_true", help="leave the CRDs out (a cluster that runs Kueue's)")
    man.add_argument("--no-rbac", action="store_true", help="leave the RBAC out")
    man.add_argument("--user", metavar="NAME", help="also bind the roles to this user (a client-certificate user)")
    man.add_argument("--namespace", default="kueued-system", help="for the ServiceAccount and the lease Role")
    add_parsers(sub)  # the operator's: status, explain
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    early = argparse.ArgumentParser(add_help=False)  # the log format first, so usage errors follow it
    early.add_argument("--log-format", choices=["auto", "console", "json"], default=DEFAULTS.log.format)
    early.add_argument("--log-level", default=DEFAULTS.log.level)
    known, _ = early.parse_known_args(argv)
    if known.log_level.upper() not in logging.getLevelNamesMapping():
        known.log_level = DEFAULTS.log.level
    configure(level=known.log_level, format=known.log_format)
    args = _parser().parse_args(argv)
    from kueued.gc_tuning import tune
    tune()
    try:
        from kueued.ops.commands import is_ops
        if is_ops(args):  # status, explain, simulate --from-cluster
            from actors.simulation import run_actors
            from kueued.ops.commands import run as run_ops
            return run_ops(args, runner=run_actors)
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "validate":
            return _validate(args)
        if args.command == "run":
            return _run(args)
        if args.command == "config":
            return _config_check(args.file)
        if args.command == "manifests":
            from kueued.kube.manifests import render
            sys.stdout.write(render(crds=not args.no_crds, rbac=not args.no_rbac, user=args.user,
                                    namespace=args.namespace))
            return 0
    except KueuedError as exc:
        fail(str(exc))
        return 2
    return 0


def _read(files: list[Path]) -> tuple[list[dict], list[Problem]]:
    """The manifests of ``files``, each unreadable file or document reported once (warning)."""
    manifests, problems = read_manifests(files)
    for problem in problems:
        warn(str(problem), event="manifest_unreadable", file=problem.source, document=problem.document)
    return manifests, problems


def _simulate(args: argparse.Namespace) -> int:
    from actors.simulation import simulate
    from kueued.timeline import is_timed
    if args.generator is None and not args.files:
        fail("simulate: give manifest files or --generator FILE")
        return 2
    if args.plot is not None:
        _need_matplotlib()
    manifests, problems = _read(args.files)
    if args.generator is not None or is_timed(manifests) or args.plot is not None or args.clock == "real":
        _simulate_timed(args, manifests, problems)
        return 1 if problems else 0
    report = simulate(manifests)
    report.rejected.update((p.where, p.reason) for p in problems)
    _print_report(report, args.output)
    return 1 if problems else 0


def _need_matplotlib() -> None:
    """``--plot`` checked before the run, not after it."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        raise KueuedError("--plot needs matplotlib: pip install 'kueued[plot]'")


def _print_report(report, output: str) -> None:
    if output == "json":
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        from kueued.table import render
        render(report)


def _simulate_timed(args: argparse.Namespace, manifests: list[dict], problems: list[Problem]) -> None:
    from actors.simulation import simulate_timed
    from kueued.timeline import trace_from
    if args.generator is not None:
        from kueued.generator import build_trace, load_generator
        trace = build_trace(load_generator(args.generator))
        trace.setup.extend(manifests)
    else:
        trace = trace_from(manifests)
    many = len(trace.arrivals) > 2_000
    with _progress(enabled=many and args.output == "table") as progress:
        run = simulate_timed(trace, real=args.clock == "real",
                             progress=progress, per_workload=not many or args.output == "json")
    run.report.rejected.update((p.where, p.reason) for p in problems)
    if args.output == "json":
        body = {"summary": run.summary} if many else {"summary": run.summary, "report": run.report}
        sys.stdout.write(msgspec.json.encode(body).decode() + "\n")
    else:
        from kueued.simulate import render_summary
        if not many:
            from kueued.table import render
            render(run.report)
        render_summary(run.summary, reference=_rangespec(args.generator))
    if args.plot is not None:
        from kueued.simulate import write_plots
        for path in write_plots(run.timeline, run.summary, args.plot):
            print(f"wrote {path}", file=sys.stderr)


def _rangespec(generator: Path | None) -> dict | None:
    """Kueue's thresholds beside a generator file (``x-generator.yaml`` -> ``x-rangespec.yaml``)."""
    if generator is None:
        return None
    spec = generator.with_name(generator.name.replace("generator", "rangespec"))
    if spec == generator or not spec.exists():
        return None
    loaded = read_manifests([spec])  # advisory figures: an unreadable one is skipped
    return loaded.manifests[0] if loaded.manifests and not loaded.problems else None


class _progress:
    """A rich progress bar on stderr over arrivals seen, for long runs; a no-op otherwise."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
        self.bar = Progress("arrivals", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task("arrivals", total=None)
        return lambda done, total: self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(*exc)


def _run(args: argparse.Namespace) -> int:
    from functools import partial

    import anyio
    from prometheus_client import disable_created_metrics

    from kueued.health import Health, HealthServer, stale_after
    from kueued.metrics import Metrics
    args.live = _settle(args)
    if args.manifests is not None and not args.manifests.is_dir():
        fail(f"--manifests {args.manifests} is not a directory")
        return 2
    if args.leader_elect and args.manifests is None:
        from kueued.kube.lease import check_timings
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
    from typing import Any

    import anyio

    from actors.daemon import run_daemon
    from kueued.kube.client import connect
    from kueued.kube.commits import KubePort
    from kueued.kube.events import EventRecorder
    from kueued.kube.fencing import FencedClient, FencedPort, FencedStatus, run_while_leading
    from kueued.kube.jobs import JobController
    from kueued.kube.lease import KubeLeases, LeaderElector
    from kueued.kube.port import ApiPort, StatusPublisher
    from kueued.kube.status_publisher import TreeStatusPublisher
    from kueued.kube.watch import ClusterSource
    from kueued.world import World
    client = await connect(args.kubeconfig, context=args.context,
                           insecure_skip_tls_verify=args.insecure_skip_tls_verify)
    world = World()

    def requests_of(key: str) -> list[tuple[str, int, dict[str, int]]] | None:
        wl = world.workloads.get(key)
        return None if wl is None else [(ps.name, ps.count, ps.requests) for ps in wl.pod_sets]

    port: ApiPort = KubePort(client, manifest_of=lambda key: world.raw.get(f"Workload/{key}"),
                             requests_of=requests_of)
    writes: Any = client  # what the tree's status, the Events and the Job controller write with
    elector: LeaderElector | None = None
    if args.leader_elect:
        # A connection of its own: a renewal never waits behind a round's commits.
        leases = await connect(args.kubeconfig, context=args.context,
                               insecure_skip_tls_verify=args.insecure_skip_tls_verify,
                               request_timeout=args.leader_elect_renew_deadline)
        elector = LeaderElector(KubeLeases(leases), namespace=args.leader_elect_namespace,
                                name=args.leader_elect_name, identity=args.leader_elect_identity,
                                lease_duration=args.leader_elect_lease_duration,
                                renew_deadline=args.leader_elect_renew_deadline,
                                retry_period=args.leader_elect_retry_period)
        elector.on_change(health.set_leader)
        port = FencedPort(port, elector, hold=args.interval)
        writes = FencedClient(client, elector)
    status: StatusPublisher = TreeStatusPublisher(writes, recorder=EventRecorder(writes))
    if elector is not None:
        status = FencedStatus(status, elector)  # a follower does not even try (nor log a refusal per object)
    jobs = JobController(client) if args.job_integration and elector is None else None
    async with client, anyio.create_task_group() as tg:
        if elector is not None:
            await tg.start(elector.run)  # its first try is done: leader or follower from the start
        source = ClusterSource(client, name=str(args.kubeconfig or "cluster"))
        tg.start_soon(source.run)
        if jobs is not None:  # start_soon: a cluster that grants kueued no Jobs must not hold scheduling back
            tg.start_soon(jobs.run, name="job controller")
        elif args.job_integration and elector is not None:  # Kueue's way: only the leader runs controllers
            tg.start_soon(partial(run_while_leading, elector, lambda: JobController(writes).run(),
                                  name="job controller"), name="job controller")
        await run_daemon(source, port, interval=args.interval, metrics=metrics, world=world, status=status,
                         health=health, elected=elector is not None, config=args.live)
        if jobs is not None:
            with anyio.move_on_after(5):
                await jobs.drain()  # stop between requests, not in the middle of one
        if elector is not None:
            await elector.release()  # nothing commits any more: a follower takes over at its next try
            await leases.aclose()
        tg.cancel_scope.cancel()


def _settle(args: argparse.Namespace):  # -> kueued.config.Live | None
    """``run``'s settings: its flags over ``--config FILE`` over the defaults, written back into ``args``
    (what the rest of ``run`` reads); the logging follows them.  A bad file raises ConfigError."""
    from kueued.config import FLAGS, Live, load, with_flags
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


def _config_check(path: Path) -> int:
    """``kueued config check FILE``: a one-line summary (0), or each problem with its FILE:LINE (2)."""
    from kueued.config import ConfigError, line_of, load, summary
    from kueued.kube.lease import check_timings
    try:
        cfg = load(path)
        le = cfg.leader_election
        if le.enabled:
            check_timings(lease_duration=le.lease_duration, renew_deadline=le.renew_deadline,
                          retry_period=le.retry_period)
    except ConfigError as exc:
        for problem in exc.problems:
            fail(str(problem))
        return 2
    except ValueError as exc:  # the lease timings, which only the lease code knows how to judge
        fail(f"{path}:{line_of(path.read_text(), 'leader_election') or 0}: leader_election: {exc}")
        return 2
    print(f"{path}: ok: {summary(cfg)}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from kueued.world import World
    manifests, problems = read_manifests(args.files)
    world = World()
    for m in manifests:
        world.apply(m)
    refused = [(p.where, p.reason) for p in problems] + list(world.rejected.items())
    for key, why in refused:
        print(f"{key}: {why}")
    unread = f", {len(problems)} unreadable" if problems else ""
    print(f"{len(world.raw)} accepted, {len(world.rejected)} rejected{unread}")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
