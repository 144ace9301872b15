"""Metrics with Kueue's names, read as Prometheus reads them, and the health endpoints.

The daemon runs offline on a manifest directory (``run_daemon`` with an ``InMemoryPort``); the
registry is rendered (``generate_latest``) and parsed back with Prometheus' text parser, and
the values are checked against what happened.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actors.daemon import run_daemon
from kueued.health import STALE_AFTER, Health, HealthServer, stale_after
from kueued.kube.commits import KubePort
from kueued.kube.port import InMemoryPort
from kueued.metrics import WAIT_BUCKETS, Metrics, build_labels
from kueued.metrics_recorder import DecisionRecorder
from kueued.native import compiled
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

OWN = {"kueued_commit_duration_seconds", "kueued_watch_restarts", "kueued_watch_relists", "kueued_leader",
       "kueued_actor_mailbox_depth", "kueued_scheduling_rounds"}


def scrape(metrics: Metrics) -> tuple[set[str], Samples]:
    """(family names, every sample by name and labels), through Prometheus' text format."""
    text = generate_latest(metrics.registry).decode()
    families = list(text_string_to_metric_families(text))
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples}
    return {f.name for f in families}, samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _write(path: Path, docs: list[dict]) -> None:
    """Whole or not at all: the daemon polls the directory while the test writes."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump_all(docs))
    os.replace(tmp, path)


def _stamp(seconds_ago: float) -> str:
    return datetime.fromtimestamp(time.time() - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(directory: Path, metrics: Metrics, *, settles: int, between: Callable[[int], None] | None = None,
         health: Health | None = None, port: InMemoryPort | None = None) -> None:
    """The offline daemon until it settled ``settles`` times; ``between(n)`` runs after the n-th settle."""
    count = 0

    def settled(coord: Any) -> None:
        nonlocal count
        count += 1
        if between is not None:
            between(count)
        if count >= settles:
            scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(20) as scope:
            await run_daemon(directory, port or InMemoryPort(), interval=0.01, on_settled=settled,
                             handle_signals=False, metrics=metrics, health=health)

    scope: anyio.CancelScope
    anyio.run(main)
    assert count == settles


def _cohort_tree(tmp_path: Path) -> None:
    """cq-a and cq-b lend to each other in cohort co; cq-b reclaims what it lent."""
    _write(tmp_path / "queues.yaml", [
        namespace("ns"), flavor("default"),
        cluster_queue("cq-a", quotas("default", cpu="2"), cohort="co"),
        cluster_queue("cq-b", quotas("default", cpu=("2", "1", "2")), cohort="co",
                      preemption={"reclaimWithinCohort": "Any"}),
        local_queue("lq-a", "ns", "cq-a"), local_queue("lq-b", "ns", "cq-b")])


def test_admissions_preemptions_and_quotas_read_as_kueue_names_them(tmp_path: Path) -> None:
    _cohort_tree(tmp_path)
    _write(tmp_path / "a.yaml", [workload("a1", "ns", "lq-a", cpu="4")])  # borrows cq-b's 2
    b1 = workload("b1", "ns", "lq-b", cpu="2")
    b1["metadata"]["creationTimestamp"] = _stamp(100)
    metrics = Metrics()
    port = InMemoryPort()

    def between(n: int) -> None:
        if n == 1:  # a1 runs on borrowed quota: b1 comes for it
            _write(tmp_path / "b.yaml", [b1])

    _run(tmp_path, metrics, settles=2, port=port, between=between)
    assert [(c.kind, c.workload) for c in port.log] == [("admit", "ns/a1"), ("evict", "ns/a1"), ("admit", "ns/b1")]
    names, s = scrape(metrics)
    # (``*_created`` is prometheus-client's; ``kueued run`` turns it off, as Kueue's Go client has none)
    assert {n.removesuffix("_created") for n in names if not n.startswith("kueue_")} == OWN
    assert value(s, "kueue_admitted_workloads_total", cluster_queue="cq-a") == 1
    assert value(s, "kueue_admitted_workloads_total", cluster_queue="cq-b") == 1
    assert value(s, "kueue_quota_reserved_workloads_total", cluster_queue="cq-b") == 1
    # the victim's queue counts the eviction; the preemptor's queue counts the preemption
    assert value(s, "kueue_evicted_workloads_total", cluster_queue="cq-a", reason="Preempted",
                 underlying_cause="") == 1
    assert value(s, "kueue_preempted_workloads_total", preempting_cluster_queue="cq-b",
                 reason="InCohortReclamation") == 1
    assert value(s, "kueue_preempted_workloads_total", preempting_cluster_queue="cq-a",
                 reason="InCohortReclamation") is None
    # a1 waits again, b1 runs
    assert sum(value(s, "kueue_pending_workloads", cluster_queue="cq-a", status=st) or 0
               for st in ("active", "inadmissible")) == 1
    assert value(s, "kueue_pending_workloads", cluster_queue="cq-b", status="active") == 0
    for name in ("kueue_admitted_active_workloads", "kueue_reserving_active_workloads"):
        assert value(s, name, cluster_queue="cq-a") == 0
        assert value(s, name, cluster_queue="cq-b") == 1
    fr = {"cohort": "co", "flavor": "default", "resource": "cpu"}
    for name in ("kueue_cluster_queue_resource_usage", "kueue_cluster_queue_resource_reservation"):
        assert value(s, name, cluster_queue="cq-a", **fr) == 0
        assert value(s, name, cluster_queue="cq-b", **fr) == 2
    assert value(s, "kueue_cluster_queue_nominal_quota", cluster_queue="cq-a", **fr) == 2
    assert value(s, "kueue_cluster_queue_borrowing_limit", cluster_queue="cq-a", **fr) == math.inf  # none set
    assert value(s, "kueue_cluster_queue_lending_limit", cluster_queue="cq-a", **fr) == math.inf
    assert value(s, "kueue_cluster_queue_borrowing_limit", cluster_queue="cq-b", **fr) == 1
    assert value(s, "kueue_cluster_queue_lending_limit", cluster_queue="cq-b", **fr) == 2
    assert [value(s, "kueue_cluster_queue_status", cluster_queue="cq-a", status=st)
            for st in ("pending", "active", "terminating")] == [0, 1, 0]
    # one admission each; b1 was created 100 s before it was admitted (Kueue's buckets: 80, 160)
    assert value(s, "kueue_admission_wait_time_seconds_count", cluster_queue="cq-a") == 1
    assert value(s, "kueue_admission_wait_time_seconds_count", cluster_queue="cq-b") == 1
    assert value(s, "kueue_admission_wait_time_seconds_bucket", cluster_queue="cq-b", le="80.0") == 0
    assert value(s, "kueue_admission_wait_time_seconds_bucket", cluster_queue="cq-b", le="160.0") == 1
    assert 100 <= (value(s, "kueue_admission_wait_time_seconds_sum", cluster_queue="cq-b") or 0) < 160
    # kueued's own
    assert value(s, "kueued_leader") == 1
    assert (value(s, "kueued_scheduling_rounds_total") or 0) >= 2
    assert value(s, "kueued_actor_mailbox_depth", actor="ClusterQueue/cq-a") == 0
    assert value(s, "kueued_actor_mailbox_depth", actor="Cohort/co") == 0


def settled_then_deleted(tmp_path: Path, metrics: Metrics, extra: list[dict]) -> list[Samples]:
    """The cohort tree and ``extra`` (in x.yaml) run to a settle, x.yaml deleted, run to the next: a
    scrape after each."""
    _cohort_tree(tmp_path)
    _write(tmp_path / "x.yaml", extra)
    seen: list[Samples] = []

    def between(n: int) -> None:
        seen.append(scrape(metrics)[1])
        if n == 1:
            (tmp_path / "x.yaml").unlink()

    _run(tmp_path, metrics, settles=2, between=between)
    return seen


def test_a_deleted_cluster_queue_leaves_no_series(tmp_path: Path) -> None:
    metrics = Metrics()
    seen = settled_then_deleted(tmp_path, metrics, [
        cluster_queue("cq-x", quotas("default", cpu="1")), local_queue("lq-x", "ns", "cq-x"),
        workload("x1", "ns", "lq-x", cpu="1"), workload("x2", "ns", "lq-x", cpu="1")])
    assert value(seen[0], "kueue_admitted_workloads_total", cluster_queue="cq-x") == 1
    assert value(seen[0], "kueue_pending_workloads", cluster_queue="cq-x", status="inadmissible") == 1
    assert any(dict(labels).get("cluster_queue") == "cq-x" for _, labels in seen[0])
    _, after = scrape(metrics)
    assert not [key for key in after if "cq-x" in dict(key[1]).values()]
    assert value(after, "kueue_cluster_queue_nominal_quota", cohort="co", cluster_queue="cq-a", flavor="default",
                 resource="cpu") == 2


def test_commit_counters_follow_the_ports_totals_and_timings_are_drained() -> None:
    metrics = Metrics()
    metrics.observe_commits({("admit", "cq", ""): 2, ("evict", "cq", "InClusterQueue"): 1})
    metrics.observe_commits({("admit", "cq", ""): 3, ("evict", "cq", "InClusterQueue"): 1,
                             ("evict", "cq", "DeactivatedDueToMaximumExecutionTimeExceeded"): 1,
                             ("evict", "cq", "LocalQueueStopped"): 2})
    metrics.observe_timings([("admit", 0.004), ("evict", 0.3)])
    metrics.observe_watches({"Workload": 2, "Node": 0}, {"Workload": 1})
    metrics.observe_watches({"Workload": 3, "Node": 0}, {"Workload": 1})
    _, s = scrape(metrics)
    assert value(s, "kueue_admitted_workloads_total", cluster_queue="cq") == 3
    assert value(s, "kueue_evicted_workloads_total", cluster_queue="cq", reason="Preempted",
                 underlying_cause="") == 1
    assert value(s, "kueue_evicted_workloads_total", cluster_queue="cq", reason="Deactivated",
                 underlying_cause="MaximumExecutionTimeExceeded") == 1  # a deactivation with its cause
    assert value(s, "kueue_evicted_workloads_total", cluster_queue="cq", reason="LocalQueueStopped",
                 underlying_cause="") == 2
    assert value(s, "kueued_commit_duration_seconds_count", kind="admit") == 1
    assert value(s, "kueued_commit_duration_seconds_bucket", kind="evict", le="0.25") == 0
    assert value(s, "kueued_commit_duration_seconds_bucket", kind="evict", le="0.5") == 1
    assert value(s, "kueued_watch_restarts_total", kind="Workload") == 3
    assert value(s, "kueued_watch_restarts_total", kind="Node") == 0  # every watched kind has its series
    assert value(s, "kueued_watch_relists_total", kind="Workload") == 1
    metrics.forget(set())  # no queue left: their counters go
    _, s = scrape(metrics)
    assert value(s, "kueue_admitted_workloads_total", cluster_queue="cq") is None
    assert value(s, "kueued_watch_restarts_total", kind="Workload") == 3


def test_a_gauge_shows_the_last_value_given_through_repeats_returns_and_removals() -> None:
    """The mailbox gauge skips values it already holds: what a scrape shows must still be the
    last report, whether a value repeats, moves back, or a series goes and comes back."""
    metrics = Metrics()
    reports = [{"ClusterQueue/a": 1, "ClusterQueue/b": 2}, {"ClusterQueue/a": 1, "ClusterQueue/b": 5},
               {"ClusterQueue/a": 1, "ClusterQueue/b": 2}, {"ClusterQueue/b": 2}, {"ClusterQueue/a": 1}]
    for depths in reports:
        metrics.observe_mailboxes(depths)
        _, s = scrape(metrics)
        for actor in ("ClusterQueue/a", "ClusterQueue/b"):
            assert value(s, "kueued_actor_mailbox_depth", actor=actor) == depths.get(actor)


def test_two_reclaims_of_one_victim_skip_the_second_and_waits_read_as_kueue_names_them(tmp_path: Path) -> None:
    """x1 borrows all of cq-b's and cq-c's quota; b1 and c1 come for it in one cycle.  b1 (older)
    preempts x1; c1's only target is x1 too: Kueue skips it and counts the skip for cq-c."""
    _write(tmp_path / "queues.yaml", [
        namespace("ns"), flavor("default"),
        cluster_queue("cq-x", quotas("default", cpu="0"), cohort="co"),
        *(cluster_queue(name, quotas("default", cpu="2"), cohort="co", preemption={"reclaimWithinCohort": "Any"})
          for name in ("cq-b", "cq-c")),
        *(local_queue(f"lq-{q}", "ns", f"cq-{q}") for q in "xbc")])
    _write(tmp_path / "x.yaml", [workload("x1", "ns", "lq-x", cpu="4")])
    b1, c1 = workload("b1", "ns", "lq-b", cpu="2"), workload("c1", "ns", "lq-c", cpu="2")
    b1["metadata"]["creationTimestamp"], c1["metadata"]["creationTimestamp"] = _stamp(100), _stamp(50)
    metrics, port = Metrics(), InMemoryPort()

    def between(n: int) -> None:
        if n == 1:  # x1 runs on what cq-b and cq-c lend
            _write(tmp_path / "bc.yaml", [b1, c1])

    _run(tmp_path, metrics, settles=2, port=port, between=between)
    assert [(c.kind, c.workload) for c in port.log] == [
        ("admit", "ns/x1"), ("evict", "ns/x1"), ("admit", "ns/b1"), ("admit", "ns/c1")]
    _, s = scrape(metrics)
    assert value(s, "kueue_admission_cycle_preemption_skips", cluster_queue="cq-c") == 1
    assert value(s, "kueue_admission_cycle_preemption_skips", cluster_queue="cq-b") is None  # never skipped
    assert value(s, "kueue_preempted_workloads_total", preempting_cluster_queue="cq-b",
                 reason="InCohortReclamation") == 1
    # no admission checks: each reservation is its admission, waited as long (b1: 100 s, Kueue's buckets)
    for name in ("kueue_quota_reserved_wait_time_seconds", "kueue_admission_wait_time_seconds"):
        assert value(s, f"{name}_count", cluster_queue="cq-x") == 1
        assert value(s, f"{name}_bucket", cluster_queue="cq-b", le="80.0") == 0
        assert value(s, f"{name}_bucket", cluster_queue="cq-b", le="160.0") == 1
        assert 50 <= (value(s, f"{name}_sum", cluster_queue="cq-c") or 0) < 80
    assert value(s, "kueue_quota_reserved_wait_time_seconds_sum", cluster_queue="cq-b") == \
        value(s, "kueue_admission_wait_time_seconds_sum", cluster_queue="cq-b")
    assert value(s, "kueue_evicted_workloads_once_total", cluster_queue="cq-x", reason="Preempted",
                 underlying_cause="") == 1


