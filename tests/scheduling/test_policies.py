"""KEP-1093 admission policies: the annotation, the numbers, the tournament, LocalQueue weights.

Unit tests build a small forest, set usage directly and pull entries from the
iterator one at a time, adding usage between pulls as the cycle does.  The properties
check that ``fifo`` everywhere is exactly Kueue's order (entry by entry, and engine
run by engine run) and that no policy lets a node exceed what the tree allows.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from actors.harness import LiveEngine
from actors.simulation import simulate
from kueued.engine.wiring import make_iterate
from kueued.model import api
from kueued.model.validation import validate_object
from kueued.quota import node as qn
from kueued.quota.node import FR
from kueued.scheduling.cycle import Entry, classical_order
from kueued.scheduling.fairsharing import fair_order
from kueued.scheduling.flavors import Assignment
from kueued.scheduling.forest import build_forest
from kueued.scheduling.policies import (
    ADMISSION_POLICY,
    PolicyOrder,
    capacity_of,
    cohort_policies,
    consumption,
    fair_share,
    guarantee_in_use,
    local_queue_hook,
    owned,
    policy_of,
    policy_order,
)
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.table import render
from kueued.world import World
from tests import builders as b
from tests.scheduling.test_preemption import incoming

CPU: FR = ("default", "cpu")
MEM: FR = ("default", "memory")
FAIR_SHARING = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


# --- builders ---------------------------------------------------------------------------------

def annotated(m: dict, policy: str | None) -> dict:
    if policy is not None:
        m["metadata"].setdefault("annotations", {})[ADMISSION_POLICY] = policy
    return m


def cq(name: str, cohort: str = "", *, cpu: str = "0", policy: str | None = None, weight: str | None = None,
       **limits: str) -> dict:
    q: Any = (cpu, limits.get("borrowingLimit"), limits.get("lendingLimit")) if limits else cpu
    m = b.cluster_queue(name, b.quotas("default", cpu=q), cohort=cohort)
    if weight is not None:
        m["spec"]["fairSharing"] = {"weight": weight}
    return annotated(m, policy)


def cohort(name: str, parent: str = "", *, cpu: str | None = None, policy: str | None = None,
           weight: str | None = None) -> dict:
    m = b.cohort(name, *([b.quotas("default", cpu=cpu)] if cpu is not None else []), parent=parent)
    if weight is not None:
        m["spec"]["fairSharing"] = {"weight": weight}
    return annotated(m, policy)


def lq(name: str, queue: str, weight: str | None = None) -> dict:
    m = b.local_queue(name, "default", queue)
    if weight is not None:
        m["spec"]["fairSharing"] = {"weight": weight}
    return m


def admitted(name: str, queue: str, local_queue: str | None = None, **usage: str) -> dict:
    m = b.workload(name, "default", local_queue or f"lq-{queue}", **usage)
    m["status"] = {"admission": {"clusterQueue": queue, "podSetAssignments": [{
        "name": "main", "flavors": {r: "default" for r in usage}, "resourceUsage": usage, "count": 1}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    return m


def world_of(*objects: dict) -> World:
    world = World()
    for o in [b.namespace("default"), b.flavor("default"), *objects]:
        world.apply(o)
    assert not world.rejected, world.rejected
    world.take_observed()  # no scheduler runs on it: the workloads hold quota where their status says
    return world


def snapshot_of(world: World) -> Snapshot:
    snap = build_forest(cluster_queues=world.cluster_queues, cohorts=world.cohorts, flavors=world.flavors)
    for key, placed in world.placed.items():
        snap.add_workload(WorkloadInfo(world.workloads[key], placed))
    return snap


def entry(queue: str, *, borrowing: int = 0, priority: int = 0, created: int = 0, cpu: int = 0) -> Entry:
    """A head of ``queue`` and its assignment: just what the order reads (real objects: the
    compiled cycle refuses stand-ins)."""
    e = Entry(incoming(f"wl-{queue}-{created}", priority=priority, created=created), queue)
    a = Assignment()
    a.borrowing, a.usage = borrowing, {CPU: cpu}
    e.assignment = a
    return e


def pull_all(it, snap: Snapshot) -> list[str]:
    """Consume like ``run_cycle``: each pulled entry's usage lands before the next pull."""
    order = []
    for e in it:
        snap.cluster_queues[e.cq].add_usage(e.assignment.usage)
        order.append(e.cq)
    return order


