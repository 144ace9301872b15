"""``systemd/kueued.service`` as systemd reads it: it verifies clean and rates 2.0 or lower.

``systemd-analyze verify`` loads the unit as the service manager would and also checks that
ExecStart's program exists and is executable; the unit names the installed path
(``/opt/kueued/.venv/bin/kueued``), absent here.  ``--root=DIR`` does not help (verify then
looks for sysinit.target and the rest of a system under DIR), nor does ``--man=no`` (it only
skips the Documentation= man pages).  So the test verifies a copy, named ``kueued.service``
(verify takes the unit's name from the file's), whose ExecStart names this venv's ``kueued``
script instead, and nothing else changed.  verify exits 0 even on an unknown key (it warns
and ignores it), so its output must be empty too.

``systemd-analyze security --offline=true`` rates the unit file itself, not a running service;
its last line is ``→ Overall exposure level for kueued.service: 1.1 OK``.

Without ``systemd-analyze`` (not Debian's ``systemd`` package) these tests skip, or fail under
``KUEUED_REQUIRE_CONTROL_PLANE=1``: CI installs the package (``.ci/run``) and must not pass by
skipping.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

UNIT = Path(__file__).parents[2] / "systemd" / "kueued.service"
INSTALLED = "/opt/kueued/.venv/bin/kueued"
MAX_EXPOSURE = 2.0


@pytest.fixture
def analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        why = "systemd-analyze is not installed (Debian package `systemd`)"
        if os.environ.get("KUEUED_REQUIRE_CONTROL_PLANE") == "1":
            pytest.fail(f"KUEUED_REQUIRE_CONTROL_PLANE=1, but {why}")
        pytest.skip(why)
    return found


def _here(tmp_path: Path) -> Path:
    """A copy of the unit whose ExecStart runs this venv's kueued (verify wants it executable)."""
    script = Path(sys.executable).parent / "kueued"
    assert os.access(script, os.X_OK), f"{script}: the venv's kueued script (pip install -e .)"
    text = UNIT.read_text()
    assert text.count(INSTALLED) == 1, "ExecStart runs the installed kueued, once"
    copy = tmp_path / "kueued.service"
    copy.write_text(text.replace(INSTALLED, str(script)))
    return copy


def test_the_unit_verifies_clean(analyze: str, tmp_path: Path) -> None:
    done = subprocess.run([analyze, "verify", str(_here(tmp_path))], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout + done.stderr == "", "verify warned (an unknown or misspelt key?)"


def test_the_unit_is_hardened_to_an_exposure_of_2_or_lower(analyze: str) -> None:
    done = subprocess.run([analyze, "security", "--offline=true", "--no-pager", str(UNIT)], capture_output=True,
                          text=True, timeout=60)
    overall = re.search(r"Overall exposure level for kueued\.service: (\d+\.\d+)", done.stdout)
    assert overall is not None, done.stdout[-2000:] + done.stderr
    assert float(overall.group(1)) <= MAX_EXPOSURE, done.stdout


def test_systemd_is_told_what_the_daemon_will_tell_it() -> None:
    """The unit's promises that systemd-analyze cannot check: they match the daemon's behaviour."""
    settings = dict(line.split("=", 1) for line in UNIT.read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    assert settings["Type"] == "notify" and settings["NotifyAccess"] == "main"
    from actors.daemon import STOP_GRACE
    # a pass in flight (STOP_GRACE), the Job controller's drain (5 s), the lease release (the lease
    # duration, 15 s by default): all before systemd's SIGKILL
    assert _seconds(settings["TimeoutStopSec"]) > STOP_GRACE + 5 + 15
    assert _seconds(settings["WatchdogSec"]) >= 10  # kueued pings every half of it, from its loop


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|min)?", value)
    assert match is not None, value
    return int(match.group(1)) * (60 if match.group(2) == "min" else 1)


_MDWE = """import ctypes, os, sys
# PR_SET_MDWE (Linux 6.3+), PR_MDWE_REFUSE_EXEC_GAIN: what MemoryDenyWriteExecute= sets, kept across exec
if ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0) != 0:
    sys.exit(77)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def test_kueued_runs_where_no_memory_may_be_writable_and_executable(tmp_path: Path) -> None:
    """MemoryDenyWriteExecute=yes: the offline daemon starts (READY=1) under the kernel's own
    W^X switch, which systemd's seccomp filter matches (CPython maps no W+X memory without a JIT)."""
    from tests.ops.test_notify import Listener, _manifests
    listener = Listener(tmp_path / "notify")
    try:
        with (tmp_path / "log").open("w") as log:
            proc = subprocess.Popen([sys.executable, "-c", _MDWE, "-m", "kueued.cli", "run", "--manifests",
                                     str(_manifests(tmp_path / "manifests"))],
                                    env={**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify")},
                                    stdout=log, stderr=log)
        try:
            message = listener.next()
        except TimeoutError:
            if proc.poll() == 77:
                pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3+)")
            raise AssertionError((tmp_path / "log").read_text()[-3000:]) from None
        assert message[0] == "READY=1", (tmp_path / "log").read_text()[-3000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        listener.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