def test_an_eviction_counts_once_per_workload_reason_and_cause() -> None:
    """Kueue's ``workloadEvictionStateInc``: the first eviction of a workload with a (reason, underlying
    cause) counts in ``kueue_evicted_workloads_once_total``, a repeat only in ``..._total``; a workload
    deleted and made again starts over."""
    port, metrics = InMemoryPort(), Metrics()

    async def main() -> None:
        for reason in ("InClusterQueue", "InCohortReclamation"):  # two preemptions: Evicted reason Preempted
            await port.evict("ns/w", cluster_queue="cq", reason=reason, message="m")
        await port.evict("ns/w", cluster_queue="cq", reason="ClusterQueueStopped", message="m", preempted=False)
        await port.evict("ns/w", cluster_queue="cq", reason="DeactivatedDueToMaximumExecutionTimeExceeded",
                         message="m", preempted=False)
        await port.evict("ns/v", cluster_queue="cq", reason="InClusterQueue", message="m")
        port.forget("ns/v")
        await port.evict("ns/v", cluster_queue="cq", reason="InClusterQueue", message="m")

    anyio.run(main)
    metrics.observe_commits(port.counts)
    _, s = scrape(metrics)
    assert value(s, "kueue_evicted_workloads_total", cluster_queue="cq", reason="Preempted", underlying_cause="") == 4
    assert value(s, "kueue_evicted_workloads_once_total", cluster_queue="cq", reason="Preempted",
                 underlying_cause="") == 3  # w once, v twice (made again)
    assert value(s, "kueue_evicted_workloads_once_total", cluster_queue="cq", reason="ClusterQueueStopped",
                 underlying_cause="") == 1
    assert value(s, "kueue_evicted_workloads_once_total", cluster_queue="cq", reason="Deactivated",
                 underlying_cause="MaximumExecutionTimeExceeded") == 1
    metrics.forget(set())
    _, s = scrape(metrics)
    assert not [key for key in s if key[0].startswith("kueue_evicted_workloads_once")]


