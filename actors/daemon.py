"""The long-running daemon: actors started once, objects streaming in, rounds on change.

One root task group holds every actor and two tasks: the *source* (a manifest
directory polled every ``interval`` seconds until the Kubernetes layer's watches
replace it) feeds apply/delete events to the coordinator, and after each batch the
coordinator runs rounds to quiescence.  Decisions leave through the API port and are
logged as structlog events.  systemd is told READY once every actor has started, and
STOPPING when the task group is cancelled (SIGTERM).
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog

from actors.coordinator import Coordinator
from kueued.kube.port import ApiPort, InMemoryPort
from kueued.metrics import Metrics
from kueued.scheduling.run import make_iterate, make_preemptor
from kueued.sources import ManifestDirectory
from kueued.world import World

__all__ = ["run_daemon", "sd_notify"]

log = structlog.get_logger("kueued.daemon")


def sd_notify(state: str) -> bool:
    """Tell systemd (Type=notify) about our state; a no-op outside systemd."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(addr)
        s.sendall(state.encode())
    return True


async def run_daemon(manifests: Path, port: ApiPort, *, interval: float = 2.0,
                     on_settled: Callable[[Coordinator], None] | None = None,
                     handle_signals: bool = True, metrics: Metrics | None = None) -> None:
    world = World()
    source = ManifestDirectory(manifests)
    async with anyio.create_task_group() as tg:
        coord = Coordinator(world, port, preemptor=make_preemptor, iterate=make_iterate(world))
        await coord.sync_topology(tg)
        if handle_signals:
            tg.start_soon(_stop_on_signal, tg.cancel_scope)
        sd_notify("READY=1")
        log.info("daemon_ready", manifests=str(manifests))
        try:
            while True:
                changed = 0
                for verb, manifest in source.scan():
                    change = await (coord.apply(manifest, tg) if verb == "apply" else coord.delete(manifest, tg))
                    changed += 1
                    key = f"{manifest.get('kind')}/{(manifest.get('metadata') or {}).get('name')}"
                    if key in world.rejected or change.value == "rejected":
                        log.warning("object_rejected", object=key, reason=world.rejected.get(key, ""))
                for path, why in source.errors.items():
                    log.warning("manifest_unreadable", file=str(path), error=why)
                if changed:
                    rounds = await coord.run_to_quiescence()
                    log.info("settled", changes=changed, rounds=rounds)
                    if metrics is not None:
                        metrics.rounds.inc(rounds)
                        metrics.observe_queues(a.sample() for a in coord.cluster_queues.values())
                        if isinstance(port, InMemoryPort):
                            metrics.observe_commits(port.log)
                    if on_settled is not None:
                        on_settled(coord)
                await anyio.sleep(interval)
        finally:
            sd_notify("STOPPING=1")
            coord.stop()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("daemon_stopping", signal=signal.Signals(signum).name)
            scope.cancel()
            return
