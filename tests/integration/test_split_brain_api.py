"""Split brain, with the API server's audit log as the witness: two ``kueued run --leader-elect``
processes; the leader is stopped (SIGSTOP) past its lease, the other takes over and admits, the
old leader is resumed (SIGCONT) and sees the workload stream move on, and writes nothing.

Each daemon authenticates as a user of its own (``kueued-split-a``, ``kueued-split-b``, client
certificates from the control plane's CA, bound to exactly the roles ``kueued manifests``
grants user ``kueued``), so the audit log's ``user.username`` tells their requests apart.  The
audit policy (:mod:`kueued.devcluster.audit`) records Workload and Lease writes only, with the
server's time of each answer: "no write after the takeover" is read from there, not from the
old leader's own log.

The lease is short (3 s lease, 2 s renew deadline, 0.5 s retry), as in ``test_lease_api``; the
daemon's followers retry with client-go's jitter (up to 1.2 × the retry period).  Bounds come from
those durations plus a slack for a busy two-core machine, never from a tuned constant.  Waits are
on the event: ``kubectl wait`` for objects, a daemon's log line for its leadership.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueued.kube.lease_record import JITTER
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.integration.conftest import Cluster
from tests.integration.daemon import Daemon

pytestmark = pytest.mark.control_plane

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5
SLACK = 2.0
"""A busy two-core machine: a Python process woken late, a few round trips to a local API server."""
TAKEOVER_BOUND = LEASE + RETRY * (1 + JITTER) + SLACK
"""From the stop: a lease after the follower last saw a renewal, which it saw at most a jittered
retry period after the leader's last one (itself before the stop)."""
USERS = ("kueued-split-a", "kueued-split-b")
WRITES = ("create", "update", "patch")
QUOTA = {"a": 4, "b": 3}  # cpu of each ClusterQueue; every workload asks for 1


@pytest.fixture
def split(installed: Cluster) -> Cluster:
    if installed.control_plane is None or installed.control_plane.audit_log is None:
        pytest.skip("needs our own control plane: its CA for two users and its audit log")
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user} for user in USERS]
    _apply(installed,
           {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kueued-split-brain"}, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kueued"}},
           {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "kueued-split-brain", "namespace": "kueued-system"}, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kueued"}})
    return installed


@pytest.fixture
def daemons(split: Cluster, tmp_path: Path) -> Iterator[tuple[Daemon, Daemon, str]]:
    lease = f"split-{uuid.uuid4().hex[:6]}"
    pair = tuple(Daemon(split, tmp_path / f"{who}.log", *_flags(lease, who), user=user)
                 for who, user in zip("ab", USERS, strict=True))
    try:
        yield pair[0], pair[1], lease
    finally:
        for d in pair:  # the old leader first: the new one's release must not hand it the lease
            if d.proc is not None and d.proc.poll() is None:
                os.kill(d.proc.pid, signal.SIGCONT)  # a stopped process cannot take SIGTERM
                d.stop()
        for who, d in zip("ab", pair, strict=True):
            print(f"--- daemon {who}'s log ends:\n{d.tail(25)}")


def _flags(lease: str, who: str) -> list[str]:
    return ["--leader-elect", f"--leader-elect-name={lease}", f"--leader-elect-identity=split-{who}",
            f"--leader-elect-lease-duration={LEASE:g}", f"--leader-elect-renew-deadline={RENEW:g}",
            f"--leader-elect-retry-period={RETRY:g}"]


def _apply(cluster: Cluster, *docs: dict[str, Any]) -> None:
    cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))


def _submit(cluster: Cluster, ns: str, queue: str, *names: str) -> None:
    docs = [workload(name, ns, queue, cpu="1") for name in names]
    for doc in docs:
        doc["metadata"].pop("creationTimestamp", None)  # the API server stamps it
    _apply(cluster, *docs)


def _wait(cluster: Cluster, ns: str, condition: str, *names: str, timeout: float = 60) -> None:
    cluster.kubectl_run("wait", f"--namespace={ns}", f"--for={condition}", f"--timeout={timeout:.0f}s",
                        *(f"workload/{name}" for name in names))


def _decided(cluster: Cluster, ns: str, *names: str) -> None:
    """Until each has QuotaReserved: admitted, or pending with the reason written."""
    _wait(cluster, ns, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].status}", *names)


def _admitted(cluster: Cluster, ns: str, *names: str) -> None:
    _wait(cluster, ns, "jsonpath={.status.conditions[?(@.type=='QuotaReserved')].status}=True", *names)


def _admissions(cluster: Cluster, ns: str) -> dict[str, list[dict[str, Any]]]:
    """The namespace's admitted Workloads by ClusterQueue."""
    by_cq: dict[str, list[dict[str, Any]]] = {}
    for wl in cluster.kubectl_json("get", "workloads", "-n", ns)["items"]:
        if admission := wl.get("status", {}).get("admission"):
            by_cq.setdefault(admission["clusterQueue"], []).append(wl)
    return by_cq


def _logged_admissions(daemon: Daemon, ns: str) -> list[str]:
    return [e["workload"] for e in daemon.events()
            if e.get("event") == "workload_admitted" and e["workload"].startswith(f"{ns}/")]