# --- the annotation ---------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    pytest.param(lambda p: cq("q", policy=p), id="ClusterQueue"),
    pytest.param(lambda p: cohort("c", policy=p), id="Cohort"),
])
@pytest.mark.parametrize("value, accepted", [
    pytest.param("fifo", True, id="fifo"),
    pytest.param("fair", True, id="fair"),
    pytest.param("capacity", True, id="capacity"),
    pytest.param("Fair", False, id="case-sensitive"),
    pytest.param("lifo", False, id="unknown"),
    pytest.param("", False, id="empty"),
])
def test_annotation_values(make, value: str, accepted: bool) -> None:
    errors = validate_object(make(value))
    if accepted:
        assert errors == []
    else:
        assert [e.path for e in errors] == [f"metadata.annotations[{ADMISSION_POLICY}]"]
        assert "supported values" in errors[0].reason


def test_annotation_of_the_wrong_type_is_reported_once() -> None:
    errors = validate_object(cq("q", policy=3))  # type: ignore[arg-type]
    assert [e.path for e in errors] == [f"metadata.annotations[{ADMISSION_POLICY}]"]


def test_annotation_elsewhere_is_not_kueueds_business() -> None:
    assert validate_object(annotated(b.local_queue("lq", "default", "q"), "lifo")) == []


def test_a_refused_update_keeps_the_earlier_policy() -> None:
    world = world_of(cohort("org", policy="fair"))
    world.apply(cohort("org", policy="lifo"))
    assert "Cohort/org" in world.rejected
    assert policy_of(world.cohorts["org"]) == "fair"
    assert cohort_policies(world) == {"org": "fair"}


def test_policy_defaults_to_fifo() -> None:
    world = world_of(cohort("org"), cq("a", "org", policy="fifo"))
    assert policy_of(world.cohorts["org"]) == policy_of(world.cluster_queues["a"]) == policy_of(None) == "fifo"
    assert cohort_policies(world) == {}


# --- the numbers ------------------------------------------------------------------------------

@pytest.mark.parametrize("used, capacity, weight, want", [
    pytest.param({"cpu": 3000}, {"cpu": 6000}, Fraction(1), Fraction(500), id="half"),
    pytest.param({"cpu": 3000}, {"cpu": 6000}, Fraction(2), Fraction(250), id="weight-2"),
    pytest.param({"cpu": 1000, "memory": 3000}, {"cpu": 4000, "memory": 4000}, Fraction(1), Fraction(750),
                 id="dominant-resource"),
    pytest.param({"gpu": 1000}, {"cpu": 4000}, Fraction(1), Fraction(0), id="nothing-lendable-ignored"),
    pytest.param({}, {"cpu": 4000}, Fraction(0), Fraction(0), id="weight-0-idle"),
    pytest.param({"cpu": 1}, {"cpu": 4000}, Fraction(0), math.inf, id="weight-0-consuming"),
])
def test_fair_share(used, capacity, weight, want) -> None:
    assert fair_share(used, capacity, weight=weight) == want


def test_guarantee_in_use() -> None:
    world = world_of(cohort("org", cpu="4"), cq("a", "org", cpu="4"), cq("none", "org"),
                     admitted("a1", "a", cpu="3"))
    snap = snapshot_of(world)
    assert guarantee_in_use(snap.cluster_queues["a"].node) == 750
    assert guarantee_in_use(snap.cluster_queues["none"].node) is None  # no guarantee to be below
    assert guarantee_in_use(snap.cohorts["org"].node) == Fraction(3000 * 1000, 8000)
    held = {CPU: 1000, MEM: 1}
    assert guarantee_in_use(snap.cluster_queues["a"].node, held) == math.inf  # holds what it has no quota of


def test_consumption_counts_what_lending_limits_keep_local() -> None:
    world = world_of(cohort("org", cpu="4"), cq("a", "org", cpu="4", lendingLimit="1"),
                     admitted("a1", "a", cpu="3"))
    snap = snapshot_of(world)
    org = snap.cohorts["org"].node
    assert org.usage.get(CPU, 0) == 0  # a's non-lendable 3 cpu never reach the cohort
    assert consumption(org) == {CPU: 3000}
    # measured against what the subtree owns (4 + 4), not the pooled subtree quota (4 + 1)
    assert org.subtree[CPU] == 5000 and owned(org) == {CPU: 8000}
    assert guarantee_in_use(org) == 375
    assert capacity_of(org) == {"cpu": 8000}


