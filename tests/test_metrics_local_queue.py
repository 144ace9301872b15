"""Kueue's ``kueue_local_queue_*`` metrics (the LocalQueueMetrics gate), read as Prometheus reads
them after a small offline run, as ``tests/test_metrics.py`` reads the ClusterQueue families."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueued.kube.port import InMemoryPort
from kueued.metrics import Metrics
from kueued.metrics_local_queue import gated
from kueued.metrics_recorder import DecisionRecorder
from tests.builders import cluster_queue, local_queue, quotas, workload
from tests.test_metrics import Samples, _cohort_tree, _run, _stamp, _write, scrape, settled_then_deleted, value

LQ_A = {"name": "lq-a", "namespace": "ns"}
LQ_B = {"name": "lq-b", "namespace": "ns"}
CPU = {"flavor": "default", "resource": "cpu"}


def lq_value(samples: Samples, metric: str, **labels: str) -> float | None:
    """``value`` for these families, whose ``name`` label would clash with its parameter."""
    return samples.get((metric, frozenset(labels.items())))


def _gates(path: Path, **gates: bool) -> None:
    _write(path / "config.yaml", [{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                   "featureGates": gates}])


def _reclaim(tmp_path: Path, metrics: Metrics) -> Samples:
    """a1 (lq-a) borrows cq-b's quota; b1 (lq-b, created 100 s ago) reclaims it."""
    _cohort_tree(tmp_path)
    _write(tmp_path / "a.yaml", [workload("a1", "ns", "lq-a", cpu="4")])
    b1 = workload("b1", "ns", "lq-b", cpu="2")
    b1["metadata"]["creationTimestamp"] = _stamp(100)
    port = InMemoryPort()

    def between(n: int) -> None:
        if n == 1:
            _write(tmp_path / "b.yaml", [b1])

    _run(tmp_path, metrics, settles=2, port=port, between=between)
    assert [(c.kind, c.workload) for c in port.log] == [("admit", "ns/a1"), ("evict", "ns/a1"), ("admit", "ns/b1")]
    return scrape(metrics)[1]


def test_admissions_evictions_and_waits_per_local_queue(tmp_path: Path) -> None:
    s = _reclaim(tmp_path, Metrics())  # the gate is on by default (beta since Kueue 0.17)
    for name in ("kueue_local_queue_admitted_workloads_total", "kueue_local_queue_quota_reserved_workloads_total"):
        assert lq_value(s, name, **LQ_A) == 1
        assert lq_value(s, name, **LQ_B) == 1
    # the victim's LocalQueue counts the eviction, with the ClusterQueue family's reason and cause
    evicted = "kueue_local_queue_evicted_workloads_total"
    assert lq_value(s, evicted, **LQ_A, reason="Preempted", underlying_cause="") == 1
    assert lq_value(s, evicted, **LQ_B, reason="Preempted", underlying_cause="") is None
    # b1 waited 100 s (Kueue's buckets: 80, 160); no admission checks, so both waits are the same
    for name in ("kueue_local_queue_admission_wait_time_seconds", "kueue_local_queue_quota_reserved_wait_time_seconds"):
        assert lq_value(s, f"{name}_count", **LQ_A) == 1
        assert lq_value(s, f"{name}_bucket", **LQ_B, le="80.0") == 0
        assert lq_value(s, f"{name}_bucket", **LQ_B, le="160.0") == 1
        assert 100 <= (lq_value(s, f"{name}_sum", **LQ_B) or 0) < 160


def test_pending_holdings_usage_and_status_per_local_queue(tmp_path: Path) -> None:
    s = _reclaim(tmp_path, Metrics())
    # a1 waits again (parked: its queue has no room), b1 runs
    assert sum(lq_value(s, "kueue_local_queue_pending_workloads", **LQ_A, status=st) or 0
               for st in ("active", "inadmissible")) == 1
    assert lq_value(s, "kueue_local_queue_pending_workloads", **LQ_B, status="active") == 0
    assert lq_value(s, "kueue_local_queue_pending_workloads", **LQ_B, status="inadmissible") == 0
    for name in ("kueue_local_queue_reserving_active_workloads", "kueue_local_queue_admitted_active_workloads"):
        assert lq_value(s, name, **LQ_A) == 0
        assert lq_value(s, name, **LQ_B) == 1
    for name in ("kueue_local_queue_resource_reservation", "kueue_local_queue_resource_usage"):
        assert lq_value(s, name, **LQ_A, **CPU) == 0
        assert lq_value(s, name, **LQ_B, **CPU) == 2
    assert [lq_value(s, "kueue_local_queue_status", **LQ_A, active=st)
            for st in ("True", "False", "Unknown")] == [1, 0, 0]