def test_a_stopped_leader_resumed_after_a_takeover_writes_no_workload(
        daemons: tuple[Daemon, Daemon, str], record_property: Any) -> None:
    a, b, lease = daemons
    cluster = a.cluster
    ns = f"{lease}-ns"
    cqs = {who: f"{lease}-{who}" for who in QUOTA}
    _apply(cluster, namespace(ns), flavor("default"),
           *(cluster_queue(cq, quotas("default", cpu=str(QUOTA[who]))) for who, cq in cqs.items()),
           *(local_queue(f"lq-{who}", ns, cq) for who, cq in cqs.items()))

    # A leads and commits; B follows, warm, having seen A hold the lease
    a.start().wait_for("leader_acquired", timeout=60, identity="split-a")
    b.start().wait_for("leader_observed", timeout=60, holder="split-a")
    first = [f"w{i}" for i in range(6)]
    _submit(cluster, ns, "lq-a", *first)
    _decided(cluster, ns, *first)
    admitted_by_a = sorted(wl["metadata"]["name"] for wl in _admissions(cluster, ns)[cqs["a"]])
    assert len(admitted_by_a) == QUOTA["a"]  # two wait for quota

    # A stops past its lease; meanwhile quota frees up in cq-a and work arrives for cq-b
    assert a.proc is not None
    os.kill(a.proc.pid, signal.SIGSTOP)
    stopped = datetime.now(UTC)
    cluster.kubectl_run("delete", "workload", "-n", ns, *admitted_by_a[:2])
    _submit(cluster, ns, "lq-b", "b0", "b1", "b2")
    b.wait_for("leader_acquired", timeout=TAKEOVER_BOUND + 30, identity="split-b")
    waiting = sorted(set(first) - set(admitted_by_a))
    _admitted(cluster, ns, *waiting, "b0", "b1", "b2")

    # A resumes into a world that moved on: it must notice, say so, and write nothing
    os.kill(a.proc.pid, signal.SIGCONT)
    _submit(cluster, ns, "lq-a", "c0", "c1")  # in its first moments awake
    lost = a.wait_for("leader_lost", timeout=LEASE + SLACK + 10, identity="split-a")
    later = [f"d{i}" for i in range(6)]
    for i, name in enumerate(later):  # a few seconds more of churn, both queues, one at a time
        _submit(cluster, ns, "lq-a" if i % 2 else "lq-b", name)
        _decided(cluster, ns, name)
        if i == 2:
            cluster.kubectl_run("delete", "workload", "-n", ns, "b0", waiting[0])
    _decided(cluster, ns, "c0", "c1")
    a.stop()  # first: B's release at its own stop would hand A the lease
    events = cluster.control_plane.audit_events()
    assert {(e.resource, e.verb in WRITES + ("delete",)) for e in events} <= {("workloads", True), ("leases", True)}

    # the takeover, on the server's clock: a lease after A's last renewal, within the bound of the stop
    lease_writes = [e for e in events if e.resource == "leases" and e.name == lease and e.ok]
    acquired = next(e for e in lease_writes if e.user == USERS[1])
    last_renewal = max(e.at for e in lease_writes if e.user == USERS[0] and e.at < acquired.at)
    took = (acquired.at - stopped).total_seconds()
    gap = (acquired.at - last_renewal).total_seconds()
    record_property("takeover_after_sigstop_s", round(took, 3))
    record_property("takeover_after_last_renewal_s", round(gap, 3))
    print(f"takeover {took:.3f}s after SIGSTOP, {gap:.3f}s after A's last renewal (lease {LEASE:g}s)")
    assert LEASE - 0.1 <= gap <= TAKEOVER_BOUND
    assert took <= TAKEOVER_BOUND

    # the witness: A wrote Workloads while it led (the log sees it) and none after B took over
    def workload_writes(user: str) -> list[Any]:
        return [e for e in events if e.user == user and e.resource == "workloads" and e.verb in WRITES]
    assert [e for e in workload_writes(USERS[0]) if e.at < acquired.at and e.namespace == ns]
    late = [(e.verb, e.namespace, e.name, e.subresource, e.code, e.at.isoformat())
            for e in workload_writes(USERS[0]) if e.at >= acquired.at]
    assert late == [], f"the old leader wrote after the takeover at {acquired.at.isoformat()}"
    assert [e for e in workload_writes(USERS[1]) if e.at >= acquired.at and e.namespace == ns]

    # A said it lost the lease, and led only once
    assert lost["reason"] in ("renew_deadline", "taken_over")
    assert [e["event"] for e in a.events()].count("leader_acquired") == 1
    after_loss = a.events()[a.events().index(lost):]
    assert not [e for e in after_loss if e.get("event") == "workload_admitted"]

    # the admissions add up: none twice, each ClusterQueue within its quota, each made by one daemon
    by_a, by_b = _logged_admissions(a, ns), _logged_admissions(b, ns)
    assert not [key for key, n in Counter(by_a + by_b).items() if n > 1]
    assert {f"{ns}/{name}" for name in waiting} <= set(by_b)
    final = _admissions(cluster, ns)
    for who, cq in cqs.items():
        assert len(final.get(cq, [])) <= QUOTA[who]
        for wl in final.get(cq, []):
            assert f"{ns}/{wl['metadata']['name']}" in set(by_a) | set(by_b)
    assert b.stop() == 0
