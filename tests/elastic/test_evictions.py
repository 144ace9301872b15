"""The report lists the elastic engine's evictions: who, by whom, why, in the order they happened.

Each case is a small manifest run through ``simulate``; the eviction list must be exactly
the one given, and each victim's ``preemptions`` must count its entries.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from actors.simulation import simulate
from kueued.simulate import Report
from tests import builders as b
from tests.elastic.builders import EQ, WL


def teams() -> list[dict[str, Any]]:
    return [EQ("cluster").cluster(cpu="10").build(),
            EQ("team-a").parent("cluster").min(cpu="5").max(cpu="10").build(),
            EQ("team-b").parent("cluster").min(cpu="5").max(cpu="10").build()]


def preemption() -> list[dict[str, Any]]:
    """b asks for its min back, so team-a's runtime is 5: a-high (priority 9) preempts a-low to fit.

    a-low cannot come back (3 + 4 > 5) and cannot preempt a-high (lower priority).
    """
    return [*teams(),
            WL("a-low", "team-a").req(cpu="4").priority(1).at(1).admitted().build(),
            WL("a-high", "team-a").req(cpu="3").priority(9).at(2).build(),
            WL("b", "team-b").req(cpu="5").at(3).build()]


def recycling() -> list[dict[str, Any]]:
    """team uses 14 of a runtime of 10: recycling takes p3 then p2 and gives p3 back (9 <= 10).

    p2 stays out: 9 + 5 > 10, and preempting p3 would not make room.
    """
    return [EQ("cluster").cluster(cpu="10").build(),
            EQ("team").parent("cluster").min(cpu="0").max(cpu="20").build(),
            WL("p1", "team").req(cpu="6").priority(3).admitted().build(),
            WL("p2", "team").req(cpu="5").priority(2).admitted().build(),
            WL("p3", "team").req(cpu="3").priority(1).admitted().build()]


def both() -> list[dict[str, Any]]:
    """A preemption in team-a's scheduling pass, then forced recycling in team-b's recycling pass.

    team-b's min is 6: with b-1 and b-2 admitted over it (runtime 6), b-2 is revoked;
    team-a (runtime 4) makes room for a-high by preempting a-low.
    """
    return [EQ("cluster").cluster(cpu="10").build(),
            EQ("team-a").parent("cluster").min(cpu="4").max(cpu="10").build(),
            EQ("team-b").parent("cluster").min(cpu="6").max(cpu="10").no_lend().build(),
            WL("a-low", "team-a").req(cpu="4").priority(1).at(1).admitted().build(),
            WL("b-1", "team-b").req(cpu="4").priority(1).at(2).admitted().build(),
            WL("b-2", "team-b").req(cpu="4").priority(0).at(3).admitted().build(),
            WL("a-high", "team-a").req(cpu="4").priority(9).at(4).build()]


def run(manifests: list[dict[str, Any]]) -> Report:
    report = simulate(manifests)
    counted = Counter(e["workload"] for e in report.evictions)
    assert counted == {key: r.preemptions for key, r in report.workloads.items() if r.preemptions}
    return report


@pytest.mark.parametrize(("manifests", "evictions"), [
    pytest.param(preemption(), [
        {"workload": "default/a-low", "by": "default/a-high", "reason": "Preempted"},
    ], id="preemption-in-group"),
    pytest.param(recycling(), [
        {"workload": "default/p2", "by": "", "reason": "Revoked"},
    ], id="forced-recycling"),
    pytest.param(both(), [
        {"workload": "default/a-low", "by": "default/a-high", "reason": "Preempted"},
        {"workload": "default/b-2", "by": "", "reason": "Revoked"},
    ], id="preemption-then-recycling"),
])
def test_the_report_lists_elastic_evictions(manifests, evictions) -> None:
    assert run(manifests).evictions == evictions


def _kueue_preemption() -> list[dict[str, Any]]:
    """A ClusterQueue of 4 cpu: k-high (priority 5) preempts the admitted k-low."""
    low = b.workload("k-low", "kq", "main", created=1, priority=0, cpu="4")
    low["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [{
        "name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "4"}, "count": 1}]},
        "conditions": [{"type": "QuotaReserved", "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:01Z"}]}
    return [b.flavor("default"), b.namespace("kq"),
            b.cluster_queue("cq", b.quotas("default", cpu="4"), preemption={"withinClusterQueue": "LowerPriority"}),
            b.local_queue("main", "kq", "cq"), low,
            b.workload("k-high", "kq", "main", created=2, priority=5, cpu="4")]


def test_elastic_evictions_follow_kueues() -> None:
    report = run([*_kueue_preemption(), *preemption()])
    assert report.evictions == [
        {"workload": "kq/k-low", "by": "kq/k-high", "reason": "InClusterQueue"},
        {"workload": "default/a-low", "by": "default/a-high", "reason": "Preempted"},
    ]
