"""Classical preemption: policies, candidate classes, ordering, minimal set, KEP-1337.

Each test builds a small forest with admitted workloads (``forest`` below reads like
Kueue's ``MakeClusterQueue(...).Cohort(...)`` setups) and asks the preemptor for
targets directly, or runs the whole engine to quiescence where the point is what
happens after the victims are requeued (flopping, chains of reclaims).
"""

from __future__ import annotations

from typing import Any

import pytest

from kueued.model import api
from kueued.scheduling.cycle import Target
from kueued.scheduling.flavors import Assignment, Mode, PodSetAssignment, ResourceChoice
from kueued.scheduling.forest import build_forest
from kueued.scheduling.preemption import (
    ClassicalPreemptor,
    candidate_order_key,
    fill_back,
    minimal_targets,
    restore,
    satisfies_preemption_policy,
    workload_fits,
)
from kueued.scheduling.preemption.candidates import Variant, collect_candidates, is_valid
from kueued.scheduling.preemption.classical import attempts
from kueued.scheduling.preemption.policy import above_borrowing_threshold, borrow_within_cohort
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.simulate import Report
from kueued.world import World
from tests import builders as b

CPU = ("default", "cpu")
MEM = ("default", "memory")


# --- builders ---------------------------------------------------------------------------------

def cq(name: str, cohort: str = "", *, cpu: Any = "0", memory: Any = None, **preemption: Any) -> dict:
    """cq("a", "co", cpu=("4", borrowingLimit, lendingLimit), withinClusterQueue="LowerPriority")."""
    res = {"cpu": cpu} if memory is None else {"cpu": cpu, "memory": memory}
    return b.cluster_queue(name, b.quotas("default", **res), cohort=cohort, preemption=preemption or None)


def cohort(name: str, parent: str = "", *, cpu: Any = None) -> dict:
    return b.cohort(name, *([b.quotas("default", cpu=cpu)] if cpu is not None else []), parent=parent)


def _workload(name: str, *, priority: int, created: int, requests: dict[str, str]) -> dict:
    m = b.workload(name, "default", "main", created=created, priority=priority, **requests)
    m["metadata"]["uid"] = name
    return m


def admitted(name: str, queue: str, *, priority: int = 0, reserved: int = 0, created: int = 0,
             evicted: bool = False, **usage: str) -> dict:
    m = _workload(name, priority=priority, created=created, requests=usage)
    stamp = f"2026-01-01T01:{reserved // 60:02d}:{reserved % 60:02d}Z"
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp}]
    if evicted:
        conditions.append({"type": "Evicted", "status": "True", "lastTransitionTime": stamp})
    m["status"] = {"admission": {"clusterQueue": queue, "podSetAssignments": [{
        "name": "main", "flavors": {r: "default" for r in usage}, "resourceUsage": usage, "count": 1}]},
        "conditions": conditions}
    return m


def incoming(name: str = "in", *, priority: int = 0, created: int = 0, **requests: str) -> WorkloadInfo:
    obj = api.decode(_workload(name, priority=priority, created=created, requests=requests))
    assert isinstance(obj, api.Workload)
    return WorkloadInfo.of(obj, priority=priority)


def forest(*objects: dict) -> Snapshot:
    """A snapshot of the quota objects with the admitted workloads charged."""
    decoded = [api.decode(o) for o in objects]
    snap = build_forest(
        cluster_queues={o.metadata.name: o for o in decoded if isinstance(o, api.ClusterQueue)},
        cohorts={o.metadata.name: o for o in decoded if isinstance(o, api.Cohort)},
        flavors={"default": api.decode(b.flavor("default"))})  # type: ignore[dict-item]
    for o in decoded:
        if isinstance(o, api.Workload):
            snap.add_workload(WorkloadInfo.of(o, priority=o.spec.priority or 0))
    return snap