def test_the_kube_port_counts_an_eviction_once_from_the_workloads_scheduling_stats() -> None:
    """On a cluster the count survives a restart: it is the Workload's ``status.schedulingStats``."""
    seen = workload("w", "ns", "lq", cpu="1")
    seen["status"] = {"schedulingStats": {"evictions": [{"reason": "Preempted", "count": 1}]}}
    manifests = {"ns/w": seen, "ns/v": workload("v", "ns", "lq", cpu="1")}
    port = KubePort(_Client([0.0]), manifest_of=manifests.get,
                    requests_of=lambda key: [("main", 1, {"cpu": 1000})], clock=lambda: 0.0)

    async def main() -> None:
        for key in ("ns/w", "ns/v"):
            assert await port.evict(key, cluster_queue="cq", reason="InClusterQueue", message="m")

    anyio.run(main)
    assert port.counts[("evict", "cq", "InClusterQueue")] == 2
    assert port.counts[("evict_once", "cq", "InClusterQueue")] == 1  # v's first; w was evicted before


def test_build_info_says_which_kueued_runs() -> None:
    _, s = scrape(Metrics())
    labels = build_labels()
    assert labels["git_version"] == "v" + importlib.metadata.version("kueued")
    assert labels["platform"].startswith(sys.platform + "/") and labels["compiler"].startswith("CPython")
    assert labels["compiler"].endswith(" + mypyc") == compiled()
    assert value(s, "kueue_build_info", **labels) == 1
    assert sum(v for (name, _), v in s.items() if name == "kueue_build_info") == 1