def test_an_inactive_or_missing_cluster_queue_and_a_stopped_local_queue(tmp_path: Path) -> None:
    """Kueue's reportLQPendingWorkloads: what a held ClusterQueue keeps waits as inadmissible; a stopped
    LocalQueue's workloads count nowhere and it is not active; nor is one whose ClusterQueue is missing."""
    _cohort_tree(tmp_path)
    held = cluster_queue("cq-h", quotas("default", cpu="1"))
    held["spec"]["stopPolicy"] = "Hold"
    stopped = local_queue("lq-s", "ns", "cq-a")
    stopped["spec"]["stopPolicy"] = "Hold"
    _write(tmp_path / "h.yaml", [held, local_queue("lq-h", "ns", "cq-h"), stopped, local_queue("lq-x", "ns", "cq-x"),
                                 workload("h1", "ns", "lq-h", cpu="1"), workload("h2", "ns", "lq-h", cpu="1"),
                                 workload("s1", "ns", "lq-s", cpu="1")])
    metrics = Metrics()
    seen: list[Samples] = []
    _run(tmp_path, metrics, settles=1, between=lambda n: seen.append(scrape(metrics)[1]))
    s = seen[0]
    lq_h, lq_s, lq_x = ({"name": n, "namespace": "ns"} for n in ("lq-h", "lq-s", "lq-x"))
    assert lq_value(s, "kueue_local_queue_pending_workloads", **lq_h, status="active") == 0
    assert lq_value(s, "kueue_local_queue_pending_workloads", **lq_h, status="inadmissible") == 2
    for lq in (lq_s, lq_x):
        assert lq_value(s, "kueue_local_queue_pending_workloads", **lq, status="active") == 0
        assert lq_value(s, "kueue_local_queue_pending_workloads", **lq, status="inadmissible") == 0
    for lq in (lq_h, lq_s, lq_x):
        assert [lq_value(s, "kueue_local_queue_status", **lq, active=st) for st in ("True", "False", "Unknown")] == \
            [0, 1, 0]
    assert lq_value(s, "kueue_local_queue_resource_usage", **lq_x, **CPU) is None  # no ClusterQueue, no flavors


def test_a_deleted_local_queue_leaves_no_series(tmp_path: Path) -> None:
    metrics = Metrics()
    seen = settled_then_deleted(tmp_path, metrics, [local_queue("lq-x", "ns", "cq-a"),
                                                    workload("x1", "ns", "lq-x", cpu="1")])
    lq_x = {"name": "lq-x", "namespace": "ns"}
    assert lq_value(seen[0], "kueue_local_queue_admitted_workloads_total", **lq_x) == 1
    assert lq_value(seen[0], "kueue_local_queue_admitted_active_workloads", **lq_x) == 1
    _, after = scrape(metrics)
    assert not [key for key in after if dict(key[1]).get("name") == "lq-x"]
    assert lq_value(after, "kueue_local_queue_status", **LQ_A, active="True") == 1  # the others stay


@pytest.mark.parametrize("gates", [pytest.param({"LocalQueueMetrics": False}, id="off"),
                                   pytest.param({"AllBeta": False}, id="all-beta-off")])
def test_with_the_gate_off_there_are_no_local_queue_families(tmp_path: Path, gates: dict[str, bool]) -> None:
    _gates(tmp_path, **gates)
    metrics = Metrics()
    s = _reclaim(tmp_path, metrics)
    assert value(s, "kueue_admitted_workloads_total", cluster_queue="cq-a") == 1
    names, _ = scrape(metrics)
    assert not [n for n in names if n.startswith("kueue_local_queue_")]


def test_the_families_come_and_go_with_the_gate() -> None:
    metrics = Metrics()
    on = [False]
    recorder = DecisionRecorder(metrics, None, cluster_queue_of=lambda m: None, local_queue_metrics=lambda: on[0])
    manifest = {"metadata": {"namespace": "ns", "name": "w"}, "spec": {"queueName": "lq"}}
    recorder.quota_reserved(manifest, cluster_queue="cq", waited=1.0)
    names, _ = scrape(metrics)
    assert not [n for n in names if n.startswith("kueue_local_queue_")]
    on[0] = True
    recorder.quota_reserved(manifest, cluster_queue="cq", waited=1.0)
    recorder.evicted(manifest, reason="DeactivatedDueToMaximumExecutionTimeExceeded", message="m")
    _, s = scrape(metrics)
    assert lq_value(s, "kueue_local_queue_admitted_workloads_total", name="lq", namespace="ns") == 1
    assert lq_value(s, "kueue_local_queue_evicted_workloads_total", name="lq", namespace="ns", reason="Deactivated",
                 underlying_cause="MaximumExecutionTimeExceeded") == 1
    assert gated(metrics, False) is None  # off again: gone from the registry
    names, _ = scrape(metrics)
    assert not [n for n in names if n.startswith("kueue_local_queue_")]
