"""SIGHUP: the running daemon reads its --config file again, changes what is safe in place, names what
needs a restart, and keeps its settings (and runs on) when the new file is bad."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

BASE = '[log]\nformat = "json"\nlevel = "{level}"\n[daemon]\ninterval = {interval}\n'


class _Log:
    """The daemon's stderr, one JSON event at a time, read by a thread (a test never blocks on a pipe)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        assert proc.stderr is not None
        stream = proc.stderr
        self.stream = stream
        self.reader = threading.Thread(target=lambda: [self.lines.put(json.loads(line)) for line in stream],
                                       daemon=True)
        self.reader.start()

    def close(self) -> None:
        self.reader.join(timeout=30)  # the pipe's end: the process is gone
        self.stream.close()

    def until(self, event: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            self.seen.append(got)
            if got["event"] == event:
                return got


@pytest.mark.timeout(120)
def test_sighup_reloads_what_is_safe_and_names_what_needs_a_restart(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "all.yaml").write_text(yaml.safe_dump_all([
        namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
        local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", cpu="1")]))
    config = tmp_path / "kueued.toml"
    config.write_text(BASE.format(level="INFO", interval=0.05))
    proc = subprocess.Popen([sys.executable, "-m", "kueued.cli", "run", "--manifests", str(manifests),
                             "--config", str(config)], stderr=subprocess.PIPE, text=True,
                            env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"})
    log = _Log(proc)
    try:
        log.until("daemon_ready")

        # safe settings change in place; the metrics port keeps its value until a restart
        config.write_text(BASE.format(level="INFO", interval=0.1)
                          + "[fair_sharing]\nenabled = true\n[metrics]\nport = 9464\n")
        proc.send_signal(signal.SIGHUP)
        reloaded = log.until("config_reloaded")
        assert reloaded["changed"] == {"daemon.interval": [0.05, 0.1], "fair_sharing.enabled": [False, True]}
        assert reloaded["file"] == str(config)
        assert log.until("config_restart_needed")["settings"] == ["metrics.port"]
        # the fair-sharing settings go through the World's door as a Configuration: one change, new rounds
        assert log.until("settled")["changes"] == 1

        # turning the log down: the reload itself is still logged, and then INFO is quiet
        config.write_text(BASE.format(level="WARNING", interval=0.1)
                          + "[fair_sharing]\nenabled = true\n[metrics]\nport = 9464\n")
        proc.send_signal(signal.SIGHUP)
        quiet = log.until("config_reloaded")
        assert quiet["changed"] == {"log.level": ["INFO", "WARNING"]}
        assert log.until("config_restart_needed")["settings"] == ["metrics.port"]  # still pending

        # a bad file: logged with its FILE:LINE, the running settings stay, the daemon runs on
        config.write_text(BASE.format(level="WARNING", interval=0.1) + "[metrics]\nprot = 1\n")
        proc.send_signal(signal.SIGHUP)
        invalid = log.until("config_invalid")
        assert f"{config}:7: metrics.prot: unknown key" in invalid["error"]
        between = log.seen[log.seen.index(quiet) + 1:-1]
        assert all(e["level"] != "info" for e in between)  # WARNING in force: INFO stayed out

        # and it still answers: the next good file is compared with the settings kept in force
        config.write_text(BASE.format(level="INFO", interval=0.1)
                          + "[fair_sharing]\nenabled = true\n[metrics]\nport = 9464\n")
        proc.send_signal(signal.SIGHUP)
        assert log.until("config_reloaded")["changed"] == {"log.level": ["WARNING", "INFO"]}
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    assert proc.returncode == 0