def test_wait_buckets_are_kueues() -> None:
    assert WAIT_BUCKETS[:4] == (1.0, 2.5, 5.0, 10.0) and len(WAIT_BUCKETS) == 14 and WAIT_BUCKETS[-1] == 10240.0


class _Client:
    """A StatusClient whose every write takes 0.25 s on the port's clock."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    async def patch_status(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        self.clock[0] += 0.25
        return {"status": body["status"], "metadata": {"resourceVersion": "2"}}

    async def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        return {}


def test_the_kube_port_times_each_commit() -> None:
    now = [0.0]
    manifest = workload("w", "ns", "lq", cpu="1")
    port = KubePort(_Client(now), manifest_of=lambda key: manifest,
                    requests_of=lambda key: [("main", 1, {"cpu": 1000})], clock=lambda: now[0])

    async def main() -> None:
        assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "default"}}, usage={})
        assert await port.evict("ns/w", cluster_queue="cq", reason="InClusterQueue", message="m")

    anyio.run(main)
    assert list(port.timings) == [("admit", 0.25), ("evict", 0.5)]  # an eviction's two writes


class _Events:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def quota_reserved(self, workload: Any, *, cluster_queue: str, waited: float) -> bool:
        self.calls.append("quota_reserved")
        return True

    def admitted(self, workload: Any, *, cluster_queue: str, waited: float = 0.0) -> bool:
        self.calls.append("admitted")
        return True

    def preempted(self, victim: Any, *, preemptor: Any, reason: str, message: str, cluster_queue: str,
                  priorities: str) -> bool:
        self.calls.append("preempted")
        return True

    def evicted(self, workload: Any, *, reason: str, message: str) -> bool:
        self.calls.append("evicted")
        return True


def test_the_decision_recorder_counts_and_passes_every_call_on() -> None:
    metrics, events = Metrics(), _Events()
    recorder = DecisionRecorder(metrics, events, cluster_queue_of=lambda m: m["queue"])
    assert recorder.quota_reserved({}, cluster_queue="cq", waited=3.0)
    assert recorder.admitted({}, cluster_queue="cq")
    assert recorder.preempted({}, preemptor={"queue": "cq-p"}, reason="InClusterQueue", message="m", cluster_queue="cq",
                              priorities="p")
    assert recorder.evicted({}, reason="Preempted", message="m")
    assert events.calls == ["quota_reserved", "admitted", "preempted", "evicted"]
    _, s = scrape(metrics)
    assert value(s, "kueue_admission_wait_time_seconds_bucket", cluster_queue="cq", le="5.0") == 1
    assert value(s, "kueue_preempted_workloads_total", preempting_cluster_queue="cq-p", reason="InClusterQueue") == 1
    offline = DecisionRecorder(metrics, None, cluster_queue_of=lambda m: None)
    assert not offline.preempted({}, preemptor={}, reason="InClusterQueue", message="m", cluster_queue="cq",
                                 priorities="p")  # no Events offline, nothing counted


# --- health ---------------------------------------------------------------------------------------------

def _get(server: HealthServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_healthz_fails_when_the_loop_stops_ticking_and_readyz_follows_the_first_load() -> None:
    now = [1000.0]
    health = Health(stale_after=60, clock=lambda: now[0])
    metrics = Metrics()
    metrics.leader.set(1)
    with HealthServer(health, metrics.registry) as server:
        assert _get(server, "/healthz")[0] == 200  # starting is not wedged
        assert _get(server, "/readyz")[0] == 503
        health.tick()
        health.ready()
        now[0] += 59
        assert _get(server, "/healthz")[0] == 200
        assert _get(server, "/readyz") == (200, "ok: the first load is applied\n")
        now[0] += 2
        code, body = _get(server, "/healthz")
        assert code == 503 and "no scheduling pass has ended for 61s" in body
        health.tick()
        assert _get(server, "/healthz")[0] == 200
        code, body = _get(server, "/metrics")
        assert code == 200 and "kueued_leader 1.0" in body
        assert _get(server, "/nothing")[0] == 404


def test_a_wedged_daemon_fails_healthz(tmp_path: Path) -> None:
    """The loop stuck inside a pass (here: in ``on_settled``) ticks no more; the server, in its own
    thread, says so once the clock has moved past the limit."""
    _cohort_tree(tmp_path)
    now = [0.0]
    health = Health(stale_after=30, clock=lambda: now[0])
    answers: list[tuple[int, int, bool]] = []
    with HealthServer(health, Metrics().registry) as server:
        def between(n: int) -> None:
            if n == 1:  # the first settle: nothing ticked before it (ticks end a pass)
                answers.append((_get(server, "/healthz")[0], _get(server, "/readyz")[0], health.leader))
            elif n == 2:  # a pass later: ticked and ready; now the loop hangs here
                answers.append((_get(server, "/healthz")[0], _get(server, "/readyz")[0], health.leader))
                now[0] += 31
                answers.append((_get(server, "/healthz")[0], _get(server, "/readyz")[0], health.leader))

        def touch(n: int) -> None:
            between(n)
            if n == 1:
                _write(tmp_path / "w.yaml", [workload("w", "ns", "lq-a", cpu="1")])

        _run(tmp_path, Metrics(), settles=2, between=touch, health=health)
    assert answers == [(200, 503, True), (200, 200, True), (503, 200, True)]


@pytest.mark.parametrize(("interval", "limit"), [
    pytest.param(2.0, STALE_AFTER, id="default-interval"),
    pytest.param(600.0, 2400.0, id="long-interval"),
])
def test_the_healthz_limit_follows_the_interval(interval: float, limit: float) -> None:
    assert stale_after(interval) == limit


def test_an_inactive_cluster_queue_reports_all_it_holds_back_as_inadmissible(tmp_path: Path) -> None:
    """Kueue's reportPendingWorkloads: a queue that cannot admit has no active pending workloads."""
    _cohort_tree(tmp_path)
    held = cluster_queue("cq-h", quotas("default", cpu="1"))
    held["spec"]["stopPolicy"] = "Hold"
    _write(tmp_path / "h.yaml", [held, local_queue("lq-h", "ns", "cq-h"),
                                 workload("h1", "ns", "lq-h", cpu="1"), workload("h2", "ns", "lq-h", cpu="1")])
    metrics = Metrics()
    seen: list[Samples] = []
    _run(tmp_path, metrics, settles=1, between=lambda n: seen.append(scrape(metrics)[1]))
    assert value(seen[0], "kueue_pending_workloads", cluster_queue="cq-h", status="active") == 0
    assert value(seen[0], "kueue_pending_workloads", cluster_queue="cq-h", status="inadmissible") == 2