def targets(snap: Snapshot, queue: str, wl: WorkloadInfo, **modes: Mode) -> list[tuple[str, str]]:
    """Victims (name, reason) for ``wl`` in ``queue``; ``modes`` grade resources (default PREEMPT)."""
    a = Assignment()
    psa = PodSetAssignment(wl.pod_sets[0])
    for res, v in wl.pod_sets[0].requests.items():
        psa.choices[res] = ResourceChoice("default", modes.get(res, Mode.PREEMPT), 0, v)
    a.add(psa)
    before = {n: dict(c.node.usage) for n, c in snap.cluster_queues.items()}
    found = ClassicalPreemptor(snap).get_targets(snap.cluster_queues[queue], wl, a)
    assert {n: dict(c.node.usage) for n, c in snap.cluster_queues.items()} == before, "snapshot not restored"
    return sorted((t.workload.name, t.reason) for t in found)


def run(*objects: dict) -> World:
    """Apply objects (plus a namespace, flavor and a LocalQueue per ClusterQueue) and run to quiescence."""
    return run_reported(*objects)[0]


def run_reported(*objects: dict) -> tuple[World, Report]:
    from actors.simulation import run_actors
    world = World()
    world.apply(b.flavor("default"))
    for o in objects:
        world.apply(o)
        if o["kind"] == "ClusterQueue":
            world.apply(b.local_queue(o["metadata"]["name"], "default", o["metadata"]["name"]))
    return world, run_actors(world)


def pending_in(name: str, queue: str, *, priority: int = 0, created: int = 0, **requests: str) -> dict:
    m = _workload(name, priority=priority, created=created, requests=requests)
    m["spec"]["queueName"] = queue
    return m


def admitted_in(name: str, queue: str, **kw: Any) -> dict:
    m = admitted(name, queue, **kw)
    m["spec"]["queueName"] = queue
    return m


# --- policies ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("policy", "candidate", "created", "allowed"), [
    pytest.param("Never", -5, 10, False, id="never"),
    pytest.param("LowerPriority", -1, 10, True, id="lower-priority-lower"),
    pytest.param("LowerPriority", 0, 10, False, id="lower-priority-equal"),
    pytest.param("LowerOrNewerEqualPriority", 0, 10, True, id="newer-equal"),
    pytest.param("LowerOrNewerEqualPriority", 0, 5, False, id="same-time-equal"),
    pytest.param("LowerOrNewerEqualPriority", 0, 1, False, id="older-equal"),
    pytest.param("LowerOrNewerEqualPriority", 1, 10, False, id="newer-higher"),
    pytest.param("Any", 7, 0, True, id="any"),
])
def test_satisfies_preemption_policy(policy: str, candidate: int, created: int, allowed: bool) -> None:
    preemptor = incoming(priority=0, created=5, cpu="1")
    victim = incoming("v", priority=candidate, created=created, cpu="1")
    assert satisfies_preemption_policy(policy, preemptor, victim) is allowed


@pytest.mark.parametrize(("candidate", "threshold", "above"), [
    pytest.param(0, None, True, id="equal-priority"),
    pytest.param(-1, None, False, id="lower-no-threshold"),
    pytest.param(-1, -2, True, id="lower-above-threshold"),
    pytest.param(-2, -2, False, id="at-threshold"),
])
def test_borrowing_threshold(candidate: int, threshold: int | None, above: bool) -> None:
    assert above_borrowing_threshold(candidate, 0, threshold) is above


def test_borrow_within_cohort_defaults_to_forbidden() -> None:
    snap = forest(cq("a", "co"), cq("b", "co", borrowWithinCohort={"policy": "LowerPriority",
                                                                  "maxPriorityThreshold": 3}))
    assert borrow_within_cohort(snap.cluster_queues["a"]) == (True, None)
    assert borrow_within_cohort(snap.cluster_queues["b"]) == (False, 3)


# --- ordering ---------------------------------------------------------------------------------

def test_candidate_order() -> None:
    snap = forest(
        cq("a", "co", cpu="10", withinClusterQueue="Any"), cq("b", "co"),
        admitted("own-low", "a", priority=-5, cpu="1"),
        admitted("other-high-old", "b", priority=3, reserved=1, cpu="1"),
        admitted("other-high-new", "b", priority=3, reserved=9, cpu="1"),
        admitted("other-low", "b", priority=1, reserved=1, cpu="1"),
        admitted("evicting", "a", priority=9, evicted=True, cpu="1"),
        admitted("tie-b", "b", priority=3, reserved=9, cpu="1"),
    )
    wls = [w for c in snap.cluster_queues.values() for w in c.workloads.values()]
    order = [w.name for w in sorted(wls, key=candidate_order_key("a"))]
    assert order == ["evicting", "other-low", "other-high-new", "tie-b", "other-high-old", "own-low"]


