"""``kueued run --metrics-port``: Kueue's metrics and the probes of a daemon on a real API server.

kueued runs as its own process (user ``kueued``, bound only to the RBAC ``kueued manifests``
prints); workloads are applied with kubectl and ``/metrics`` is read and parsed as Prometheus
would.  The metrics are refreshed after each scheduling pass, a moment after the status write
``kubectl wait`` sees, so the scrape is repeated until it shows the pass (a wait on the
condition, with a deadline).
"""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.integration.daemon import Daemon

pytestmark = pytest.mark.control_plane

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(installed: Any, tmp_path: Path) -> Iterator[tuple[Any, int]]:
    """``kueued run`` with ``--metrics-port``; (the cluster, the port)."""
    port = _free_port()
    d = Daemon(installed, tmp_path / "kueued.log", "--metrics-port", str(port)).start()
    try:
        yield installed, port
    finally:
        assert d.stop() == 0
    d.events()  # every line is JSON: the server logs no request lines into the JSON log


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except (ConnectionError, urllib.error.URLError):  # not listening yet
        return 0, ""


def _until(what: Callable[[], Any], *, timeout: float = 60) -> Any:
    """``what()`` once it is truthy; polls an outside process, which has no event to wait on."""
    deadline = time.monotonic() + timeout
    while not (result := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return result


def _scrape(port: int) -> Samples:
    code, text = _get(port, "/metrics")
    assert code == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _apply(cluster: Any, *docs: dict) -> None:
    cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))


def _unstamped(manifest: dict) -> dict:
    manifest["metadata"].pop("creationTimestamp", None)  # the API server stamps it
    return manifest


def _wait_admitted(cluster: Any, ns: str, name: str, cq: str) -> None:
    cluster.kubectl_run("wait", f"--namespace={ns}", f"--for=jsonpath={{.status.admission.clusterQueue}}={cq}",
                        "--timeout=60s", f"workload/{name}")


def _queue(cluster: Any, ns: str, cq: str, *, cpu: str) -> None:
    _apply(cluster, namespace(ns), flavor("default"),
           cluster_queue(cq, quotas("default", cpu=cpu), preemption={"withinClusterQueue": "LowerPriority"}),
           local_queue("lq", ns, cq))


def _scraped_once(port: int, done: Callable[[Samples], bool], *, timeout: float = 60) -> Samples:
    """The first scrape for which ``done`` holds (the pass that made it has been observed)."""
    return _until(lambda: (s := _scrape(port)) and done(s) and s, timeout=timeout)


def test_a_daemon_on_a_cluster_serves_kueues_metrics_and_its_probes(served: tuple[Any, int]) -> None:
    cluster, port = served
    assert _until(lambda: _get(port, "/readyz")[0] == 200)  # the initial sync is applied
    assert _get(port, "/healthz")[0] == 200
    ns, cq = "metrics", "cq-metrics"
    _queue(cluster, ns, cq, cpu="4")
    for name in ("w1", "w2"):
        _apply(cluster, _unstamped(workload(name, ns, "lq", cpu="2")))
        _wait_admitted(cluster, ns, name, cq)
    _apply(cluster, _unstamped(workload("w3", ns, "lq", cpu="2")))
    s = _scraped_once(port, lambda s: sum(_value(s, "kueue_pending_workloads", cluster_queue=cq, status=st) or 0
                                          for st in ("active", "inadmissible")) == 1)
    assert _value(s, "kueue_admitted_workloads_total", cluster_queue=cq) == 2
    assert _value(s, "kueue_quota_reserved_workloads_total", cluster_queue=cq) == 2
    assert _value(s, "kueue_admitted_active_workloads", cluster_queue=cq) == 2
    assert _value(s, "kueue_reserving_active_workloads", cluster_queue=cq) == 2
    fr = {"cohort": "", "cluster_queue": cq, "flavor": "default", "resource": "cpu"}
    assert _value(s, "kueue_cluster_queue_nominal_quota", **fr) == 4
    assert _value(s, "kueue_cluster_queue_resource_usage", **fr) == 4
    assert _value(s, "kueue_cluster_queue_resource_reservation", **fr) == 4
    assert [_value(s, "kueue_cluster_queue_status", cluster_queue=cq, status=st)
            for st in ("pending", "active", "terminating")] == [0, 1, 0]
    assert _value(s, "kueue_admission_wait_time_seconds_count", cluster_queue=cq) == 2
    assert (_value(s, "kueued_commit_duration_seconds_count", kind="admit") or 0) >= 2
    assert _value(s, "kueued_watch_restarts_total", kind="Workload") is not None  # every watched kind, 0 too
    assert _value(s, "kueued_leader") == 1
    assert (_value(s, "kueued_scheduling_rounds_total") or 0) >= 1
    assert not [name for name, _ in s if name.endswith("_created")]  # as Kueue's Go client: no *_created
    assert _get(port, "/healthz")[0] == 200
    assert _get(port, "/readyz")[0] == 200


def _preempt(cluster: Any, port: int, ns: str, cq: str) -> Samples:
    """``low`` fills the queue, ``high`` preempts it; the scrape that shows both admissions."""
    _queue(cluster, ns, cq, cpu="2")
    _apply(cluster, _unstamped(workload("low", ns, "lq", cpu="2", priority=1)))
    _wait_admitted(cluster, ns, "low", cq)
    _apply(cluster, _unstamped(workload("high", ns, "lq", cpu="2", priority=100)))
    _wait_admitted(cluster, ns, "high", cq)
    return _scraped_once(port, lambda s: _value(s, "kueue_admitted_workloads_total", cluster_queue=cq) == 2)


def test_a_preemption_on_a_cluster_counts_for_the_preemptor_s_queue(served: tuple[Any, int]) -> None:
    cluster, port = served
    cq = "cq-metrics-preempt"
    s = _preempt(cluster, port, "metrics-preempt", cq)
    assert _value(s, "kueue_preempted_workloads_total", preempting_cluster_queue=cq, reason="InClusterQueue") == 1
    assert _value(s, "kueue_evicted_workloads_total", cluster_queue=cq, reason="Preempted",
                  underlying_cause="") == 1
    assert (_value(s, "kueued_commit_duration_seconds_count", kind="evict") or 0) >= 1


def test_a_preempted_workload_gives_its_quota_back_on_a_cluster(served: tuple[Any, int]) -> None:
    cluster, port = served
    cq = "cq-metrics-victim"
    _preempt(cluster, port, "metrics-victim", cq)
    _scraped_once(port, lambda s: _value(s, "kueue_admitted_active_workloads", cluster_queue=cq) == 1, timeout=15)
