"""What the daemon tells an operator when something is off: unreadable files and directories
(once per change), why workloads wait and why queues are inactive, pending counts."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import yaml
from structlog.testing import capture_logs

from actors.daemon import run_daemon
from kueued.kube.port import InMemoryPort
from kueued.metrics import Metrics
from tests.actors.test_daemon import _first_settle
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload


def _write(path: Path, docs: list[dict]) -> None:
    path.write_text(yaml.safe_dump_all(docs))


def _run(directory: Path, *, settles: int, between=None, metrics: Metrics | None = None) -> list[dict]:
    """Run the daemon until it settled ``settles`` times; ``between(n)`` runs after the n-th settle."""
    count = 0

    def settled(coord) -> None:
        nonlocal count
        count += 1
        if between is not None:
            between(count)
        if count >= settles:
            scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(20) as scope:
            await run_daemon(directory, InMemoryPort(), interval=0.01, on_settled=settled, handle_signals=False,
                             metrics=metrics)

    scope: anyio.CancelScope
    with capture_logs() as logs:
        anyio.run(main)
    return logs


def _events(logs: list[dict], name: str) -> list[dict]:
    return [e for e in logs if e["event"] == name]


def _tree(tmp_path: Path, *, strategy: str = "BestEffortFIFO") -> None:
    _write(tmp_path / "queues.yaml", [namespace("ns"), flavor("default"),
                                      cluster_queue("cq", quotas("default", cpu="2"), strategy=strategy),
                                      local_queue("lq", "ns", "cq")])


def test_each_pending_reason_is_logged_once_with_the_numbers(tmp_path: Path) -> None:
    _tree(tmp_path)
    _write(tmp_path / "jobs.yaml", [workload("a", "ns", "lq", created=1, cpu="2"),
                                    workload("b", "ns", "lq", created=2, cpu="1")])

    def touch(n: int) -> None:  # an unrelated change: new rounds, the same verdict for b
        if n == 1:
            _write(tmp_path / "other.yaml", [namespace("other")])

    logs = _run(tmp_path, settles=2, between=touch)
    pending = _events(logs, "workload_pending")
    assert [e["workload"] for e in pending] == ["ns/b"]
    assert pending[0]["cluster_queue"] == "cq"
    assert "cpu 2 used + 1 requested > 2 quota" in pending[0]["reason"]
    assert pending[0]["log_level"] == "info"


def test_an_inactive_queue_is_logged_when_it_turns_inactive_and_active_again(tmp_path: Path) -> None:
    _write(tmp_path / "queues.yaml", [namespace("ns"), cluster_queue("cq", quotas("gpu", cpu="2")),
                                      local_queue("lq", "ns", "cq")])

    def add_flavor(n: int) -> None:
        if n == 1:
            _write(tmp_path / "flavor.yaml", [flavor("gpu")])

    logs = _run(tmp_path, settles=2, between=add_flavor)
    inactive = _events(logs, "cluster_queue_inactive")
    assert len(inactive) == 1 and "flavor(s) gpu not found" in inactive[0]["reason"]
    assert [e["cluster_queue"] for e in _events(logs, "cluster_queue_active")] == ["cq"]


def test_a_cohort_chain_past_the_depth_limit_is_an_inactive_reason_not_a_crash(tmp_path: Path) -> None:
    chain = [cohort(f"c{i}", parent=f"c{i - 1}" if i else "") for i in range(200)]
    _write(tmp_path / "tree.yaml", [namespace("ns"), flavor("default"), *chain,
                                    cluster_queue("deep", quotas("default", cpu="2"), cohort="c199"),
                                    local_queue("lq", "ns", "deep"), workload("a", "ns", "lq", cpu="1")])
    logs = _run(tmp_path, settles=1)
    (inactive,) = _events(logs, "cluster_queue_inactive")
    assert "at level 200" in inactive["reason"] and "at most 64 levels" in inactive["reason"]


def test_pending_workloads_of_a_strict_fifo_queue_are_all_counted(tmp_path: Path) -> None:
    _tree(tmp_path, strategy="StrictFIFO")
    _write(tmp_path / "jobs.yaml", [workload("a", "ns", "lq", created=1, cpu="3"),
                                    workload("b", "ns", "lq", created=2, cpu="1")])
    metrics = Metrics()
    _run(tmp_path, settles=1, metrics=metrics)
    sample = metrics.registry.get_sample_value
    waiting = sum(sample("kueue_pending_workloads", {"cluster_queue": "cq", "status": s}) for s in
                  ("active", "inadmissible"))
    assert waiting == 2  # a never fits and b waits behind it
    assert sample("kueue_admitted_active_workloads", {"cluster_queue": "cq"}) == 0


def test_unreadable_files_are_reported_once_per_change_and_the_rest_is_read(tmp_path: Path) -> None:
    _tree(tmp_path)
    _write(tmp_path / "jobs.yaml", [workload("a", "ns", "lq", cpu="1")])
    (tmp_path / "broken.yaml").write_bytes(b"kind: Namespace\nmetadata: {name: caf\xe9}\n")
    os.symlink(tmp_path / "gone.yaml", tmp_path / "dangling.yaml")
    os.symlink(tmp_path / "gone.yaml", tmp_path / ".#queues.yaml")  # an editor's lock file: not a manifest
    (tmp_path / "queues.yaml~").write_text("kind: [")                # a backup: not a manifest either

    def fix(n: int) -> None:
        if n == 2:
            (tmp_path / "broken.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: cafe}\n")

    logs = _run(tmp_path, settles=4, between=lambda n: (fix(n), _write(tmp_path / f"n{n}.yaml", [namespace(f"n{n}")])))
    unreadable = _events(logs, "manifest_unreadable")
    assert sorted(Path(e["file"]).name for e in unreadable) == ["broken.yaml", "dangling.yaml"]
    assert "not UTF-8" in next(e["error"] for e in unreadable if e["file"].endswith("broken.yaml"))
    assert "dangling symlink" in next(e["error"] for e in unreadable if e["file"].endswith("dangling.yaml"))
    assert [Path(e["file"]).name for e in _events(logs, "manifest_readable")] == ["broken.yaml"]
    assert [e["workload"] for e in _events(logs, "workload_admitted")] == ["ns/a"]


def test_a_directory_that_cannot_be_listed_is_a_warning_and_deletes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "m"
    directory.mkdir()
    _tree(directory)
    _write(directory / "jobs.yaml", [workload("a", "ns", "lq", cpu="1")])
    moved = tmp_path / "elsewhere"
    settles = 0

    def settled(coord) -> None:
        nonlocal settles
        settles += 1
        if settles == 1:
            directory.rename(moved)  # cannot be listed (a chmod 000 one would still be read by root)
        else:
            scope.cancel()

    async def put_back(logs: list[dict]) -> None:
        while not _events(logs, "manifest_unreadable"):  # the daemon noticed; nothing else is due
            await anyio.sleep(0.01)
        moved.rename(directory)
        _write(directory / "x.yaml", [namespace("x")])

    async def main(logs: list[dict]) -> None:
        nonlocal scope
        with anyio.fail_after(20) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(put_back, logs)
                await run_daemon(directory, InMemoryPort(), interval=0.01, on_settled=settled, handle_signals=False)

    scope: anyio.CancelScope
    with capture_logs() as logs:
        anyio.run(main, logs)
    (warning,) = _events(logs, "manifest_unreadable")
    assert "cannot be read" in warning["error"] and warning["file"] == str(directory)
    assert [e["workload"] for e in _events(logs, "workload_admitted")] == ["ns/a"]  # once: never deleted
    assert [e["file"] for e in _events(logs, "manifest_readable")] == [str(directory)]


def test_nothing_is_kept_for_deleted_workloads(tmp_path: Path) -> None:
    _tree(tmp_path)
    _write(tmp_path / "jobs.yaml", [workload(f"w{i}", "ns", "lq", created=i, cpu="2") for i in range(50)])
    kept: list[tuple[int, int]] = []

    def settled(coord) -> None:
        kept.append((len(coord.reasons), len(coord.unrouted)))
        if len(kept) == 1:
            (tmp_path / "jobs.yaml").unlink()
        else:
            scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(20) as scope:
            await run_daemon(tmp_path, InMemoryPort(), interval=0.01, on_settled=settled, handle_signals=False)

    scope: anyio.CancelScope
    anyio.run(main)
    assert kept == [(49, 0), (0, 0)]  # 49 reasons while they waited, none once they are gone


def test_an_eviction_caught_between_its_two_writes_is_resumed_at_start(tmp_path: Path) -> None:
    """A restart between eviction phase one (Evicted=True written) and phase two (reservation
    cleared): the daemon hands the workload back to the port to finish, before the first round."""
    _tree(tmp_path)
    victim = workload("v", "ns", "lq", cpu="1")
    victim["status"] = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
        "conditions": [{"type": t, "status": "True", "reason": r, "message": "Preempted to accommodate ns/x",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}
                       for t, r in (("QuotaReserved", "QuotaReserved"), ("Evicted", "Preempted"))]}
    _write(tmp_path / "jobs.yaml", [victim, workload("kept", "ns", "lq", cpu="1")])
    resumed: list[tuple[str, str]] = []

    class Port(InMemoryPort):
        def resume_eviction(self, workload: str, message: str) -> None:
            resumed.append((workload, message))

    placed: list[dict[str, str]] = []
    _first_settle(tmp_path, lambda coord: placed.append({k: p.cluster_queue for k, p in coord.world.placed.items()}),
                  Port())
    assert resumed == [("ns/v", "Preempted to accommodate ns/x")]
    # until its second phase lands the victim holds its quota where its status says
    assert placed[0] == {"ns/v": "cq", "ns/kept": "cq"}


def test_a_refusal_is_logged_once_however_often_the_version_comes_back(tmp_path: Path) -> None:
    _tree(tmp_path)
    bad = local_queue("lq-bad", "ns", "")
    _write(tmp_path / "bad.yaml", [bad])

    def touch(n: int) -> None:  # the refused version read again, as a status write's echo brings it
        bad["metadata"]["labels"] = {"read": str(n)}
        _write(tmp_path / "bad.yaml", [bad])
        _write(tmp_path / f"n{n}.yaml", [namespace(f"n{n}")])

    logs = _run(tmp_path, settles=3, between=touch)
    assert len(_events(logs, "object_rejected")) == 1