# --- candidate classes -----------------------------------------------------------------------

def _classes(snap: Snapshot, queue: str, wl: WorkloadInfo, frs: set) -> dict[str, Variant]:
    cs = collect_candidates(snap, snap.cluster_queues[queue], wl, wl_usage(wl), frs)
    return {c.wl.name: c.variant for c in cs.ordered()}


def wl_usage(wl: WorkloadInfo) -> dict:
    return {("default", r): v for r, v in wl.total_requests().items()}


@pytest.mark.parametrize(("request_cpu", "bwc", "expected"), [
    pytest.param("2", None, Variant.HIERARCHICAL_RECLAIM, id="fits-nominal-advantage"),
    pytest.param("5", None, Variant.RECLAIM_WITHOUT_BORROWING, id="borrowing-no-bwc"),
    pytest.param("5", {"policy": "LowerPriority"}, Variant.RECLAIM_WHILE_BORROWING, id="bwc-lower"),
    pytest.param("5", {"policy": "LowerPriority", "maxPriorityThreshold": -2},
                 Variant.RECLAIM_WITHOUT_BORROWING, id="bwc-above-threshold"),
])
def test_candidate_class(request_cpu: str, bwc: dict | None, expected: Variant) -> None:
    pre: dict[str, Any] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    if bwc:
        pre["borrowWithinCohort"] = bwc
    snap = forest(cq("a", "co", cpu="4", **pre), cq("b", "co", cpu="2"),
                  admitted("own", "a", priority=-1, cpu="1"),
                  admitted("borrower", "b", priority=-1, cpu="5"))
    wl = incoming(cpu=request_cpu)
    assert _classes(snap, "a", wl, {CPU}) == {"own": Variant.WITHIN_CQ, "borrower": expected}


def test_candidates_must_use_a_resource_needing_preemption() -> None:
    snap = forest(cq("a", cpu="4", memory="4", withinClusterQueue="LowerPriority"),
                  admitted("cpu-only", "a", priority=-1, cpu="4"),
                  admitted("mem-only", "a", priority=-1, memory="1"))
    assert _classes(snap, "a", incoming(cpu="1", memory="1"), {CPU}) == {"cpu-only": Variant.WITHIN_CQ}


def test_no_cohort_candidates_from_queues_within_nominal() -> None:
    snap = forest(cq("a", "co", cpu="4", reclaimWithinCohort="Any"), cq("b", "co", cpu="6"),
                  admitted("b1", "b", cpu="6"))
    assert _classes(snap, "a", incoming(cpu="2"), {CPU}) == {}


# --- multi-level trees and lending limits -----------------------------------------------------

def _tree() -> list[dict]:
    # r -> { c(2) -> {q(nominal 4), q-same(0)}, q-borrowing(0) }
    return [cohort("r"), cohort("c", "r", cpu="2"),
            cq("q", "c", cpu="4", reclaimWithinCohort="Any"), cq("q-same", "c"), cq("q-borrowing", "r")]


def test_hierarchical_reclaim_reaches_every_subtree_up_to_the_root() -> None:
    snap = forest(*_tree(), admitted("same", "q-same", priority=10, cpu="3"),
                  admitted("far", "q-borrowing", priority=10, cpu="3"))
    cs = collect_candidates(snap, snap.cluster_queues["q"], incoming(cpu="4"), {CPU: 4000}, {CPU})
    assert {c.wl.name: (c.variant, c.lca.name if c.lca else None) for c in cs.ordered()} == {
        "same": (Variant.HIERARCHICAL_RECLAIM, "c"), "far": (Variant.HIERARCHICAL_RECLAIM, "r")}
    assert targets(snap, "q", incoming(cpu="4")) == [("far", "InCohortReclamation"),
                                                      ("same", "InCohortReclamation")]


