"""The daemon: objects appear, change and disappear in its manifest directory."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import yaml

from actors.daemon import EVENTS_KEPT, run_daemon, sd_notify
from kueued.kube.port import InMemoryPort
from kueued.metrics import Metrics
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def _write(path: Path, docs: list[dict]) -> None:
    path.write_text(yaml.safe_dump_all(docs))


def _first_settle(directory: Path, look: Callable[[Any], None], port: InMemoryPort | None = None) -> None:
    """Run the daemon on ``directory`` until its first settled pass, shown to ``look``."""
    def settled(coord: Any) -> None:
        look(coord)
        scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(20) as scope:
            await run_daemon(directory, port or InMemoryPort(), interval=0.01, on_settled=settled,
                             handle_signals=False)

    scope: anyio.CancelScope
    anyio.run(main)


def test_daemon_follows_its_manifest_directory(tmp_path: Path) -> None:
    _write(tmp_path / "queues.yaml", [namespace("ns"), flavor("default"),
                                      cluster_queue("cq", quotas("default", cpu="2")), local_queue("lq", "ns", "cq")])
    _write(tmp_path / "jobs.yaml", [workload("a", "ns", "lq", created=1, cpu="2"),
                                    workload("b", "ns", "lq", created=2, cpu="2")])
    port = InMemoryPort()
    metrics = Metrics()
    seen: list[set[str]] = []

    def settled(coord) -> None:
        seen.append(set(coord.world.placed))
        if len(seen) == 1:
            (tmp_path / "jobs.yaml").write_text(yaml.safe_dump_all([workload("b", "ns", "lq", created=2, cpu="2")]))
            (tmp_path / "broken.yaml").write_text("kind: [")
        elif len(seen) == 2:
            scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(20) as scope:
            await run_daemon(tmp_path, port, interval=0.01, on_settled=settled, handle_signals=False,
                             metrics=metrics)

    scope: anyio.CancelScope
    anyio.run(main)
    assert seen[0] == {"ns/a"}
    # a was deleted from the directory: its quota came back and b got in; the broken file changed nothing
    assert seen[1] == {"ns/b"}
    assert [c.workload for c in port.log if c.kind == "admit"] == ["ns/a", "ns/b"]
    sample = metrics.registry.get_sample_value
    assert sample("kueue_admitted_workloads_total", {"cluster_queue": "cq"}) == 2
    assert sample("kueue_admitted_active_workloads", {"cluster_queue": "cq"}) == 1
    assert sample("kueue_cluster_queue_resource_usage",
                  {"cohort": "", "cluster_queue": "cq", "flavor": "default", "resource": "cpu"}) == 2.0


def test_daemon_stamps_admissions_with_the_wall_clock(tmp_path: Path) -> None:
    _write(tmp_path / "all.yaml", [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
                                   local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", cpu="1")])
    stamps: list[float] = []
    bounds: list[int | None] = []

    def settled(coord) -> None:
        stamps.append(coord.world.placed["ns/a"].at)
        bounds.append(getattr(coord.events, "maxlen", None))

    before = time.time()
    _first_settle(tmp_path, settled)
    assert int(before) <= stamps[0] <= time.time()
    assert stamps[0] == int(stamps[0])  # whole seconds, as the API server keeps the condition's time
    assert bounds == [EVENTS_KEPT]  # a long-running daemon keeps only the latest decisions in memory


def test_sd_notify_is_a_no_op_outside_systemd(monkeypatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sd_notify("READY=1") is False


def test_a_long_backlog_pauses_its_rounds_to_read_the_source_and_resumes(tmp_path: Path) -> None:
    from structlog.testing import capture_logs
    # a..e are admitted one per round (a queue admits one head a cycle).  The injected clock moves a
    # whole interval at every read, so the rounds pause after each one, as a backlog longer than the
    # interval would.
    _write(tmp_path / "all.yaml", [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="5")),
                                   local_queue("lq", "ns", "cq"),
                                   *(workload(n, "ns", "lq", created=i, cpu="1") for i, n in enumerate("abcde"))])
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]
    settled: list[tuple[set[str], int]] = []

    def on_settled(coord) -> None:
        settled.append((set(coord.world.placed), coord.rounds))
        scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(20) as scope:
            await run_daemon(tmp_path, InMemoryPort(), interval=0.5, on_settled=on_settled, handle_signals=False,
                             clock=clock)

    scope: anyio.CancelScope
    with capture_logs() as logs:
        anyio.run(main)
    paused = [e for e in logs if e["event"] == "rounds_paused"]
    assert all(e["rounds"] == 1 for e in paused) and len(paused) >= 4
    assert settled == [({f"ns/{n}" for n in "abcde"}, len(paused) + 1)]  # observers see only the quiescent state


def test_a_first_load_rebuilds_the_tree_once_and_its_workloads_still_land(tmp_path: Path, monkeypatch) -> None:
    """Forty queues, their LocalQueues and a workload each arrive in one batch: the tree is
    rebuilt once for the batch (each rebuild passes over every queue: one per object made a
    large first list quadratic), and every workload, applied between queues that did not yet
    exist as actors, is admitted where its LocalQueue routes."""
    from actors.coordinator import Coordinator
    docs: list[dict] = [namespace("ns"), flavor("default")]
    for i in range(40):
        docs += [cluster_queue(f"cq{i}", quotas("default", cpu="1")), local_queue(f"lq{i}", "ns", f"cq{i}"),
                 workload(f"w{i}", "ns", f"lq{i}", cpu="1")]
    _write(tmp_path / "all.yaml", docs)
    rebuilds = []
    real = Coordinator.sync_topology

    async def counted(self, tg) -> None:
        rebuilds.append(len(self.world.cluster_queues))
        await real(self, tg)

    monkeypatch.setattr(Coordinator, "sync_topology", counted)
    admitted: list[dict[str, str | None]] = []

    _first_settle(tmp_path, lambda coord: admitted.append(
        {k: p.cluster_queue for k, p in coord.world.placed.items()}))
    assert admitted[0] == {f"ns/w{i}": f"cq{i}" for i in range(40)}
    assert rebuilds == [0, 40]  # at start (nothing loaded yet), then once for the whole batch