def test_healthz_fails_when_the_start_never_ends() -> None:
    """Every kind refused by RBAC: the first list never completes, no pass ever ends.  Not wedged
    for a while (a big cluster lists slowly), then /healthz says so."""
    now = [0.0]
    health = Health(stale_after=60, clock=lambda: now[0])
    now[0] = 299
    assert health.live()[0] is True
    now[0] = 301
    alive, why = health.live()
    assert not alive and why == "no scheduling pass has ended since the start 301s ago (limit 300s)"


def test_admission_attempts_cohort_quota_and_fair_shares_read_as_kueue_names_them(tmp_path: Path) -> None:
    _cohort_tree(tmp_path)
    _write(tmp_path / "config.yaml", [{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                       "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare",
                                                                                 "LessThanInitialShare"]}}])
    _write(tmp_path / "a.yaml", [workload("a1", "ns", "lq-a", cpu="3"), workload("a2", "ns", "lq-a", cpu="2")])
    metrics = Metrics()
    seen: list[Samples] = []
    _run(tmp_path, metrics, settles=1, between=lambda n: seen.append(scrape(metrics)[1]))
    s = seen[0]
    # a1 borrows 1 of cq-b's lendable 2 (it lends 2 of its 2; a2 never fits): one successful attempt
    # at least, then inadmissible ones while a2 waits
    assert (value(s, "kueue_admission_attempts_total", result="success") or 0) >= 1
    assert value(s, "kueue_admission_attempt_duration_seconds_count", result="success") == \
        value(s, "kueue_admission_attempts_total", result="success")
    assert value(s, "kueue_cohort_subtree_quota", cohort="co", flavor="default", resource="cpu") == 4
    assert (value(s, "kueue_cluster_queue_weighted_share", cluster_queue="cq-a") or 0) > 0  # it borrows
    assert value(s, "kueue_cluster_queue_weighted_share", cluster_queue="cq-b") == 0
