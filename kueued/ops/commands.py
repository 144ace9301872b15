"""The operator's subcommands, for ``kueued.cli``: their arguments and what each one runs.

``kueued.cli`` adds these parsers and hands a parsed command here with the engine's
``runner`` (``actors.simulation.run_actors``: kueued.cli is the composition root, the only
package that names the actors).  Without files, ``status`` and ``explain`` read the
cluster that ``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config`` or the pod's service
account names, as ``kueued run`` connects, so ``kubectl kueued status`` (the
``kubectl-kueued`` entry point) reads the cluster kubectl would.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from kueued.errors import KueuedError
from kueued.logging import warn
from kueued.manifests import read_manifests
from kueued.simulate import Report
from kueued.world import World

__all__ = ["add_parsers", "add_simulate_flags", "is_ops", "run", "with_config"]

Runner = Callable[[World], Report]


def _config_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="the daemon's TOML settings (`kueued run --config`): its scheduling sections (fair "
                        "sharing, admission fair sharing, feature gates, resources, elastic quota) apply here as "
                        "they do in the daemon; without it, Kueue's defaults (and any Configuration among FILES)")


def with_config(manifests: list[dict[str, Any]], config: Path | None) -> list[dict[str, Any]]:
    """``manifests`` after the Kueue Configuration the daemon's config file stands for (first, so a
    Configuration among the manifests still has the last word, as one applied after it would)."""
    if config is None:
        return manifests
    from kueued.config import configuration_manifest, load
    settings = configuration_manifest(load(config))
    return manifests if settings is None else [settings, *manifests]


def _cluster_flags(p: argparse.ArgumentParser) -> None:
    _config_flag(p)
    p.add_argument("--kubeconfig", type=Path,
                   help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
    p.add_argument("--context", help="kubeconfig context (default: its current one)")
    p.add_argument("--insecure-skip-tls-verify", action="store_true",
                   help="do not verify the API server's certificate (logged as a warning)")


def add_parsers(sub: Any) -> None:
    """``status`` and ``explain`` on the subparsers ``sub``."""
    st = sub.add_parser("status", help="the quota tree: nominal, borrowed, lent, used; pending and admitted",
                        description="Show every Cohort and ClusterQueue with, per flavor and resource, its nominal "
                                    "quota, its subtree's quota, what is used, borrowed from its parent and lent to "
                                    "its siblings, and its pending and admitted Workloads. From FILES: after running "
                                    "them to quiescence (as `kueued simulate`); else from the cluster, as it is "
                                    "(nothing is scheduled or written).")
    st.add_argument("files", nargs="*", type=Path, help="YAML manifests (default: read the cluster)")
    st.add_argument("--output", "-o", choices=["tree", "json"], default="tree")
    _cluster_flags(st)
    ex = sub.add_parser("explain", help="why a Workload waits and what would admit it, or where it was admitted",
                        description="For an admitted Workload: its ClusterQueue and flavors. For a pending one: the "
                                    "node of the quota tree that blocks it with its numbers, and how much more "
                                    "quota, at which node, would admit it. From FILES after running them to "
                                    "quiescence, else from the cluster (with the daemon's own condition message).")
    ex.add_argument("workload", metavar="NAMESPACE/NAME")
    ex.add_argument("files", nargs="*", type=Path, help="YAML manifests (default: read the cluster)")
    ex.add_argument("--output", "-o", choices=["text", "json"], default="text")
    _cluster_flags(ex)


def add_simulate_flags(sim: argparse.ArgumentParser) -> None:
    """``simulate --from-cluster``: FILES are then the proposed changes."""
    sim.add_argument("--from-cluster", action="store_true",
                     help="start from the live cluster's objects, lay FILES over them as proposed changes (same "
                          "kind/namespace/name replaces), and show each Workload now and after; nothing is written")
    _cluster_flags(sim)


def is_ops(args: argparse.Namespace) -> bool:
    return args.command in ("status", "explain") or bool(getattr(args, "from_cluster", False))


def run(args: argparse.Namespace, *, runner: Runner) -> int:
    if args.command == "status":
        return _status(args, runner)
    if args.command == "explain":
        return _explain(args, runner)
    return _what_if(args, runner)


def _files(files: list[Path]) -> tuple[list[dict[str, Any]], bool]:
    loaded = read_manifests(files)
    for problem in loaded.problems:
        warn(str(problem), event="manifest_unreadable", file=problem.source, document=problem.document)
    return loaded.manifests, bool(loaded.problems)


def _live(args: argparse.Namespace) -> list[dict[str, Any]]:
    from kueued.ops.cluster_read import snapshot
    return with_config(snapshot(args.kubeconfig, context=args.context,
                                insecure_skip_tls_verify=args.insecure_skip_tls_verify), args.config)


def _source(args: argparse.Namespace) -> str:
    from kueued.kube.connect import config_source
    return config_source(args.kubeconfig)


def _status(args: argparse.Namespace, runner: Runner) -> int:
    from kueued.ops.cluster_read import world_of
    from kueued.ops.status import render, status_from_files, status_of_world
    bad = False
    if args.files:
        manifests, bad = _files(args.files)
        report = status_from_files(with_config(manifests, args.config), runner=runner)
    else:
        report = status_of_world(world_of(_live(args)), source=_source(args))
    if args.output == "json":
        sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    else:
        render(report)
    return 1 if bad else 0


def _explain(args: argparse.Namespace, runner: Runner) -> int:
    from kueued.ops.cluster_read import world_of
    from kueued.ops.explain import explain_workload, render_text
    from kueued.ops.status import run_world
    from kueued.ops.tree import settle
    key = args.workload
    if key.count("/") != 1 or not all(key.split("/")):
        raise KueuedError(f"explain: name the Workload as NAMESPACE/NAME, got {key!r}")
    bad = False
    if args.files:
        manifests, bad = _files(args.files)
        world, report = run_world(with_config(manifests, args.config), runner=runner)
        seen = report.workloads.get(key)
        explanation = explain_workload(world, settle(world), key, reason=seen.reason if seen else None,
                                       state=seen.state if seen else None)
    else:
        world = world_of(_live(args))
        explanation = explain_workload(world, settle(world), key)
    if args.output == "json":
        sys.stdout.write(msgspec.json.encode(explanation).decode() + "\n")
    else:
        sys.stdout.write(render_text(explanation))
    return 1 if bad else 0


def _what_if(args: argparse.Namespace, runner: Runner) -> int:
    from kueued.ops.from_cluster import render, what_if
    if args.generator is not None or args.plot is not None or args.clock != "virtual":
        raise KueuedError("simulate --from-cluster takes change files only (no --generator, --plot or --clock)")
    changes, bad = _files(args.files)
    result = what_if(_live(args), changes, runner=runner, source=_source(args))
    if args.output == "json":
        sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    else:
        render(result)
    return 1 if bad or result.rejected else 0