def test_advantage_starts_at_the_first_ancestor_that_fits() -> None:
    # q has no quota; cohort c (4) fits the request, so only workloads outside c are
    # hierarchical candidates; a sibling inside c is a priority candidate.
    snap = forest(cohort("r"), cohort("c", "r", cpu="4"),
                  cq("q", "c", reclaimWithinCohort="Any"), cq("q-same", "c"), cq("q-far", "r"),
                  admitted("same", "q-same", cpu="1"), admitted("far", "q-far", cpu="3"))
    assert _classes(snap, "q", incoming(cpu="2"), {CPU}) == {
        "far": Variant.HIERARCHICAL_RECLAIM, "same": Variant.RECLAIM_WITHOUT_BORROWING}


def test_cohort_lending_limit_keeps_its_local_quota_out_of_reach() -> None:
    # team-a (subtree 4, lends at most 2) <- qa(4); team-b <- qb(0) borrows team-a's lent 2.
    objects = [cohort("r"), cohort("team-a", "r"), cohort("team-b", "r"),
               cq("qa", "team-a", cpu="4", reclaimWithinCohort="Any"), cq("qb", "team-b")]
    objects[1]["spec"]["resourceGroups"] = [{"coveredResources": ["cpu"], "flavors": [
        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "0", "lendingLimit": "2"}]}]}]
    snap = forest(*objects, admitted("qa-1", "qa", cpu="2"), admitted("qb-1", "qb", priority=9, cpu="2"))
    qa = snap.cluster_queues["qa"]
    assert qa.available(CPU) == 0
    assert targets(snap, "qa", incoming(cpu="2")) == [("qb-1", "InCohortReclamation")]
    # qa's own 2 cpu sit in team-a's local quota: no cohort is above its quota there.
    assert targets(snap, "qb", incoming(priority=99, cpu="2")) == []


def test_cq_lending_limit_reclaim_from_lender() -> None:
    snap = forest(cq("lend1", "co", cpu=("6", None, "4"), reclaimWithinCohort="Any"),
                  cq("lend2", "co", cpu=("6", None, "2")),
                  admitted("lend1-a", "lend1", cpu="2"),
                  admitted("lend2-a", "lend2", priority=5, reserved=1, cpu="6"),
                  admitted("lend2-b", "lend2", priority=5, reserved=2, cpu="3"))
    # lend2 uses 9 of its 6: 3 borrowed from lend1's lent 4; lend1 wants 4 within nominal.
    assert targets(snap, "lend1", incoming(cpu="4")) == [("lend2-b", "InCohortReclamation")]


# --- attempts, validity, minimal set ------------------------------------------------------------

def test_attempts() -> None:
    snap = forest(cq("a", "co", cpu="4", reclaimWithinCohort="Any", withinClusterQueue="Any"),
                  cq("bwc", "co", cpu="4", reclaimWithinCohort="Any",
                     borrowWithinCohort={"policy": "LowerPriority"}),
                  cq("b", "co"), admitted("b1", "b", cpu="3"), admitted("a1", "a", cpu="1"))
    a, bwc = snap.cluster_queues["a"], snap.cluster_queues["bwc"]
    # a is strictly under nominal, the request does not fit it: priority candidates only.
    cs = collect_candidates(snap, a, incoming(cpu="5"), {CPU: 5000}, {CPU})
    assert attempts(a, cs, {CPU}) == [False, True]
    cs = collect_candidates(snap, a, incoming(cpu="2"), {CPU: 2000}, {CPU})
    assert attempts(a, cs, {CPU}) == [True, False]  # hierarchical candidates
    cs = collect_candidates(snap, bwc, incoming(cpu="6"), {CPU: 6000}, {CPU})
    assert attempts(bwc, cs, {CPU}) == [True, False]
    snap.add_workload(WorkloadInfo.of(api.decode(admitted("a2", "a", cpu="3")), priority=0))  # type: ignore[arg-type]
    cs = collect_candidates(snap, a, incoming(cpu="2"), {CPU: 2000}, {CPU})
    assert attempts(a, cs, {CPU}) == [True]  # a at nominal: only the borrowing attempt


