"""kueued's command line: ``simulate``, ``validate``, ``run``, ``config check``, ``manifests``, and the
operator's ``status`` and ``explain`` (:mod:`kueued.ops.commands`).

The composition root: the only package of ``kueued`` that may import ``actors``.  This module
builds the parser and dispatches; each command's implementation lives beside it
(:mod:`kueued.cli.simulation`, :mod:`kueued.cli.daemon`, :mod:`kueued.cli.checks`) and is
imported only when that command runs.  Logging is configured once here (structlog, JSON lines
or console).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

from kueued.config import DEFAULTS
from kueued.errors import KueuedError
from kueued.logging import configure, fail, is_json

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
    _add_simulate(sub)
    _add_run(sub)
    _add_config(sub)
    val = sub.add_parser("validate", help="check manifests as Kueue's and Koordinator's webhooks would")
    val.add_argument("files", nargs="+", type=Path)
    _add_manifests(sub)
    from kueued.ops.commands import add_parsers
    add_parsers(sub)  # the operator's: status, explain
    return ap


def _add_simulate(sub: Any) -> None:
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
    from kueued.ops.commands import add_simulate_flags
    add_simulate_flags(sim)  # --from-cluster and the cluster's flags


def _add_run(sub: Any) -> None:
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


def _add_config(sub: Any) -> None:
    cfg = sub.add_parser("config", help="check a kueued config file (config/kueued.toml)")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True, parser_class=_Parser)
    check = cfg_sub.add_parser("check", help="decode FILE strictly: exit 0 and a summary, or 2 and each error "
                                             "with its FILE:LINE and key")
    check.add_argument("file", type=Path, metavar="FILE")


def _add_manifests(sub: Any) -> None:
    man = sub.add_parser("manifests", help="print the CRDs and RBAC kueued needs (kubectl apply --server-side -f -)",
                         description="The CustomResourceDefinitions of every kind kueued reads (Kueue's "
                                     "kueue.x-k8s.io/v1beta2 kinds and Koordinator's ElasticQuota), generated from "
                                     "kueued's own API structs, and a least-privilege ClusterRole, a lease Role, "
                                     "a ServiceAccount and their bindings.")
    man.add_argument("--no-crds", action="store_true", help="leave the CRDs out (a cluster that runs Kueue's)")
    man.add_argument("--no-rbac", action="store_true", help="leave the RBAC out")
    man.add_argument("--user", metavar="NAME", help="also bind the roles to this user (a client-certificate user)")
    man.add_argument("--namespace", default="kueued-system", help="for the ServiceAccount and the lease Role")


def _log_flags_first(argv: list[str]) -> list[str]:
    """``--log-level`` and ``--log-format`` moved before the subcommand: they are the program's, and
    ``kueued run --log-level DEBUG`` (the systemd unit appends ``$KUEUED_ARGS`` after ``run``) would
    otherwise be a usage error that fails the unit."""
    flags = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    flags.add_argument("--log-format")
    flags.add_argument("--log-level")
    known, rest = flags.parse_known_args(argv)
    given = [("--log-format", known.log_format), ("--log-level", known.log_level)]
    return [part for flag, value in given if value is not None for part in (flag, value)] + rest


def main(argv: list[str] | None = None) -> int:
    argv = _log_flags_first(sys.argv[1:] if argv is None else argv)
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
            from kueued.cli.simulation import simulate
            return simulate(args)
        if args.command == "validate":
            from kueued.cli.checks import validate
            return validate(args)
        if args.command == "run":
            from kueued.cli.daemon import run
            return run(args)
        if args.command == "config":
            from kueued.cli.checks import config_check
            return config_check(args.file)
        if args.command == "manifests":
            from kueued.kube.manifests import render
            sys.stdout.write(render(crds=not args.no_crds, rbac=not args.no_rbac, user=args.user,
                                    namespace=args.namespace))
            return 0
    except KueuedError as exc:
        fail(str(exc))
        return 2
    return 0