def test_capacity_counts_what_a_cohort_may_borrow_from_above() -> None:
    world = world_of(cohort("root", cpu="10"), cohort("team", "root"), cq("a", "team"))
    snap = snapshot_of(world)
    assert capacity_of(snap.cohorts["team"].node) == {"cpu": 10000}


# --- the tournament ---------------------------------------------------------------------------

def test_fair_cohort_serves_the_least_consumer_first() -> None:
    world = world_of(cohort("org", cpu="10", policy="fair"), cq("a", "org"), cq("b", "org"),
                     admitted("a1", "a", cpu="4"))
    snap = snapshot_of(world)
    entries = [entry("a", created=1, cpu=1000), entry("b", created=2, cpu=1000)]
    assert pull_all(classical_order(entries, snap), snapshot_of(world)) == ["a", "b"]
    assert pull_all(PolicyOrder(world)(entries, snap), snap) == ["b", "a"]


def test_fair_weights_divide_the_share() -> None:
    world = world_of(cohort("org", cpu="10", policy="fair"), cq("a", "org", weight="3"), cq("b", "org"),
                     admitted("a1", "a", cpu="4"), admitted("b1", "b", cpu="2"))
    snap = snapshot_of(world)
    entries = [entry("b", created=1), entry("a", created=2)]
    assert pull_all(PolicyOrder(world)(entries, snap), snap) == ["a", "b"]  # 400 / 3 < 200


def test_the_tournament_reranks_after_every_pull() -> None:
    # company (fair) over x (x1, x2) and y (y1).  x holds less and wins the first pull; x1's 5 cpu
    # then make x the bigger consumer, so y1 goes before x2 although a static order would not.
    world = world_of(cohort("company", cpu="20", policy="fair"), cohort("x", "company"), cohort("y", "company"),
                     cq("x1", "x"), cq("x2", "x"), cq("y1", "y"),
                     admitted("x-old", "x1", cpu="1"), admitted("y-old", "y1", cpu="2"))
    snap = snapshot_of(world)
    entries = [entry("x1", created=1, cpu=5000), entry("x2", created=2, cpu=1000), entry("y1", created=3)]
    assert pull_all(PolicyOrder(world)(entries, snap), snap) == ["x1", "y1", "x2"]


def test_capacity_puts_those_below_their_guarantee_first() -> None:
    world = world_of(cohort("org", cpu="10", policy="capacity"),
                     cq("over", "org", cpu="2"), cq("close", "org", cpu="4"), cq("far", "org", cpu="4"),
                     cq("none", "org"),
                     admitted("o", "over", cpu="3"), admitted("c", "close", cpu="3"), admitted("f", "far", cpu="1"))
    snap = snapshot_of(world)
    entries = [entry("none", created=1), entry("over", created=2), entry("close", created=3),
               entry("far", created=4)]
    # below their guarantee, furthest first (250, then 750); then Kueue's order among the rest
    assert pull_all(PolicyOrder(world)(entries, snap), snap) == ["far", "close", "none", "over"]


def test_ties_and_fifo_cohorts_keep_kueues_order() -> None:
    world = world_of(cohort("org", cpu="10", policy="fair"), cq("a", "org"), cq("b", "org"), cq("c", "org"))
    snap = snapshot_of(world)
    entries = [entry("c", created=3), entry("b", borrowing=1, created=1), entry("a", priority=5, created=2)]
    assert pull_all(PolicyOrder(world)(entries, snap), snap) == ["a", "c", "b"]


def test_cluster_queue_annotations_do_not_touch_the_tournament() -> None:
    world = world_of(cohort("org", cpu="10"), cq("a", "org", policy="fair"), cq("b", "org", policy="capacity"))
    assert cohort_policies(world) == {}
    order = PolicyOrder(world)
    entries = [entry("b", created=1), entry("a", created=2)]
    snap = snapshot_of(world)
    assert [e.cq for e in order(entries, snap)] == [e.cq for e in classical_order(entries, snap)]


