"""``kueued run`` as its own process for the integration tests: authenticated as user ``kueued``
(bound only to the RBAC ``kueued manifests`` prints) or another user the test binds the same way,
JSON log lines kept in a file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class Daemon:
    def __init__(self, cluster: Any, log_path: Path, *extra: str, user: str = "kueued",
                 kubeconfig: Path | None = None) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.extra = extra  # more `run` flags (--metrics-port ...)
        self.user = user    # whose client certificate: the API server's audit log names it
        self.kubeconfig = kubeconfig  # instead of the user's own (tests/reliability: the fault proxy's)
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> Daemon:
        kubeconfig = self.kubeconfig or self.cluster.user_kubeconfig(self.user)
        self.out = self.log_path.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kueued.cli", "--log-format", "json", "--log-level", "INFO", "run",
             "--kubeconfig", str(kubeconfig), "--interval", "0.2", *self.extra],
            stderr=self.out, stdout=subprocess.DEVNULL, text=True)
        return self

    def stop(self) -> int:
        """SIGTERM, and its exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self.out.close()
        return code

    def kill(self) -> None:
        """SIGKILL (kill -9): no handler runs, nothing is flushed or released."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)
        self.out.close()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-lines:])

    def wait_for(self, event: str, *, timeout: float, **fields: Any) -> dict[str, Any]:
        """The first logged ``event`` with these ``fields``, once it is written.

        Polled: another process's log has no event to wait on.  Fails at once if the daemon exits.
        """
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log_path.read_text().splitlines():
                try:
                    logged = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line, half written
                if logged.get("event") == event and all(logged.get(k) == v for k, v in fields.items()):
                    return dict(logged)
            if self.proc.poll() is not None:
                raise AssertionError(f"kueued exited ({self.proc.returncode}) before logging {event}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"kueued logged no {event} {fields or ''} within {timeout:g}s:\n{self.tail()}")
            time.sleep(0.05)
