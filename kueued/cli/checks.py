"""``kueued validate`` and ``kueued config check``: what would be refused, before anything runs.

``validate`` applies manifests to an empty World, which refuses what Kueue's and Koordinator's
webhooks would; ``config check`` decodes a settings file strictly and judges its lease timings.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kueued.logging import fail
from kueued.manifests import read_manifests

__all__ = ["validate", "config_check"]


def config_check(path: Path) -> int:
    """``kueued config check FILE``: a one-line summary (0), or each problem with its FILE:LINE (2)."""
    from kueued.config import ConfigError, line_of, load, summary
    from kueued.kube.lease_record import check_timings
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


def validate(args: argparse.Namespace) -> int:
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