def test_evicting_one_borrower_can_protect_the_rest() -> None:
    snap = forest(cq("c1", "co", cpu="4", reclaimWithinCohort="Any"), cq("c2", "co", cpu="4"),
                  admitted("c2-a", "c2", reserved=2, cpu="3"), admitted("c2-b", "c2", reserved=1, cpu="3"))
    c1 = snap.cluster_queues["c1"]
    cs = collect_candidates(snap, c1, incoming(cpu="4"), {CPU: 4000}, {CPU})
    first, second = cs.ordered()
    assert is_valid(snap, c1, second, {CPU}, borrowing=False)
    with snap.without([first.wl]):
        assert not is_valid(snap, c1, second, {CPU}, borrowing=False)
    # 2 free + 3 reclaimed from c2-a: c1 fits its 4 cpu after one eviction.
    assert targets(snap, "c1", incoming(cpu="4")) == [("c2-a", "InCohortReclamation")]


def test_minimal_set_fills_back_cheaper_victims() -> None:
    snap = forest(cq("a", cpu="4", withinClusterQueue="LowerPriority"),
                  admitted("low", "a", priority=-2, cpu="1"), admitted("mid", "a", priority=-1, cpu="2"),
                  admitted("high", "a", priority=5, cpu="1"))
    assert targets(snap, "a", incoming(cpu="2")) == [("mid", "InClusterQueue")]


def test_no_partial_preemption() -> None:
    snap = forest(cq("a", cpu="4", withinClusterQueue="LowerPriority"),
                  admitted("low", "a", priority=-1, cpu="3"), admitted("same", "a", priority=0, cpu="1"))
    assert targets(snap, "a", incoming(cpu="4")) == []


def test_fill_back_keeps_the_last_removed() -> None:
    snap = forest(cq("a", cpu="4"), admitted("x", "a", cpu="1"), admitted("y", "a", cpu="1"),
                  admitted("z", "a", cpu="2"))
    wls = {w.name: w for w in snap.cluster_queues["a"].workloads.values()}
    a = snap.cluster_queues["a"]
    ts = [Target(wls[n], "InClusterQueue") for n in ("x", "y", "z")]
    for t in ts:
        snap.remove_workload(t.workload)
    kept = fill_back(snap, ts, lambda: workload_fits(a, {CPU: 2000}, allow_borrowing=False))
    assert [t.workload.name for t in kept] == ["z"]
    restore(snap, kept)
    assert a.usage(CPU) == 4000
    assert minimal_targets(snap, iter(ts), lambda: a.available(CPU) >= 5000) == []
    assert a.usage(CPU) == 4000


def test_other_resource_forcing_borrowing_excludes_reclaim_without_borrowing() -> None:
    # memory can only be had by borrowing, so c2's borrowers (no hierarchical advantage,
    # no borrowWithinCohort) are out of reach and c1 preempts its own workload.
    snap = forest(cq("c1", "co", cpu="6", memory="3Gi", withinClusterQueue="LowerPriority",
                     reclaimWithinCohort="LowerPriority"),
                  cq("c2", "co", cpu="6", memory="3Gi", reclaimWithinCohort="Any"),
                  admitted("c1-med", "c1", priority=-1, cpu="4"),
                  admitted("c2-low-1", "c2", priority=-1, cpu="5"),
                  admitted("c2-low-2", "c2", priority=-1, cpu="1"),
                  admitted("c2-low-3", "c2", priority=-1, cpu="1"))
    wl = incoming(cpu="2", memory="5Gi")
    assert targets(snap, "c1", wl, memory=Mode.FIT) == [("c1-med", "InClusterQueue")]
    assert targets(snap, "c1", wl) == [("c1-med", "InClusterQueue")]


# --- the oracle -------------------------------------------------------------------------------

