"""SIGTERM on a real API server: the leader stops, gives its Lease up and exits 0, and a warm
follower takes over at its next try instead of a lease duration (15 s) later.

Both daemons are ``kueued run --leader-elect`` processes (``tests.integration.daemon``) on a Lease
of this test's own name; what each did is read from its JSON log, the Lease with kubectl.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.integration.daemon import Daemon

pytestmark = pytest.mark.control_plane

LEASE_DURATION = 15.0
"""The default: how long a follower would wait for a leader that died without releasing."""


def test_sigterm_releases_the_lease_and_a_follower_takes_over_at_once(installed: Any, tmp_path: Any) -> None:
    name = f"shutdown-{uuid.uuid4().hex[:8]}"
    elect = ("--leader-elect", "--leader-elect-name", name)
    leader = Daemon(installed, tmp_path / "leader.log", *elect, "--leader-elect-identity", "leader").start()
    follower = Daemon(installed, tmp_path / "follower.log", *elect, "--leader-elect-identity", "follower")
    try:
        leader.wait_for("leader_acquired", timeout=60)
        leader.wait_for("daemon_ready", timeout=60)
        follower.start()
        follower.wait_for("leader_observed", timeout=60, holder="leader")
        follower.wait_for("daemon_ready", timeout=60)

        started = time.monotonic()
        assert leader.stop() == 0
        assert time.monotonic() - started < 15  # well inside the unit's TimeoutStopSec
        spec = installed.kubectl_json("get", "lease", "-n", "kueued-system", name)["spec"]
        # released (no holder, a one-second lease), unless the follower's next try came first
        assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) in (("", 1), ("follower", 15)), spec

        acquired = follower.wait_for("leader_acquired", timeout=LEASE_DURATION)
        assert acquired["previous"] is None  # taken from a released Lease, not from an expired holder
        assert time.monotonic() - started < LEASE_DURATION
    finally:
        for daemon in (leader, follower):
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.stop()
    events = [e["event"] for e in leader.events()]
    assert "daemon_stopping" in events
    assert events.index("daemon_stopping") < events.index("leader_released")  # nothing commits when it is given up
    assert "daemon_stop_forced" not in events
