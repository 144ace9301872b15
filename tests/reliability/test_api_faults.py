"""The same scenario straight and through the fault proxy ends in the same admissions.

One scenario, run twice against the session's control plane: once with kueued talking to
the API server directly, once through :class:`~tests.reliability.proxy.FaultProxy` with
the ``HEAVY`` profile (a fifth of all requests reset; 409s, 429s, 500s, 503s, timeouts,
dropped watches and 410s besides).  Each run has its own namespace and tree (two
Cohorts, four ClusterQueues, two flavors) and goes through three phases, each settled
before the next (:func:`~tests.reliability.scenario.settle`):

1. 32 Workloads wait in queues a1 and b1 before kueued starts: each fills its own quota
   and borrows all its sibling's;
2. 28 Workloads of higher priority arrive in a2 and b2 while it runs, highest first: they
   reclaim their quota from a1 and b1 (preemption), whose evicted Workloads preempt
   lower-priority ones of their own queue;
3. the test finishes the two highest-priority Workloads of each queue (the Finished
   condition, as a Job would), and the freed quota admits pending ones.

Then: every Workload's outcome (the queue it is admitted to, finished, or pending) is the
same in both runs, and so is every queue's count of Workloads on each flavor; kueued
never crashed (alive, no exception in its log) and exits cleanly on SIGTERM; every
ClusterQueue's status usage equals the sum of its admitted Workloads; no queue or Cohort
was ever seen over its quota.  The faults injected, by kind, go to
``build/reliability/api_faults.json`` for docs/reliability.md.

Why the outcome cannot depend on which requests failed: priorities are distinct, a
queue decides its head first and a refused commit puts it back at the head, and each
phase's arrivals come highest first; so a fault can delay a decision but not reorder
one queue's.  A difference there is a real finding, not noise.

Which flavor a given Workload ends on is not compared one by one: when a queue's head
could fit on ``rel-spot`` now or preempt its way onto ``rel-on-demand``, the answer
depends on whether its sibling queue's evictions have landed yet (Kueue's flavor
assignment prefers Fit to Preempt), and a failed write moves that by a round.  Two
Workloads of one queue may then trade flavors while every count stays the same; the
names that did are recorded (``flavor_swaps``).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.daemon import Daemon
from tests.reliability.api import Admin, Credentials
from tests.reliability.conftest import record
from tests.reliability.proxy import HEAVY, FaultProxy, Profile
from tests.reliability.scenario import State, Tree, crash_signs, settle, workload

SEED = 18
PHASE_1 = {"a1": 16, "b1": 16}  # waiting before kueued starts, priorities 100...
PHASE_2 = {"a2": 14, "b2": 14}  # arriving while it runs, priorities 200..., highest first
FINISHED = 2  # per queue, its highest priorities
SETTLE_S = {"straight": 90.0, "faults": 200.0}  # faults: room for a 60 s request timeout and more


def _names(queue: str, count: int, base: int) -> list[tuple[str, int]]:
    return [(f"{queue}-{base + i}", base + i) for i in range(count)]


def _scenario(cluster: Any, tmp_path: Path, *, prefix: str, profile: Profile | None) -> dict[str, Any]:
    """One run; its placements (queue names without the prefix) and figures."""
    if cluster.control_plane is None:
        pytest.skip("an external cluster: no CA of ours for the proxy's certificate")
    admin = Admin(Credentials(cluster.kubeconfig))
    tree = Tree.small(prefix, on_demand=4, spot=2)
    admin.apply(*tree.manifests())
    for queue, count in PHASE_1.items():
        for name, priority in _names(queue, count, 100):
            admin.create(workload(tree, name, f"{prefix}-{queue}", cpu=1, priority=priority))
    kueued = Credentials(cluster.user_kubeconfig("kueued"))
    proxy = None
    kubeconfig = None
    if profile is not None:
        serving = cluster.control_plane.pki.serving
        proxy = FaultProxy(cluster.server, serving=(serving.cert, serving.key), ca=kueued.ca,
                           client=(kueued.cert, kueued.key), profile=profile, seed=SEED).start()
        kubeconfig = kueued.pointing_at(proxy.url, tmp_path / f"{prefix}.kubeconfig")
    daemon = Daemon(cluster, tmp_path / f"{prefix}.log", kubeconfig=kubeconfig).start()
    seen: list[State] = []
    phases: dict[str, float] = {}

    def alive() -> str | None:
        assert daemon.proc is not None
        return None if daemon.proc.poll() is None else f"kueued exited ({daemon.proc.returncode}):\n{daemon.tail()}"

    def phase(label: str) -> State:
        started = time.monotonic()
        state = settle(admin, tree, timeout=SETTLE_S[prefix], alive=alive, seen=seen)
        phases[label] = round(time.monotonic() - started, 1)
        return state

    try:
        started = time.monotonic()
        phase("backlog")
        arrivals = [(queue, name, priority) for queue, count in PHASE_2.items()
                    for name, priority in _names(queue, count, 200)]
        for queue, name, priority in sorted(arrivals, key=lambda a: (-a[2], a[0])):
            admin.create(workload(tree, name, f"{prefix}-{queue}", cpu=1, priority=priority))
        state = phase("arrivals")
        top = [name for queue, count in {**PHASE_1, **PHASE_2}.items()
               for name, _ in _names(queue, count, 100 if queue in PHASE_1 else 200)[-FINISHED:]]
        assert all(":" in state.placement[name] for name in top), {n: state.placement[n] for n in top}
        for name in top:
            while not admin.finish(next(w for w in admin.workloads(tree.namespace)
                                        if w["metadata"]["name"] == name)):
                pass  # kueued wrote it meanwhile: finish the version it wrote
        state = phase("finishes")
        elapsed = time.monotonic() - started
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.tail()
        assert daemon.stop() == 0, daemon.tail()
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.kill()
        if proxy is not None:
            proxy.stop()
        admin.delete_all(tree.namespace, *tree.cluster_scoped())
    log = daemon.log_path.read_text().splitlines()
    assert not crash_signs(log), "\n".join(crash_signs(log)[:5])
    events = Counter(e["event"] for e in daemon.events())
    return {
        "placement": {name: where.replace(f"{prefix}-", "") for name, where in state.placement.items()},
        "figures": {
            "seconds": round(elapsed, 1), "settle_seconds": phases, "states_checked": len(seen),
            "workloads": len(state.placement), "admitted": state.count("admitted"),
            "pending": state.count("pending"), "finished": state.count("finished"),
            "admissions_logged": events["workload_admitted"], "evictions_logged": events["workload_evicted"],
            "commits_refused": events["commit_refused"], "watch_restarts": events["watch_restarted"],
            "relists": events["watch_relisted"],
            **({"proxy": proxy.report()} if proxy is not None else {}),
        },
    }


@pytest.mark.timeout(1200)
def test_faults_change_no_admission_and_crash_nothing(installed: Any, tmp_path: Path) -> None:
    straight = _scenario(installed, tmp_path, prefix="straight", profile=None)
    faults = _scenario(installed, tmp_path, prefix="faults", profile=HEAVY)
    swapped = sorted(n for n, where in straight["placement"].items() if faults["placement"].get(n) != where)
    record("api_faults", {"seed": SEED, "straight": straight["figures"], "faults": faults["figures"],
                          "flavor_swaps": swapped})
    outcome = {name: (_queue(where), _queue(faults["placement"].get(name, "lost")))
               for name, where in straight["placement"].items()}
    different = {name: pair for name, pair in outcome.items() if pair[0] != pair[1]}
    assert not different, f"straight vs faults, outcome by Workload: {different}"
    assert _flavors(straight["placement"]) == _flavors(faults["placement"])
    assert straight["figures"]["evictions_logged"] > 0  # the scenario preempts, or it tests too little
    injected = faults["figures"]["proxy"]["faults"]
    assert all(injected[kind] > 0 for kind in injected), injected


def _queue(where: str) -> str:
    """An outcome without its flavor: the queue admitted to, ``pending`` or ``finished``."""
    return where.split(":")[0]


def _flavors(placement: dict[str, str]) -> Counter[str]:
    """How many Workloads each queue holds on each flavor."""
    return Counter(where for where in placement.values() if ":" in where)
