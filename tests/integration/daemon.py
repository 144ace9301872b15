"""``kueued run`` as its own process for the integration tests: authenticated as user ``kueued``
(bound only to the RBAC ``kueued manifests`` prints), JSON log lines kept in a file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


class Daemon:
    def __init__(self, cluster: Any, log_path: Path, *extra: str) -> None:
        self.cluster = cluster
        self.log_path = log_path
        self.extra = extra  # more `run` flags (--metrics-port ...)
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> Daemon:
        kubeconfig = self.cluster.user_kubeconfig("kueued")
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

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-lines:])
