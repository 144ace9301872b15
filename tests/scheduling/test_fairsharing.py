"""Fair sharing: shares, the admission tournament, target order, strategies, AFS.

Unit tests build a small forest with admitted workloads (``forest``) and call the
pieces directly; the properties run the sync engine with *finishing* workloads (the
oldest admitted one finishes, every queue is topped up so demand stays saturated)
and check that the steady state shares capacity by weight.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.harness import LiveEngine
from kueued.engine.wiring import NoPreemption, make_preemptor
from kueued.model import api
from kueued.quota.node import FR
from kueued.scheduling.cycle import Entry
from kueued.scheduling.fairsharing import (
    DRS,
    FairPreemptor,
    Shares,
    TargetOrdering,
    UsageLedger,
    alpha,
    compare,
    fair_order,
    fair_targets,
)
from kueued.scheduling.fairsharing import admission as afs
from kueued.scheduling.fairsharing.ordering import almost_lcas
from kueued.scheduling.fairsharing.preemption import less_than_initial_share, less_than_or_equal_to_final_share
from kueued.scheduling.fairsharing.share import parse_weight
from kueued.scheduling.flavors import Mode, assign_flavors
from kueued.scheduling.forest import build_forest
from kueued.scheduling.queues import PendingQueue, RequeueReason
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.workload import WorkloadInfo
from kueued.world import Settings, World
from tests import builders as b

CPU: FR = ("default", "cpu")
MEM: FR = ("default", "memory")
STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]


# --- builders ---------------------------------------------------------------------------------

def configuration(strategies: list[str] | None = None, **extra: Any) -> dict:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "fairSharing": {"preemptionStrategies": strategies or STRATEGIES}, **extra}


def cq(name: str, cohort: str = "", *, cpu: Any = "0", memory: Any = None, weight: str | None = None,
       spec: dict | None = None, **preemption: Any) -> dict:
    """cq("a", "all", cpu="3", weight="2", reclaimWithinCohort="Any"); ``spec`` adds other fields."""
    res = {"cpu": cpu} if memory is None else {"cpu": cpu, "memory": memory}
    extra = dict(spec or {})
    if weight is not None:
        extra["fairSharing"] = {"weight": weight}
    return b.cluster_queue(name, b.quotas("default", **res), cohort=cohort, preemption=preemption or None,
                           **extra)


def cohort(name: str, parent: str = "", *, cpu: Any = None, weight: str | None = None) -> dict:
    m = b.cohort(name, *([b.quotas("default", cpu=cpu)] if cpu is not None else []), parent=parent)
    if weight is not None:
        m["spec"]["fairSharing"] = {"weight": weight}
    return m


def admitted(name: str, queue: str, *, priority: int = 0, reserved: int = 0, **usage: str) -> dict:
    m = b.workload(name, "default", queue, priority=priority, **usage)
    m["metadata"]["uid"] = name
    stamp = f"2026-01-01T01:{reserved // 60:02d}:{reserved % 60:02d}Z"
    m["status"] = {"admission": {"clusterQueue": queue, "podSetAssignments": [{
        "name": "main", "flavors": {r: "default" for r in usage}, "resourceUsage": usage, "count": 1}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp}]}
    return m


def incoming(name: str = "in", queue: str = "a", *, priority: int = 0, created: int = 100,
             **requests: str) -> WorkloadInfo:
    m = b.workload(name, "default", queue, created=created, priority=priority, **requests)
    m["metadata"]["uid"] = name
    obj = api.decode(m)
    assert isinstance(obj, api.Workload)
    return WorkloadInfo.of(obj, priority=priority)


def forest(*objects: dict) -> Snapshot:
    decoded = [api.decode(o) for o in objects]
    snap = build_forest(
        cluster_queues={o.metadata.name: o for o in decoded if isinstance(o, api.ClusterQueue)},
        cohorts={o.metadata.name: o for o in decoded if isinstance(o, api.Cohort)},
        flavors={"default": api.decode(b.flavor("default"))},  # type: ignore[dict-item]
        fair_sharing=True)
    for o in decoded:
        if isinstance(o, api.Workload):
            snap.add_workload(WorkloadInfo.of(o, priority=o.spec.priority or 0))
    return snap


def share(snap: Snapshot, name: str) -> float:
    item = snap.cluster_queues.get(name) or snap.cohorts[name]
    return float(Shares(snap).of(item.node).weighted())


def entry(snap: Snapshot, wl: WorkloadInfo, queue: str) -> Entry:
    e = Entry(wl, queue)
    e.assignment = assign_flavors(snap, snap.cluster_queues[queue], wl, NoPreemption().oracle)
    return e


def victims(snap: Snapshot, queue: str, wl: WorkloadInfo, strategies: list[str] | None = None,
            **gates: bool) -> list[tuple[str, str]]:
    def usage() -> dict:
        return {n: {fr: v for fr, v in c.node.usage.items() if v} for n, c in snap.cluster_queues.items()}
    before = usage()
    requests = {("default", r): v for r, v in wl.total_requests().items()}
    found = fair_targets(snap, snap.cluster_queues[queue], wl, requests, {CPU},
                         settings=Settings(fair_sharing=True, feature_gates=gates),
                         strategies=strategies)
    assert usage() == before, "snapshot not restored"
    return sorted((t.workload.name, t.reason) for t in found)


def base_cqs(*extra: dict, **policies: Any) -> list[dict]:
    """Kueue's preemption_fair_test baseCQs: a, b, c (3 cpu each) and preemptible (0) in cohort all."""
    policy = policies or {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    return [cq(n, "all", cpu="3", **policy) for n in "abc"] + [cq("preemptible", "all")] + list(extra)


# --- shares -----------------------------------------------------------------------------------

def test_not_borrowing_and_root_have_zero_share() -> None:
    snap = forest(*base_cqs(admitted("a1", "a", cpu="3")))
    assert share(snap, "a") == 0
    assert share(snap, "all") == 0  # a root


def test_share_is_borrowed_over_lendable_per_mille() -> None:
    snap = forest(*base_cqs(admitted("b1", "b", cpu="6")))
    drs = Shares(snap).of(snap.cluster_queues["b"].node)
    assert drs.ratio == Fraction(3000 * 1000, 9000)
    assert drs.dominant == "cpu" and drs.borrowing and drs.borrowed == frozenset({CPU})


def test_share_with_extra_usage_counts_the_incoming_workload() -> None:
    snap = forest(*base_cqs(admitted("b1", "b", cpu="3")))
    node = snap.cluster_queues["b"].node
    assert Shares(snap).of(node).is_zero
    assert Shares(snap).of(node, {CPU: 1000}).ratio == Fraction(1000 * 1000, 9000)


def test_dominant_resource_picks_the_larger_ratio_and_ties_by_name() -> None:
    snap = forest(cq("a", "all", cpu="1", memory="1"), cq("b", "all", cpu="9", memory="3"),
                  admitted("a1", "a", cpu="2", memory="2"))
    drs = Shares(snap).of(snap.cluster_queues["a"].node)
    assert (drs.dominant, drs.ratio) == ("memory", Fraction(1000 * 1000, 4000))
    tie = forest(cq("a", "all", cpu="1", memory="1"), cq("b", "all", cpu="3", memory="3"),
                 admitted("a1", "a", cpu="2", memory="2"))
    assert Shares(tie).of(tie.cluster_queues["a"].node).dominant == "cpu"


def test_lendable_respects_lending_limits() -> None:
    # b lends at most 1 of its 3: the cohort can hand a at most 3 + 1 = 4.
    snap = forest(cq("a", "all", cpu="3"), cq("b", "all", cpu=("3", None, "1")),
                  admitted("a1", "a", cpu="4"))
    assert Shares(snap).of(snap.cluster_queues["a"].node).ratio == Fraction(1000 * 1000, 4000)


@pytest.mark.parametrize(("weight", "expected"), [
    pytest.param("1", 333.3, id="default"),
    pytest.param("2", 166.7, id="double"),
    pytest.param("0.5", 666.7, id="half"),
    pytest.param("0", math.inf, id="zero-borrowing"),
])
def test_weight_divides_the_share(weight: str, expected: float) -> None:
    snap = forest(*base_cqs(), cq("w", "all", weight=weight), admitted("w1", "w", cpu="3"))
    assert share(snap, "w") == pytest.approx(expected, rel=1e-3)


def test_zero_weight_not_borrowing_has_zero_share() -> None:
    snap = forest(*base_cqs(), cq("w", "all", cpu="3", weight="0"), admitted("w1", "w", cpu="3"))
    assert share(snap, "w") == 0


def test_parse_weight_defaults_to_one() -> None:
    assert parse_weight(None) == 1
    assert parse_weight(api.FairSharing(weight="0.1")) == Fraction(1, 10)


def test_compare_puts_zero_weight_borrowers_above_every_finite_share() -> None:
    big = DRS(Fraction(1), Fraction(10**6), "cpu", frozenset({CPU}))
    zero_small = DRS(Fraction(0), Fraction(1), "cpu", frozenset({CPU}))
    zero_large = DRS(Fraction(0), Fraction(5), "cpu", frozenset({CPU}))
    not_borrowing = DRS(Fraction(0))
    assert compare(zero_small, big) == 1 and compare(big, zero_small) == -1
    assert compare(zero_small, zero_large) == -1  # two zero-weight borrowers: unweighted ratios
    assert compare(not_borrowing, DRS(Fraction(1))) == 0
    assert zero_small.rounded() == 2**63 - 1 and big.rounded() == 10**6


# --- admission tournament ---------------------------------------------------------------------

def order(snap: Snapshot, *entries: Entry) -> list[str]:
    """Consume fair_order like the cycle does: each entry's usage is added before the next pop."""
    out = []
    for e in fair_order(list(entries), snap):
        out.append(e.wl.name)
        assert e.assignment is not None
        snap.cluster_queues[e.cq].add_usage(e.assignment.usage)
        e.status = "admitted"
    return out


def test_tournament_lowest_share_after_admission_first() -> None:
    # b already runs 10 of 100; with b1 (50) b reaches 600, with c1 (75) c reaches 750.
    snap = forest(cohort("co", cpu="100"), cq("b", "co"), cq("c", "co"), admitted("b0", "b", cpu="10"))
    first = order(snap, entry(snap, incoming("c1", "c", created=1, cpu="75"), "c"),
                  entry(snap, incoming("b1", "b", created=2, cpu="50"), "b"))
    assert first == ["b1", "c1"]


def test_tournament_prefers_the_subtree_that_does_not_borrow() -> None:
    snap = forest(cohort("root"), cohort("ca", "root", cpu="10"), cohort("cb", "root"),
                  cq("qa", "ca"), cq("qb", "cb", cpu="5"), cq("qc", "cb"), admitted("c0", "qc", cpu="10"))
    e_b = entry(snap, incoming("wl-b", "qb", created=1, cpu="5"), "qb")
    e_a = entry(snap, incoming("wl-a", "qa", created=2, cpu="5"), "qa")
    assert order(snap, e_b, e_a)[0] == "wl-a"


def test_tournament_recomputes_shares_between_pops() -> None:
    # Two heads of equal size: after the first is admitted its cohort's share rose.
    snap = forest(cohort("root", cpu="12"), cohort("l", "root"), cohort("r", "root"),
                  cq("l1", "l"), cq("l2", "l"), cq("r1", "r"))
    es = [entry(snap, incoming(n, q, created=i, cpu="2"), q)
          for i, (n, q) in enumerate([("x", "l1"), ("y", "l2"), ("z", "r1")])]
    assert order(snap, *es) == ["x", "z", "y"]


def test_tournament_ties_go_to_priority_then_age() -> None:
    snap = forest(cohort("co", cpu="10"), cq("a", "co"), cq("b", "co"))
    old = entry(snap, incoming("old", "a", created=1, cpu="1"), "a")
    high = entry(snap, incoming("high", "b", created=5, priority=3, cpu="1"), "b")
    assert order(snap, old, high) == ["high", "old"]
    snap2 = forest(cohort("co", cpu="10"), cq("a", "co"), cq("b", "co"))
    young = entry(snap2, incoming("young", "b", created=9, cpu="1"), "b")
    older = entry(snap2, incoming("older", "a", created=2, cpu="1"), "a")
    assert order(snap2, young, older) == ["older", "young"]


def test_cluster_queue_without_cohort_is_yielded_as_is() -> None:
    snap = forest(cq("solo", cpu="4"), cq("a", "co"), cohort("co", cpu="4"))
    got = order(snap, entry(snap, incoming("s", "solo", cpu="1"), "solo"),
                entry(snap, incoming("t", "a", cpu="1"), "a"))
    assert sorted(got) == ["s", "t"]


# --- target queue order and almost-LCAs ---------------------------------------------------------

def test_target_ordering_visits_highest_share_first_and_prunes_non_borrowers() -> None:
    snap = forest(*base_cqs(admitted("a1", "a", cpu="3"), admitted("b1", "b", cpu="5", reserved=1),
                            admitted("c1", "c", cpu="4", reserved=2)))
    cands = [w for q in "abc" for w in snap.cluster_queues[q].workloads.values()]
    ordering = TargetOrdering(snap, Shares(snap), snap.cluster_queues["preemptible"], cands,
                              compare_candidates=lambda x, y: 0)
    seen = []
    for target in ordering.targets():
        seen.append(target.name)
        ordering.pop(target)
    assert seen == ["b", "c"]  # a does not borrow: never visited


def test_almost_lcas_are_the_children_below_the_common_cohort() -> None:
    snap = forest(cohort("root"), cohort("l", "root"), cohort("r", "root"), cq("l1", "l"), cq("l2", "l"),
                  cq("r1", "r"))
    node = {n: c.node for n, c in snap.cluster_queues.items()}
    assert [x.name for x in almost_lcas(node["l1"], node["l2"])] == ["l1", "l2"]
    assert [x.name for x in almost_lcas(node["l1"], node["r1"])] == ["l", "r"]


# --- strategies ---------------------------------------------------------------------------------

def test_strategy_rules() -> None:
    one, two = DRS(Fraction(1), Fraction(1), "cpu", frozenset({CPU})), DRS(Fraction(1), Fraction(2), "cpu",
                                                                           frozenset({CPU}))
    assert less_than_or_equal_to_final_share(one, two, one)
    assert not less_than_or_equal_to_final_share(two, two, one)
    assert less_than_initial_share(one, two, one)
    assert not less_than_initial_share(two, two, one)


def _imbalance() -> Snapshot:
    """a runs a1 (3); b runs b-low (5, priority 0) and b-high (1, priority 1): b borrows 3."""
    return forest(*base_cqs(admitted("a1", "a", cpu="3", reserved=2), admitted("b-low", "b", cpu="5"),
                            admitted("b-high", "b", priority=1, cpu="1", reserved=1)))


@pytest.mark.parametrize(("strategies", "expected"), [
    pytest.param(["LessThanOrEqualToFinalShare"], [("b-high", "InCohortFairSharing")], id="final-share"),
    pytest.param(["LessThanInitialShare"], [("b-low", "InCohortFairSharing")], id="initial-share"),
    pytest.param(STRATEGIES, [("b-high", "InCohortFairSharing")], id="both"),
])
def test_strategies_choose_different_victims(strategies: list[str], expected: list) -> None:
    assert victims(_imbalance(), "a", incoming("in", "a", cpu="1"), strategies) == expected


def test_no_preemption_that_would_switch_the_imbalance() -> None:
    snap = forest(*base_cqs(*(admitted(f"a{i}", "a", cpu="1", reserved=i) for i in range(3)),
                            *(admitted(f"b{i}", "b", cpu="1", reserved=i) for i in range(5))))
    assert victims(snap, "a", incoming("in", "a", cpu="2")) == []


def test_preemptor_within_nominal_reclaims_without_a_share_check() -> None:
    snap = forest(*base_cqs(*(admitted(f"b{i}", "b", cpu="1", reserved=i) for i in range(5)),
                            *(admitted(f"a{i}", "a", cpu="1", reserved=i) for i in range(3)),
                            admitted("c1", "c", cpu="1")))
    wl = incoming("in", "c", cpu="1")
    assert victims(snap, "c", wl) == [("b4", "InCohortReclamation")]
    # Without the gate the shares decide: c with it does not borrow (0 <= anything).
    assert victims(snap, "c", wl, FairSharingPreemptWithinNominal=False) == [("b4", "InCohortFairSharing")]


def test_zero_weight_preemptor_cannot_take_from_a_finite_share() -> None:
    snap = forest(cohort("all", cpu="3"), cq("a", "all", cpu="1", weight="0", reclaimWithinCohort="Any"),
                  cq("b", "all", weight="1"), *(admitted(f"b{i}", "b", cpu="1", reserved=i) for i in range(3)))
    assert victims(snap, "a", incoming("in", "a", cpu="2")) == []


def test_second_strategy_takes_one_per_queue() -> None:
    # a-incoming (4) makes a borrow 1 (111); S2-a fails for both b workloads; S2-b takes one
    # (3 free), not a second: no targets at all.
    snap = forest(*base_cqs(admitted("b1", "b", cpu="3", reserved=2), admitted("b2", "b", cpu="3", reserved=1),
                            admitted("c1", "c", cpu="3")))
    assert victims(snap, "a", incoming("in", "a", cpu="4")) == []


def test_oracle_reports_mode_and_borrowing_after_preemption() -> None:
    snap = forest(*base_cqs(admitted("b-low", "b", cpu="5"), admitted("a1", "a", cpu="3", reserved=2),
                            admitted("b-high", "b", priority=1, cpu="1", reserved=1)))
    p = FairPreemptor(snap, settings=Settings(fair_sharing=True))
    mode, borrow = p.oracle(snap.cluster_queues["a"], incoming("in", "a", cpu="1"), CPU, 1000)
    assert mode == Mode.RECLAIM and borrow == 1
    own = forest(cq("solo", cpu="2", withinClusterQueue="LowerPriority"), admitted("low", "solo", priority=-1,
                                                                                   cpu="2"))
    assert FairPreemptor(own).oracle(own.cluster_queues["solo"], incoming("in", "solo", cpu="2"), CPU,
                                     2000) == (Mode.PREEMPT, 0)


# --- admission fair sharing -----------------------------------------------------------------------

def test_alpha_and_entry_penalty() -> None:
    assert alpha(1, 10) == pytest.approx(1 - 0.5 ** 0.1)
    assert alpha(5, 0) == 0
    ledger = UsageLedger(api.AdmissionFairSharingConfig(usage_half_life_time="10s",
                                                        usage_sampling_interval="1s"), now=0,
                         seed={"ns/a": {"cpu": 4.0}})
    ledger.add_penalty("ns/a", {"cpu": 4.0})
    assert ledger.usage("ns/a", 1) == pytest.approx(4 + 4 * (1 - 0.5 ** 0.1))
    assert ledger.usage("ns/a", 2) == pytest.approx(ledger.usage("ns/a", 1) / 2)
    assert ledger.usage("ns/b", 0) == math.inf


def test_decay_moves_consumed_towards_held_usage_and_folds_penalties() -> None:
    """Half-life 10 s, sampling 1 s: samples at 1, 2, ..., 10 s.  ns/a: seed 8 cpu, nothing held,
    penalty 1 cpu x (1 - 2^-0.1) pushed at 0 s; ns/b holds 2 cpu throughout.  After ten samples:
    a = 8 x 2^-1 + penalty folded at 1 s then decayed nine times = 4 + (1 - 2^-0.1) x 2^-0.9
    = 4 + 2^-0.9 - 0.5 = 4.0358867; b = 2 x (1 - 2^-1) = 1."""
    ledger = UsageLedger(api.AdmissionFairSharingConfig(usage_half_life_time="10s",
                                                        usage_sampling_interval="1s"), now=0,
                         seed={"ns/a": {"cpu": 8.0}}, held={"ns/b": {"cpu": 2.0}})
    ledger.add_penalty("ns/a", {"cpu": 1.0})
    assert ledger.catch_up(0.5) == 0
    assert ledger.catch_up(10) == 10
    assert ledger.usage("ns/a", 1) == pytest.approx(4.0358867)
    assert ledger.penalty == {}
    assert ledger.usage("ns/b", 1) == pytest.approx(1.0)
    assert ledger.last_sample == 10


def test_resource_weights_and_defaults() -> None:
    ledger = UsageLedger(api.AdmissionFairSharingConfig(resource_weights={"cpu": 2.0}), now=0,
                         seed={"ns/a": {"cpu": 1.0, "memory": 3.0}})
    assert ledger.usage("ns/a", 1) == pytest.approx(5.0)
    assert ledger.half_life == afs.DEFAULT_HALF_LIFE and ledger.sampling == afs.DEFAULT_SAMPLING_INTERVAL
    assert ledger.entry_alpha > 0  # Kueue's 0 half-life would disable penalties


def test_pending_queue_orders_by_local_queue_usage_then_priority() -> None:
    usage = {"default/busy": 5.0, "default/idle": 1.0}
    q = PendingQueue("cq", strict=False, usage_of=lambda w: usage[w.local_queue])
    q.push(incoming("b-high", "busy", priority=9, created=1, cpu="1"))
    q.push(incoming("i-low", "idle", priority=0, created=2, cpu="1"))
    q.push(incoming("i-high", "idle", priority=5, created=3, cpu="1"))
    assert [q.pop_head().name for _ in range(3)] == ["i-high", "i-low", "b-high"]  # type: ignore[union-attr]


def test_sticky_preemptor_keeps_the_head_until_admitted() -> None:
    q = PendingQueue("cq", strict=False)
    low, high = incoming("low", created=1, cpu="1"), incoming("high", priority=9, created=2, cpu="1")
    q.push(low)
    assert q.pop_head() is low
    q.requeue(low, RequeueReason.PENDING_PREEMPTION)
    q.push(high)
    assert q.pop_head() is low  # sticky beats priority
    assert q.pop_head() is high  # low was not requeued: admitted, no longer sticky
    q.requeue(high, RequeueReason.FAILED_AFTER_NOMINATION)
    q.push(low)  # evicted later: back in the queue, by priority again
    assert q.pop_head() is high


def afs_world(capacity: int, weights: list[str]) -> list[dict]:
    objs = [configuration(admissionFairSharing={"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}),
            b.namespace("default"), b.flavor("default"),
            cq("cq", cpu=str(capacity),
               spec={"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}})]
    for i, w in enumerate(weights):
        lq = b.local_queue(f"lq{i}", "default", "cq")
        lq["spec"]["fairSharing"] = {"weight": w}
        objs.append(lq)
    return objs


def test_entry_penalty_alternates_local_queues_in_the_engine() -> None:
    world = World()
    for o in afs_world(8, ["1", "1"]):
        world.apply(o)
    for name, lq, created in [("a1", "lq0", 1), ("a2", "lq0", 2), ("b1", "lq1", 3), ("b2", "lq1", 4)]:
        world.apply(b.workload(name, "default", lq, created=created, cpu="4"))
    with LiveEngine(world) as engine:
        engine.run()
    assert sorted(world.placed) == ["default/a1", "default/b1"]


def afs_engine(*workloads: tuple[str, str]) -> LiveEngine:
    """An engine over ``afs_world(8, ["1", "1"])`` that has run ``(name, local queue)`` workloads of 4 cpu
    (closed: its World, admission fair sharing and final balances stay readable)."""
    world = World()
    for o in afs_world(8, ["1", "1"]):
        world.apply(o)
    for i, (name, lq) in enumerate(workloads):
        world.apply(b.workload(name, "default", lq, created=i + 1, cpu="4"))
    with LiveEngine(world) as engine:
        engine.run()
    return engine


def test_each_engine_owns_its_admission_fair_sharing() -> None:
    busy, idle = afs_engine(("a1", "lq0")), afs_engine()
    assert busy.afs is not idle.afs
    assert busy.afs.ledger is not None and idle.afs.ledger is not None
    assert busy.afs.ledger.weighted("default/lq0") > 0
    assert idle.afs.ledger.weighted("default/lq0") == 0  # the other engine's admission is not here


def test_the_ledger_follows_the_configuration() -> None:
    engine = afs_engine(("a1", "lq0"))
    ledger = engine.afs.ledger
    assert ledger is not None and engine.afs.ledger is ledger
    engine.world.apply(configuration(admissionFairSharing={"usageHalfLifeTime": "20s"}))
    fresh = engine.afs.ledger
    assert fresh is not None and fresh is not ledger and fresh.half_life == 20
    engine.world.apply(configuration())
    assert engine.afs.ledger is None and engine.afs.local_queue_usage() is None


def test_the_fair_preemptor_orders_by_hand_computed_local_queue_usage() -> None:
    """Untimed, the coordinator's clock moves 1 s a round; half-life 10 s, sampling 1 s, so each
    round samples once with a = 1 - 2^-0.1 = 0.0669670, and an admission's penalty is 4 cpu x a.
    Round 1 admits a1 (lq0); round 2's sample: lq0 = 4a (held) + 4a (penalty) = 8a = 0.535736, then
    b1 (lq1) is admitted; round 3 (nothing left) samples: lq0 = 8a (1 - a) + 4a = 0.767727,
    lq1 = 8a = 0.535736.  The preemptor reads exactly these."""
    engine = afs_engine(("a1", "lq0"), ("b1", "lq1"))
    admitted = {w.local_queue: w for w in engine.state.cluster_queues["cq"].workloads.values()}
    assert engine.coordinator.rounds == 3
    preemptor = make_preemptor(engine.state.clone(), engine.world, afs=engine.afs)
    assert isinstance(preemptor, FairPreemptor) and preemptor.lq_usage is not None
    assert preemptor.lq_usage(admitted["default/lq0"]) == pytest.approx(0.767727, abs=1e-6)
    assert preemptor.lq_usage(admitted["default/lq1"]) == pytest.approx(0.535736, abs=1e-6)
    assert make_preemptor(engine.state.clone(), engine.world).lq_usage is None  # type: ignore[attr-defined]


# --- convergence under saturated demand -----------------------------------------------------------

class Saturated:
    """A world where every queue always has pending work and the oldest admission finishes."""

    def __init__(self, objects: list[dict], queues: list[str]) -> None:
        self.world = World()
        for o in objects:
            self.world.apply(o)
        assert not self.world.rejected, self.world.rejected
        self.queues = queues
        self.seq = 0

    def top_up(self) -> None:
        for lq in self.queues:
            pending = sum(1 for w in self.world.workloads.values()
                          if w.key not in self.world.placed and w.queue_name == lq)
            for _ in range(2 - pending):
                self.seq += 1
                self.world.apply(b.workload(f"w{self.seq:05d}", "default", lq, created=self.seq % 3600,
                                            cpu="1"))

    def settle(self) -> None:
        self.top_up()
        self.engine.rebuild()  # the new workloads are placed
        self.engine.run()

    def finish_oldest(self) -> None:
        oldest = min(self.world.placed.items(), key=lambda kv: (kv[1].at, kv[0]))
        self.engine.finish(oldest[0])

    def run(self, steps: int) -> dict[str, int]:
        with LiveEngine(self.world) as self.engine:
            for _ in range(steps):
                self.settle()
            for _ in range(steps):
                self.finish_oldest()
                self.settle()
        used = {lq: 0 for lq in self.queues}
        for key in self.world.placed:
            w = self.world.workloads[key]
            used[w.queue_name] += sum(w.total_requests().values()) // 1000
        return used


def assert_proportional(used: dict[str, int], weights: list[int]) -> None:
    total, wsum = sum(used.values()), sum(weights)
    for (name, got), w in zip(used.items(), weights, strict=True):
        want = total * w / wsum
        assert abs(got - want) <= 0.1 * want, (name, used, weights)


WEIGHTS = st.one_of(st.integers(2, 4).map(lambda n: [1] * n), st.permutations([1, 2, 3]))


@settings(max_examples=8, deadline=None)
@given(weights=WEIGHTS, capacity=st.sampled_from([60, 90, 120]))
def test_cluster_queues_share_a_saturated_cohort_by_weight(weights: list[int], capacity: int) -> None:
    objs = [configuration(), b.namespace("default"), b.flavor("default"), cohort("all", cpu=str(capacity))]
    for i, w in enumerate(weights):
        objs += [cq(f"q{i}", "all", weight=str(w)), b.local_queue(f"q{i}", "default", f"q{i}")]
    used = Saturated(objs, [f"q{i}" for i in range(len(weights))]).run(2 * capacity)
    assert sum(used.values()) == capacity
    assert_proportional(used, weights)


@settings(max_examples=8, deadline=None)
@given(weights=WEIGHTS, capacity=st.sampled_from([60, 90]))
def test_local_queues_share_a_saturated_cluster_queue_by_weight(weights: list[int], capacity: int) -> None:
    objs = afs_world(capacity, [str(w) for w in weights])
    used = Saturated(objs, [f"lq{i}" for i in range(len(weights))]).run(2 * capacity)
    assert sum(used.values()) == capacity
    assert_proportional(used, weights)


def test_a_configuration_with_the_same_admission_fair_sharing_keeps_the_usage_history() -> None:
    from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
    from kueued.world import World
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "admissionFairSharing": {"usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}}
    world = World()
    world.apply(config)
    afs = AdmissionFairSharing(world, clock=lambda: 0.0)
    ledger = afs.ledger
    assert ledger is not None
    ledger.add_penalty("ns/a", {"cpu": 4.0})
    world.apply({**config, "featureGates": {"PrioritySortingWithinCohort": True}})  # AFS settings unchanged
    assert afs.ledger is ledger and afs.ledger.penalty == {"ns/a": {"cpu": pytest.approx(4 * (1 - 0.5 ** 0.1))}}
    world.apply({**config, "admissionFairSharing": {"usageHalfLifeTime": "20s", "usageSamplingInterval": "1s"}})
    assert afs.ledger is not ledger  # a different configuration starts a new ledger
