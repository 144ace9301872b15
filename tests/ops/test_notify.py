"""The sd_notify protocol over a real datagram socket, the daemon as its own process and in this one.

A test binds an AF_UNIX SOCK_DGRAM socket in its tmp_path, points ``NOTIFY_SOCKET`` at it, as
systemd does for a ``Type=notify`` service, and reads what arrives; every read has a deadline
(the socket's timeout), never a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from structlog.testing import capture_logs

from actors.daemon import run_daemon
from kueued.kube.port import InMemoryPort
from kueued.notify import Notifier, sd_notify
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

DEADLINE = 20.0
"""Seconds the whole exchange may take on a busy two-core machine (it takes well under one)."""


class Listener:
    """systemd's end: the socket, and the datagrams read from it, each a list of ``KEY=value`` lines."""

    def __init__(self, path: Path | str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.seen: list[list[str]] = []

    def next(self, timeout: float = DEADLINE) -> list[str]:
        self.sock.settimeout(timeout)
        message = self.sock.recv(4096).decode().splitlines()
        self.seen.append(message)
        return message

    def until(self, line: str, timeout: float = DEADLINE) -> list[str]:
        """Read until a datagram holds ``line``; that datagram."""
        end = time.monotonic() + timeout
        while True:
            message = self.next(max(0.01, end - time.monotonic()))
            if line in message:
                return message

    def pending(self) -> list[list[str]]:
        """What has arrived and not been read, without waiting."""
        out = []
        self.sock.setblocking(False)
        try:
            while True:
                out.append(self.sock.recv(4096).decode().splitlines())
        except BlockingIOError:
            return out

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Listener]:
    listening = Listener(tmp_path / "notify")
    yield listening
    listening.close()


def _manifests(root: Path) -> Path:
    """One ClusterQueue with 2 CPUs and three 1-CPU workloads: 2 admitted, 1 pending."""
    root.mkdir()
    docs = [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
            local_queue("lq", "ns", "cq"), *(workload(n, "ns", "lq", created=i, cpu="1") for i, n in enumerate("abc"))]
    (root / "all.yaml").write_text(yaml.safe_dump_all(docs))
    return root


def _daemon(tmp_path: Path, listener: Listener, *, interval: str = "30", **env: str) -> subprocess.Popen[str]:
    with (tmp_path / "log").open("w") as log:  # the child writes to its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "kueued.cli", "--log-format", "json", "--log-level", "INFO", "run",
             "--manifests", str(_manifests(tmp_path / "manifests")), "--interval", interval],
            env={**os.environ, "NOTIFY_SOCKET": listener.sock.getsockname(), **env},
            stdout=log, stderr=log, text=True)  # the JSON log, wherever it goes


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "log").read_text().splitlines() if line.startswith("{")]


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=DEADLINE)


def test_ready_comes_once_the_first_load_is_applied_and_stopping_on_sigterm(tmp_path: Path,
                                                                            listener: Listener) -> None:
    proc = _daemon(tmp_path, listener)
    try:
        first = listener.next()
        assert first == ["READY=1", "STATUS=leader: 1 cluster queues, 1 pending, 2 admitted"]
        events = [e["event"] for e in _events(tmp_path)]
        # READY after the first load is decided: its rounds and both admissions are in the log already
        assert events.count("workload_admitted") == 2 and "settled" in events
        proc.send_signal(signal.SIGTERM)  # mid-run: idle, waiting for the next scan (30 s away)
        started = time.monotonic()
        assert listener.until("STOPPING=1") == ["STOPPING=1"]
        assert proc.wait(timeout=DEADLINE) == 0
        assert time.monotonic() - started < 5  # the idle wait is cut short, not waited out
    finally:
        _stop(proc)
    assert not any(m == ["WATCHDOG=1"] for m in listener.seen)  # systemd did not ask for it (no WATCHDOG_USEC)
    stopping = [e for e in _events(tmp_path) if e["event"] == "daemon_stopping"]
    assert [e["signal"] for e in stopping] == ["SIGTERM"]


def test_the_watchdog_is_pinged_every_half_period_even_when_idle(tmp_path: Path, listener: Listener) -> None:
    # --interval 30: without the watchdog the loop would wait 30 s between passes; 0.4 s asks for a
    # ping every 0.2 s, so three arrive within seconds
    proc = _daemon(tmp_path, listener, WATCHDOG_USEC="400000")
    try:
        listener.until("READY=1")
        started = time.monotonic()
        for _ in range(3):
            assert listener.next(timeout=10) == ["WATCHDOG=1"]
        assert time.monotonic() - started < 10
    finally:
        assert _stop(proc) == 0


