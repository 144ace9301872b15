"""Admission fair sharing and the LocalQueue policies over time, on the actor engine.

Each scenario is played by :func:`actors.simulation.simulate_timed`, what ``kueued
simulate`` runs for a timed input, on the virtual clock and,
where the decision does not hang on a few milliseconds, on the real clock with every
time scaled down.  The numbers in the docstrings are worked out by hand from Kueue's
formulas (KEP-4136): with half-life H and sampling interval I, ``a = 1 - 2^(-I/H)``;
every I, ``consumed = consumed (1 - a) + held a + penalties``; an admission's penalty
is ``a x requests``.  With H = 10 s, I = 1 s: ``a = 1 - 2^-0.1 = 0.0669670`` and
``r = 1 - a = 2^-0.1``.  The ledger starts (and samples from) time 0.

Each was checked to fail with the part it is about switched off: decay (``_mix``
without the ``1 - a`` factor), periodic sampling (``observe`` not catching up),
the entry penalty (``add_penalty`` a no-op), and the ``fair`` cache keyed on a
constant (the old clock key, which does not move while an instant settles).
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.simulation import simulate_timed
from kueued.model import api
from kueued.model.validation import validate_object
from kueued.scheduling.fairsharing.admission import UsageLedger
from kueued.simulate import TimedRun
from tests import builders as b

AFS = {"admissionMode": "UsageBasedAdmissionFairSharing"}


def config(half_life: str = "10s", sampling: str = "1s") -> dict[str, Any]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "admissionFairSharing": {"usageHalfLifeTime": half_life, "usageSamplingInterval": sampling}}


def queue(name: str, cpu: str, *, policy: str | None = None, afs: bool = False, cohort: str = "",
          **preemption: str) -> dict[str, Any]:
    cq = b.cluster_queue(name, b.quotas("default", cpu=cpu), cohort=cohort,
                         preemption=preemption or None)
    if afs:
        cq["spec"]["admissionScope"] = dict(AFS)
    if policy is not None:
        cq["metadata"]["annotations"] = {"kueued.io/admission-policy": policy}
    return cq


def lq(name: str, cq: str, *, weight: str | None = None, consumed: str | None = None) -> dict[str, Any]:
    out = b.local_queue(name, "ns", cq)
    if weight is not None:
        out["spec"]["fairSharing"] = {"weight": weight}
    if consumed is not None:
        out["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
            "consumedResources": {"cpu": consumed}, "lastUpdate": "2026-01-01T00:00:00Z"}}}
    return out


def wl(name: str, queue_name: str, cpu: str, *, at: float, runtime: float | None = None, created: int = 0,
       priority: int | None = None) -> dict[str, Any]:
    out = b.workload(name, "ns", queue_name, created=created, priority=priority, cpu=cpu)
    notes = {"kueued.io/arrival": str(at)}
    if runtime is not None:
        notes["kueued.io/runtime"] = str(runtime)
    out["metadata"].setdefault("annotations", {}).update(notes)
    return out


def play(objects: list[dict[str, Any]], *, real: bool = False) -> TimedRun:
    manifests = [b.namespace("ns"), b.flavor("default"), *objects]
    return simulate_timed(manifests, real=real)


def admitted_at(run: TimedRun, name: str) -> float | None:
    times = run.timeline.times.get(f"ns/{name}")
    return None if times is None else times.admitted_ms


def state(run: TimedRun, name: str) -> str:
    return run.report.workloads[f"ns/{name}"].state


CLOCKS = [pytest.param(False, id="virtual"), pytest.param(True, id="real")]


# --- admission fair sharing --------------------------------------------------------------------

def test_decay_lets_long_ago_usage_go_before_recent_usage() -> None:
    """CQ 8 cpu.  a1 (a, 8 cpu) runs 0-10 s; b1 (b, 2 cpu) runs 30-40 s; at 41 s a2 and b2 (8 cpu
    each, b2 older) arrive and only one fits.

    a: the sample at 1 s folds the penalty 8a: 8a + 8a = 16a; nine more with 8 held:
    16a r^9 + 8 (1 - r^9) = 4.2871 at 10 s; 31 samples with nothing held: x r^31 = 8 x 2^-4 = 0.5.
    b: at 31 s 2a + 2a = 4a; nine more with 2 held: 4a r^9 + 2 (1 - r^9) = 1.0718; one empty
    sample at 41 s: x r = 1.0.  a (0.5) < b (1.0): a2 first although b2 is older.  Without decay
    a's 80 cpu-seconds outweigh b's 20 and b2 would go first."""
    run = play([config(), queue("cq", "8", afs=True), lq("a", "cq"), lq("b", "cq"),
                wl("a1", "a", "8", at=0, runtime=10, created=1), wl("b1", "b", "2", at=30, runtime=10, created=2),
                wl("b2", "b", "8", at=41, created=3), wl("a2", "a", "8", at=41, created=4)])
    assert admitted_at(run, "a2") == 41_000
    assert state(run, "b2") == "pending"


@pytest.mark.parametrize("real", CLOCKS)
def test_entry_penalty_alternates_local_queues_within_one_instant(real: bool) -> None:
    """CQ 8 cpu; a1, a2 (a) and b1, b2 (b), 4 cpu each, oldest first, all arrive at 0.  No sample
    falls inside the instant: a1 goes first (0 = 0, older), then a holds the penalty
    4a = 0.2679 and b 0, so b1 goes next and the CQ is full.  Without the penalty a2 (older
    than b1) would take the second slot."""
    run = play([config(), queue("cq", "8", afs=True), lq("a", "cq"), lq("b", "cq"),
                *(wl(n, n[0], "4", at=0, created=i) for i, n in enumerate(["a1", "a2", "b1", "b2"]))], real=real)
    assert [state(run, n) for n in ("a1", "a2", "b1", "b2")] == ["admitted", "pending", "admitted", "pending"]


@pytest.mark.parametrize("real", CLOCKS)
def test_usage_held_while_nothing_is_pending_is_sampled(real: bool) -> None:
    """CQ 16 cpu.  At 0: a1 (a, 4 cpu, runs 19.5 s) and b0 (b, 8 cpu, runs 1.5 s).  Nothing else
    is pending until a2 and b2 (16 cpu each, a2 older) arrive at 20.5 s.

    Sampled every second whether read or not: a = 8a at 1 s (4 held + 4a penalty), then 18
    samples with 4 held: 8a r^18 + 4 (1 - r^18) = 3.0052 at 19 s, x r = 2.8039 at 20 s;
    b = 16a = 1.0715 at 1 s (8 held + 8a penalty), then nothing: 16a r^19 = 0.2871 at 20 s.
    b (0.29) < a (2.80): b2 first.  Sampled only when read (at 20.5 s, when a1 and b0 are gone),
    a and b would each hold just their penalty, 4a = 0.27 < 8a = 0.54, and a2 would go first.
    On the real clock every time is a tenth (H 1 s, I 100 ms): the same numbers."""
    k = 0.1 if real else 1.0
    half_life, sampling = ("1s", "100ms") if real else ("10s", "1s")
    run = play([config(half_life, sampling), queue("cq", "16", afs=True), lq("a", "cq"), lq("b", "cq"),
                wl("a1", "a", "4", at=0, runtime=19.5 * k, created=1),
                wl("b0", "b", "8", at=0, runtime=1.5 * k, created=2),
                wl("a2", "a", "16", at=20.5 * k, created=3), wl("b2", "b", "16", at=20.5 * k, created=4)], real=real)
    assert state(run, "b2") == "admitted"
    assert state(run, "a2") == "pending"


def test_ledger_samples_on_its_own_schedule_not_its_reads() -> None:
    """The same history read once or at every instant gives the same numbers: H 10 s, I 1 s,
    a holds 4 cpu from 0; at 10 s: 4 (1 - r^10) = 2.0, at 20 s: 4 (1 - r^20) = 3.0."""
    cfg = api.AdmissionFairSharingConfig(usage_half_life_time="10s", usage_sampling_interval="1s")
    once, often = (UsageLedger(cfg, now=0, held={"a": {"cpu": 4.0}}) for _ in range(2))
    for t in range(1, 21):
        often.observe(t, {"a": {"cpu": 4.0}})
        if t == 10:
            assert often.usage("a", 1) == pytest.approx(2.0)
    once.catch_up(20)
    assert once.usage("a", 1) == pytest.approx(3.0) == often.usage("a", 1)


def test_classical_preemption_takes_the_victim_of_the_busier_local_queue_first() -> None:
    """CQ 8 cpu, withinClusterQueue LowerPriority, no fair sharing.  a's status says it consumed
    10 cpu.  a1 (a, 4 cpu) is admitted at 0, b1 (b, 4 cpu) at 1; p (b, 4 cpu, priority 10)
    arrives at 2.  Kueue's classical order would evict the most recently admitted, b1; with
    admission fair sharing the busier LocalQueue's goes first.  At 2 s: a = 10 r^2 + 4 (1 - r^2)
    + 4a r = 9.38; b = 4a + 4a = 0.54 (its sample at 2 s, b1 held since 1 s).  a1 is the victim."""
    run = play([config(), queue("cq", "8", afs=True, withinClusterQueue="LowerPriority"),
                lq("a", "cq", consumed="10"), lq("b", "cq"),
                wl("a1", "a", "4", at=0, created=1), wl("b1", "b", "4", at=1, created=2),
                wl("p", "b", "4", at=2, created=3, priority=10)])
    assert state(run, "p") == "admitted"
    assert run.timeline.times["ns/a1"].evictions == 1
    assert run.timeline.times["ns/b1"].evictions == 0


def test_consumed_usage_is_ready_for_the_local_queue_status() -> None:
    """What the status publisher writes (consumedResources, lastUpdate): a1 (a, 4 cpu) admitted
    at 0 and still running, read at 3 s: the sample at 1 s holds 4a + the penalty 4a = 8a, those
    at 2 and 3 s move it towards 4: 8a r^2 + 4 (1 - r^2) = 0.9842, last sampled at 3 s."""
    from actors.harness import LiveEngine
    from kueued.world import World
    world = World()
    for m in [b.namespace("ns"), b.flavor("default"), config(), queue("cq", "8", afs=True), lq("a", "cq"),
              b.workload("a1", "ns", "a", created=1, cpu="4")]:
        world.apply(m)
    clock = [0.0]
    with LiveEngine(world, clock=lambda: clock[0]) as engine:
        engine.run()
        clock[0] = 3.0
        consumed = engine.afs.consumed_usage()
    assert consumed is not None
    usage, last = consumed
    assert last == 3.0
    assert usage["ns/a"]["cpu"] == pytest.approx(0.9842, abs=1e-4)


def test_a_cohort_admission_scope_is_refused() -> None:
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "org"},
              "spec": {"admissionScope": dict(AFS)}}
    errors = validate_object(cohort)
    assert [e.path for e in errors] == ["spec.admissionScope"]
    assert "ClusterQueue" in errors[0].reason


# --- KEP-1093 LocalQueue policies ----------------------------------------------------------------

@pytest.mark.parametrize("real", CLOCKS)
def test_fair_cluster_queue_reranks_after_each_admission(real: bool) -> None:
    """CQ 4 cpu, policy fair; a1, a2 (a) and b1, b2 (b), 2 cpu each, oldest first, all at 0.
    a1 first (both hold 0); then a holds 2000/4000 = 500 per mille, b 0: b1; full.  Ranked once
    per instant (the bug) the order stays FIFO and a2 would take b1's place."""
    run = play([queue("cq", "4", policy="fair"), lq("a", "cq"), lq("b", "cq"),
                *(wl(n, n[0], "2", at=0, created=i) for i, n in enumerate(["a1", "a2", "b1", "b2"]))], real=real)
    assert [state(run, n) for n in ("a1", "a2", "b1", "b2")] == ["admitted", "pending", "admitted", "pending"]