def test_oracle_modes_and_borrowing_after_preemption() -> None:
    snap = forest(cq("a", "co", cpu="4", withinClusterQueue="LowerPriority", reclaimWithinCohort="Any"),
                  cq("b", "co", cpu="2"),
                  admitted("a-low", "a", priority=-1, cpu="2"), admitted("b-borrow", "b", cpu="4"))
    p = ClassicalPreemptor(snap)
    a = snap.cluster_queues["a"]
    # Reclaiming the borrowed 2 from b is preferred (other queues first) and enough.
    assert p.oracle(a, incoming(cpu="2"), CPU, 2000) == (Mode.RECLAIM, 0)
    # 4 more would not fit a's nominal: no advantage, so b is reclaimed only in the
    # no-borrowing attempt, which also needs a-low.
    assert p.oracle(a, incoming(cpu="4"), CPU, 4000) == (Mode.PREEMPT, 0)
    # Without a-low (not lower priority) reclaiming b alone cannot avoid borrowing.
    assert p.oracle(a, incoming(priority=-9, cpu="4"), CPU, 4000) == (Mode.NO_CANDIDATES, 1)


# --- KEP-1337 ---------------------------------------------------------------------------------

def _story(*workloads: dict) -> Report:
    """KEP-1337 story 1: every quota sits in `shared`; standard/best-effort queues borrow it."""
    standard = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}
    best_effort = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    objects = [cq("shared", "all", cpu=("10", "0")),
               cq("a-standard", "all", cpu=("0", "10"), **standard),
               cq("a-best-effort", "all", cpu=("0", "10"), **best_effort),
               cq("b-standard", "all", cpu=("0", "10"), **standard),
               cq("b-best-effort", "all", cpu=("0", "10"), **best_effort)]
    return run_reported(*objects, *workloads)[1]


def _state(report: Report) -> dict[str, tuple[bool, int]]:
    """Each workload's name: whether it ends admitted, and how often it was evicted."""
    return {key.split("/")[1]: (r.state == "admitted", r.preemptions) for key, r in report.workloads.items()}


def test_kep1337_borrowing_standard_preempts_low_priority_best_effort() -> None:
    report = _story(admitted_in("b-be", "b-best-effort", priority=50, cpu="10"),
                   pending_in("a-std", "a-standard", priority=300, created=5, cpu="6"))
    assert _state(report) == {"b-be": (False, 1), "a-std": (True, 0)}


def test_kep1337_never_preempts_above_the_threshold_while_borrowing() -> None:
    report = _story(admitted_in("b-be", "b-best-effort", priority=150, cpu="10"),
                   pending_in("a-std", "a-standard", priority=300, created=5, cpu="6"))
    assert _state(report) == {"b-be": (True, 0), "a-std": (False, 0)}


def test_kep1337_no_flopping_between_equal_priority_borrowers() -> None:
    report = _story(admitted_in("b-std", "b-standard", priority=300, cpu="10"),
                   pending_in("a-std", "a-standard", priority=300, created=5, cpu="6"))
    assert _state(report) == {"b-std": (True, 0), "a-std": (False, 0)}


def test_kep1337_victim_does_not_preempt_back() -> None:
    # a-std takes b-be's place; b-be (lower priority, best effort) cannot evict it back,
    # and the engine reaches quiescence with exactly one eviction.
    report = _story(admitted_in("b-be", "b-best-effort", priority=50, reserved=1, cpu="5"),
                   admitted_in("a-be", "a-best-effort", priority=60, reserved=2, cpu="5"),
                   pending_in("a-std", "a-standard", priority=300, created=5, cpu="5"))
    assert _state(report) == {"b-be": (False, 1), "a-be": (True, 0), "a-std": (True, 0)}


def test_kep1337_not_borrowing_reclaims_regardless_of_threshold() -> None:
    _, report = run_reported(cq("a-standard", "all", cpu="2", reclaimWithinCohort="Any",
                                borrowWithinCohort={"policy": "LowerPriority", "maxPriorityThreshold": 0}),
                             cq("b", "all", cpu="0"),
                             admitted_in("b-high", "b", priority=50, cpu="2"),
                             pending_in("a1", "a-standard", priority=1, created=5, cpu="1"))
    assert _state(report) == {"b-high": (False, 1), "a1": (True, 0)}