def test_make_iterate_prefers_fair_sharing() -> None:
    world = world_of(cohort("org", policy="fair"))
    assert isinstance(make_iterate(world), PolicyOrder)
    world.apply({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": FAIR_SHARING})
    assert make_iterate(world) is fair_order


def test_a_policy_applied_while_running_takes_effect() -> None:
    world = world_of(cohort("org", cpu="6"), cq("a", "org"), cq("b", "org"), lq("lq-a", "a"), lq("lq-b", "b"),
                     admitted("a1", "a", cpu="4"))
    with LiveEngine(world) as engine:
        world.apply(cohort("org", cpu="6", policy="fair"))
        for name, queue, created in (("a-next", "lq-a", 1), ("b-next", "lq-b", 2)):
            world.apply(b.workload(name, "default", queue, created=created, cpu="2"))
        engine.rebuild()
        engine.run()
    assert "default/b-next" in world.placed
    assert "default/a-next" not in world.placed


# --- LocalQueues ------------------------------------------------------------------------------

def test_local_queue_hook_only_for_fair_and_capacity_cluster_queues() -> None:
    world = world_of(cq("fair", cpu="6", policy="fair"), cq("cap", cpu="6", policy="capacity"), cq("plain", cpu="6"),
                     lq("x", "fair", weight="2"), lq("y", "fair"),
                     admitted("x1", "fair", "x", cpu="3"), admitted("y1", "fair", "y", cpu="2"))
    with LiveEngine(world) as engine:
        snap = engine.state
        assert local_queue_hook(world, snap.cluster_queues["cap"]) is not None  # numbers: test_afs_over_time
        assert local_queue_hook(world, snap.cluster_queues["plain"]) is None
        hook = local_queue_hook(world, snap.cluster_queues["fair"])
    assert hook is not None
    x, y = world.workloads["default/x1"], world.workloads["default/y1"]
    assert hook(x) == 250.0  # 3 of 6 cpu, weight 2
    assert hook(y) == pytest.approx(1000 * 2 / 6)


def test_admission_fair_sharing_wins_over_a_fair_cluster_queue() -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "admissionFairSharing": {"usageHalfLifeTime": "1h"}}
    queue = cq("q", cpu="6", policy="fair")
    queue["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    world = world_of(config, queue, lq("x", "q"))
    with LiveEngine(world) as engine:
        hook = engine.usage_of("q")
    assert hook is not None and "local_queue_hook" not in hook.__qualname__


def test_fair_cluster_queue_serves_the_lighter_local_queue() -> None:
    objects = [cq("q", cpu="4", policy="fair"), lq("x", "q"), lq("y", "q"),
               admitted("x1", "q", "x", cpu="2"),
               b.workload("x2", "default", "x", created=1, cpu="2"),
               b.workload("y2", "default", "y", created=2, cpu="2")]
    manifests = [b.namespace("default"), b.flavor("default"), *objects]
    for report in (simulate(manifests),):
        assert report.workloads["default/y2"].state == "admitted"
        assert report.workloads["default/x2"].state == "pending"


# --- what simulate reports --------------------------------------------------------------------

def test_report_and_table_show_why_a_team_went_first() -> None:
    manifests = [b.namespace("default"), b.flavor("default"),
                 cohort("org", cpu="6", policy="fair"), cq("a", "org", weight="2"), cq("b", "org"),
                 lq("lq-a", "a"), lq("lq-b", "b"), admitted("a1", "a", cpu="4"),
                 b.workload("a-next", "default", "lq-a", created=1, cpu="2"),
                 b.workload("b-next", "default", "lq-b", created=2, cpu="2")]
    report = simulate(manifests)
    assert list(report.queues) == ["Cohort/org", "ClusterQueue/a", "ClusterQueue/b"]
    org, a, bq = (report.queues[k] for k in report.queues)
    assert (org.policy, org.depth, org.quota, org.usage) == ("fair", 0, {"default": {"cpu": "6"}},
                                                            {"default": {"cpu": "6"}})
    assert (a.parent, a.depth, a.weight, a.share, a.share_basis) == ("org", 1, "2", 334, "fair")  # 4/6 / 2
    assert (bq.share, bq.share_basis) == (334, "fair")  # 2/6, after b-next went first
    assert report.workloads["default/b-next"].state == "admitted"
    console = Console(width=160, record=True)
    render(report, console)
    text = console.export_text()
    assert "Queues" in text and "  a ClusterQueue" in text and "cpu 4/0" in text


def test_report_under_fair_sharing_shows_kueues_weighted_share() -> None:
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": FAIR_SHARING}
    manifests = [config, b.namespace("default"), b.flavor("default"), cohort("org", cpu="6", policy="fair"),
                 cq("a", "org"), lq("lq-a", "a"), admitted("a1", "a", cpu="3")]
    report = simulate(manifests)
    assert (report.queues["ClusterQueue/a"].share, report.queues["ClusterQueue/a"].share_basis) == (500, "fairSharing")
    console = Console(width=160, record=True)
    render(report, console)
    assert "ignored: fair sharing" in console.export_text()


# --- properties -------------------------------------------------------------------------------

NO_POLICY = st.just(None)


@st.composite
def trees(draw, policies=NO_POLICY, preemption: bool = False) -> list[dict]:
    """A random forest: cohorts (each under an earlier one, or a root), queues under them, workloads."""
    n_cohorts = draw(st.integers(1, 4))
    docs = []
    for i in range(n_cohorts):
        parent = draw(st.one_of(st.just(""), st.sampled_from([f"co{j}" for j in range(i)]))) if i else ""
        docs.append(cohort(f"co{i}", parent, cpu=draw(st.sampled_from(["0", "2", "4"])), policy=draw(policies),
                           weight=draw(st.sampled_from([None, "1", "2"]))))
    n_cq = draw(st.integers(2, 5))
    for i in range(n_cq):
        docs.append(cq(f"cq{i}", f"co{draw(st.integers(0, n_cohorts - 1))}", cpu=draw(st.sampled_from(["0", "1", "3"])),
                       policy=draw(policies)))
        if preemption:
            docs[-1]["spec"]["preemption"] = {
                "withinClusterQueue": draw(st.sampled_from(["Never", "LowerPriority"])),
                "reclaimWithinCohort": draw(st.sampled_from(["Never", "LowerPriority", "Any"]))}
        docs.append(lq(f"lq{i}a", f"cq{i}", weight=draw(st.sampled_from([None, "2"]))))
        docs.append(lq(f"lq{i}b", f"cq{i}"))
    for w in range(draw(st.integers(1, 10))):
        i = draw(st.integers(0, n_cq - 1))
        docs.append(b.workload(f"w{w}", "default", f"lq{i}{draw(st.sampled_from('ab'))}", created=w,
                               priority=draw(st.sampled_from([0, 0, 5])), cpu=draw(st.sampled_from(["1", "2", "3"]))))
    return docs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.data())
def test_fifo_tournament_is_kueues_order(docs, data) -> None:
    world = world_of(*docs)
    snap = snapshot_of(world)
    entries = [entry(name, borrowing=data.draw(st.integers(0, 2)), priority=data.draw(st.sampled_from([0, 1])),
                     created=data.draw(st.integers(0, 3)), cpu=data.draw(st.integers(0, 2000)))
               for name in snap.cluster_queues]
    for i, e in enumerate(entries):
        e.wl.uid = e.wl.key = f"{i:02d}"  # type: ignore[misc]
    fifo = {name: "fifo" for name in snap.cohorts}
    assert [e.cq for e in policy_order(entries, snap, policies=fifo)] == [e.cq for e in classical_order(entries, snap)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(policies=st.just("fifo")))
def test_fifo_annotations_change_nothing(docs) -> None:
    plain = [{**d, "metadata": {k: v for k, v in d["metadata"].items() if k != "annotations"}} for d in docs]
    base = [b.namespace("default"), b.flavor("default")]
    assert simulate(base + docs).workloads == simulate(base + plain).workloads


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(policies=st.sampled_from([None, "fifo", "fair", "capacity"]), preemption=True), st.data())
def test_no_policy_lets_a_node_exceed_the_tree_or_flop(docs, data) -> None:
    """Two waves: the second, of higher priority, arrives once the first has settled and preempts."""
    world = world_of(*docs)
    with LiveEngine(world) as engine:
        assert engine.run(max_cycles=200) < 200, "no quiescence"
        n_cq = len(world.cluster_queues)
        for w in range(data.draw(st.integers(1, 4))):
            world.apply(b.workload(f"late{w}", "default", f"lq{data.draw(st.integers(0, n_cq - 1))}a",
                                   created=100 + w, priority=data.draw(st.sampled_from([10, 20])),
                                   cpu=data.draw(st.sampled_from(["1", "2", "4"]))))
        engine.rebuild()
        assert engine.run(max_cycles=200) < 200, "no quiescence: the run flops"
        assert qn.violations(engine.state.nodes()) == []


def test_api_objects_carry_annotations() -> None:
    obj = api.decode(cohort("c", policy="fair"))
    assert isinstance(obj, api.Cohort) and obj.metadata.annotations == {ADMISSION_POLICY: "fair"}