def test_a_watchdog_meant_for_another_process_is_not_pinged(tmp_path: Path, listener: Listener) -> None:
    notifier = Notifier({"NOTIFY_SOCKET": listener.sock.getsockname(), "WATCHDOG_USEC": "1000000",
                         "WATCHDOG_PID": str(os.getpid() + 1)})
    assert notifier.ping_every is None and notifier.watchdog() is False
    mine = Notifier({"NOTIFY_SOCKET": listener.sock.getsockname(), "WATCHDOG_USEC": "1000000",
                     "WATCHDOG_PID": str(os.getpid())})
    assert mine.ping_every == 0.5 and mine.watchdog() is True
    assert listener.next() == ["WATCHDOG=1"]
    notifier.close()
    mine.close()


@pytest.mark.parametrize("env", [
    pytest.param({}, id="no-socket"),
    pytest.param({"NOTIFY_SOCKET": "vsock:2:1234"}, id="not-a-unix-socket"),
    pytest.param({"NOTIFY_SOCKET": "/nonexistent/notify", "WATCHDOG_USEC": "x"}, id="gone-and-bad-watchdog"),
])
def test_a_notifier_outside_systemd_or_with_a_broken_socket_never_raises(env: dict[str, str]) -> None:
    notifier = Notifier(env)
    with capture_logs() as logs:
        assert notifier.ready("status") is False and notifier.watchdog() is False and notifier.stopping() is False
    notifier.close()
    assert notifier.ping_every is None
    # a socket that is gone: said once, not at every pass
    assert len(logs) == (1 if env.get("NOTIFY_SOCKET", "").startswith("/") else 0)


def test_an_abstract_socket_is_named_with_an_at_sign(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"kueued-test-{uuid.uuid4().hex}"
    listening = Listener("\0" + name)
    try:
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert sd_notify("STATUS=one\nREADY=1") is True
        assert listening.next() == ["STATUS=one", "READY=1"]
        notifier = Notifier()
        assert notifier.status("two") and not notifier.status("two")  # sent when it changes
        assert listening.next() == ["STATUS=two"]
        notifier.close()
    finally:
        listening.close()


class WedgingPort(InMemoryPort):
    """Its status flush hangs once ``wedge`` is set, until ``unwedge``: a loop stuck on a write."""

    def __init__(self) -> None:
        super().__init__()
        self.wedged = anyio.Event()
        self.unwedge = anyio.Event()
        self.wedge = False

    async def flush_pending(self, *, busy=None) -> None:
        if self.wedge:
            self.wedged.set()
            await self.unwedge.wait()
            self.wedge = False
        await super().flush_pending()


def test_a_wedged_loop_stops_pinging_the_watchdog(tmp_path: Path, listener: Listener) -> None:
    """The pings come from the loop itself: stuck in a pass, it sends none, however long it waits
    (a timer task of its own would have kept pinging); unstuck, the pings resume."""
    period = 0.2  # a ping every 0.1 s while the loop runs
    manifests = _manifests(tmp_path / "manifests")
    notifier = Notifier({"NOTIFY_SOCKET": listener.sock.getsockname(), "WATCHDOG_USEC": str(int(period * 1e6))})
    port = WedgingPort()
    quiet: list[list[str]] = []
    resumed: list[str] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_daemon(manifests, port, interval=0.05, handle_signals=False,
                                             notifier=notifier))
            await anyio.to_thread.run_sync(listener.until, "WATCHDOG=1")  # running, and pinging
            port.wedge = True
            (manifests / "more.yaml").write_text(yaml.safe_dump(workload("d", "ns", "lq", created=9, cpu="1")))
            with anyio.fail_after(DEADLINE):
                await port.wedged.wait()
            listener.pending()  # whatever was sent before the wedge
            # five watchdog periods stuck: systemd would have killed it four periods ago
            await anyio.sleep(5 * period)
            quiet.extend(listener.pending())
            port.unwedge.set()
            resumed.extend(await anyio.to_thread.run_sync(listener.until, "WATCHDOG=1"))
            tg.cancel_scope.cancel()

    anyio.run(main)
    notifier.close()
    assert quiet == []
    assert resumed == ["WATCHDOG=1"]
