"""SIGTERM stops the daemon's loop gracefully: no new work, the commit in flight answered, exit 0.

In this process: ``run_daemon`` with its own signal handling, a port whose first admission
waits until the test lets it go, and a real SIGTERM sent to this process while it waits.
(The daemon as its own process, and its STOPPING=1, are in ``test_notify``; the Lease given up
on a real API server in ``tests/integration/test_shutdown_api``.)
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import yaml
from structlog.testing import capture_logs

from actors.daemon import run_daemon
from kueued.kube.port import InMemoryPort
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


class HeldPort(InMemoryPort):
    """Its first admission waits for ``go``: a commit in flight when the signal comes."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = anyio.Event()
        self.go = anyio.Event()

    async def admit(self, workload: str, **kw) -> bool:  # type: ignore[override]
        if not self.in_flight.is_set():
            self.in_flight.set()
            await self.go.wait()
        return await super().admit(workload, **kw)


def test_sigterm_lets_the_commit_in_flight_finish_and_takes_no_more_work(tmp_path: Path) -> None:
    # room for all three, one admitted per round: a stop after the first round leaves two waiting
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([
        namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="3")),
        local_queue("lq", "ns", "cq"), *(workload(n, "ns", "lq", created=i, cpu="1") for i, n in enumerate("abc"))]))
    port = HeldPort()
    returned = False

    async def main() -> None:
        nonlocal returned
        async with anyio.create_task_group() as tg:
            async def daemon() -> None:
                nonlocal returned
                await run_daemon(tmp_path, port, interval=5.0)
                returned = True
            tg.start_soon(daemon)
            with anyio.fail_after(20):
                await port.in_flight.wait()
                os.kill(os.getpid(), signal.SIGTERM)
                while not any(e["event"] == "daemon_stopping" for e in logs):
                    await anyio.sleep(0)  # checkpoints until the signal is handled: the stop is asked
                port.go.set()

    with capture_logs() as logs:
        anyio.run(main)
    assert returned  # ended by itself, not cancelled from outside
    assert [c.workload for c in port.log if c.kind == "admit"] == ["ns/a"]  # in flight: committed; then no more
    events = [e["event"] for e in logs]
    assert "daemon_stopping" in events and "daemon_stop_forced" not in events