def test_capacity_cluster_queue_serves_local_queues_below_their_weighted_guarantee() -> None:
    """CQ 6 cpu, policy capacity; a weight 2, b weight 1: guarantees 4 and 2 cpu.  a1-a3, b1
    (2 cpu each, in that order) at 0.  a1 (both 0); a at 2/4 = 500 per mille, b 0: b1; b at
    2/2 = 1000 (at its guarantee), a 500: a2; full, a3 pending.  FIFO would admit a1-a3."""
    run = play([queue("cq", "6", policy="capacity"), lq("a", "cq", weight="2"), lq("b", "cq", weight="1"),
                *(wl(n, n[0], "2", at=0, created=i) for i, n in enumerate(["a1", "a2", "a3", "b1"]))])
    assert [state(run, n) for n in ("a1", "a2", "a3", "b1")] == ["admitted", "admitted", "pending", "admitted"]


def test_fair_cohort_serves_a_team_within_its_nominal_before_a_borrower() -> None:
    """Cohort org (fair, no quota of its own) over x (4 cpu nominal, holds 3) and y (1 cpu).
    x1 (1 cpu) keeps x within its nominal; y1 (2 cpu) would make y borrow.  By share alone y
    (0 of 5 cpu) beats x (3000/5000 = 600 per mille) and y1 would borrow x's last cpu; as Kueue's
    fair sharing does, the non-borrowing entry goes first: x1 is admitted, y1 no longer fits."""
    cohort = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
              "metadata": {"name": "org", "annotations": {"kueued.io/admission-policy": "fair"}}, "spec": {}}
    run = play([cohort, queue("x", "4", cohort="org"), queue("y", "1", cohort="org"), lq("lx", "x"), lq("ly", "y"),
                wl("x0", "lx", "3", at=0, created=1),
                wl("y1", "ly", "2", at=1, created=2), wl("x1", "lx", "1", at=1, created=3)])
    assert [state(run, n) for n in ("x0", "x1", "y1")] == ["admitted", "admitted", "pending"]
