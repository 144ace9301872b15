"""Hostile input through the daemon itself (``kueued run --manifests DIR``), fuzzed.

``test_fuzz_objects`` drives ``simulate``.  The daemon reads the same objects through more code:
it puts a first list's ElasticQuotas in creation order before validating them, tries refused
quotas again when quotas change, keeps a refused deletion in force, applies deletions, records
Events and works out statuses.  A malformed ElasticQuota once crashed that first list (labels
an integer: ``kueued.model.koordinator``'s readers were not total).

Each example writes the good set and a list of fuzzed objects (``test_fuzz_objects.OBJECTS``) to
a manifest directory, runs the offline daemon on it (``actors.daemon.run_daemon``, in-memory
port), and after it settles replaces them with a second fuzzed list
(so objects change, go, and refused ones are tried again), then removes them.  Properties:

- the daemon never stops on an exception (it settles three times and is cancelled, never fails);
- after each settled batch the good Workload holds its admission (its last commit is ``admit``).

``KUEUED_FUZZ_EXAMPLES`` (default 1,000) scales it: a daemon run costs about 25 ``simulate`` runs,
so this explores a 25th as many examples.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.daemon import run_daemon
from kueued.kube.port import InMemoryPort
from tests.builders import namespace
from tests.reliability.test_fuzz_objects import EXAMPLES, GOOD, GOOD_WL, OBJECTS

DAEMON_EXAMPLES = max(EXAMPLES // 25, 10)


def _last_commit(port: InMemoryPort, workload: str) -> str | None:
    kinds = [c.kind for c in port.log if c.workload == workload]
    return kinds[-1] if kinds else None


def _run(directory: Path, steps: list[Any], port: InMemoryPort) -> list[str | None]:
    """The daemon on ``directory``; after the n-th settled batch, the good Workload's last commit is
    noted and ``steps[n]`` runs; cancelled after the last."""
    seen: list[str | None] = []

    def on_settled(_coord: Any) -> None:
        seen.append(_last_commit(port, GOOD_WL))
        if len(seen) <= len(steps):
            steps[len(seen) - 1]()
        if len(seen) > len(steps):
            scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(30) as scope:
            await run_daemon(directory, port, interval=0.01, on_settled=on_settled, handle_signals=False)

    scope: anyio.CancelScope
    anyio.run(main)
    return seen


def test_fuzzed_objects_never_stop_the_daemon_and_the_good_workload_stays_admitted(tmp_path: Path) -> None:
    runs = [0]

    @settings(max_examples=DAEMON_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(first=st.lists(OBJECTS, min_size=1, max_size=8), then=st.lists(OBJECTS, min_size=1, max_size=8))
    def check(first: list[dict[str, Any]], then: list[dict[str, Any]]) -> None:
        runs[0] += 1
        directory = tmp_path / f"run-{runs[0]}"
        directory.mkdir()
        (directory / "good.yaml").write_text(yaml.safe_dump_all(copy.deepcopy(GOOD)))
        # a Namespace of its own in each phase: every step changes something, so the daemon settles again
        (directory / "fuzz-1.yaml").write_text(yaml.safe_dump_all([namespace("zz-phase-1"), *first]))

        def replace() -> None:
            (directory / "fuzz-2.yaml").write_text(yaml.safe_dump_all([namespace("zz-phase-2"), *then]))
            (directory / "fuzz-1.yaml").unlink()

        seen = _run(directory, [replace, (directory / "fuzz-2.yaml").unlink], InMemoryPort())
        assert seen == ["admit", "admit", "admit"], seen

    check()
    assert runs[0] >= DAEMON_EXAMPLES // 2  # it really explored
