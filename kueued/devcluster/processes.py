"""Child processes that cannot outlive us: own session, log file, TERM then KILL.

Each server runs in a session (and so a process group) of its own, which keeps a
terminal's Ctrl-C from reaching it half-way through our own shutdown, and lets
:meth:`Child.stop` signal the whole group so nothing it spawned is left behind. Output
goes to a log file, never a pipe: a pipe nobody reads fills up and stalls the server.

Readiness is polled (an HTTP health endpoint has no event to wait on) against a
deadline, and every poll first checks that the processes are still alive, so a server
that dies at start-up fails in a fraction of a second, with the tail of its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from kueued.devcluster.errors import ControlPlaneError, log_tail

_POLL_S = 0.1


class Child:
    """One long-running server process."""

    def __init__(self, name: str, argv: Sequence[str], *, log: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"$ {' '.join(self.argv)}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def error(self, reason: str) -> ControlPlaneError:
        return ControlPlaneError(self.name, reason, log=self.log, tail=log_tail(self.log))

    def died(self) -> ControlPlaneError:
        code = self._proc.returncode if self._proc else None
        return self.error(f"exited with code {code} before it was ready")

    def stop(self, timeout: float) -> None:
        """SIGTERM the process group, wait up to ``timeout`` seconds, then SIGKILL it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1; a server may still lose a race for it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def lost_port_race(child: Child) -> bool:
    return "address already in use" in log_tail(child.log, lines=60)


def http_ok(url: str, *, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    """Whether GET ``url`` answers 200; any error (refused, 500, TLS not up yet) is a no."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as response:
            response.read()
            return response.status == 200
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def wait_until(ready: Callable[[], bool], *, watch: Sequence[Child], timeout: float, what: str) -> None:
    """Poll ``ready`` until it holds; raise if a watched child dies or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        for child in watch:
            if not child.alive():
                raise child.died()
        if ready():
            return
        if time.monotonic() > deadline:
            raise watch[-1].error(f"{what} not ready after {timeout:.0f}s")
        time.sleep(_POLL_S)
