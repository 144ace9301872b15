"""The lazy candidate stream against the straightforward collection, over random forests.

``candidate_stream`` must produce exactly ``collect_candidates(...).ordered()``: the same
workloads, classes and ``lca``s in the same order; a borrowing attempt leaves out only
ReclaimWithoutBorrowing candidates; and the classical search built on it picks the same
targets as the search over the fully built, sorted lists.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from kueued.quota.node import FR
from kueued.scheduling.cycle import Target
from kueued.scheduling.preemption.candidates import Variant, collect_candidates, is_valid
from kueued.scheduling.preemption.classical import attempts, classical_targets
from kueued.scheduling.preemption.minimal import minimal_targets, workload_fits
from kueued.scheduling.preemption.stream import candidate_stream
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo
from tests.scheduling.test_preemption import CPU, MEM, admitted, cohort, cq, forest, incoming

amount = st.integers(0, 8).map(str)
maybe = st.one_of(st.none(), amount)
rule = st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"])
priority = st.sampled_from([0, 0, 3, 5, 10])


@st.composite
def cases(draw: Any) -> tuple[Snapshot, str, WorkloadInfo, dict[FR, int], set[FR]]:
    docs = []
    n_cohorts = draw(st.integers(1, 4))
    for i in range(n_cohorts):
        parent = "" if i == 0 else f"co{draw(st.integers(0, i - 1))}"
        docs.append(cohort(f"co{i}", parent, cpu=(draw(amount), draw(maybe), draw(maybe)) if parent
                           else draw(amount)))
    n_cq = draw(st.integers(1, 6))
    for i in range(n_cq):
        preemption: dict[str, Any] = {"withinClusterQueue": draw(rule), "reclaimWithinCohort": draw(rule)}
        if draw(st.booleans()):
            preemption["borrowWithinCohort"] = {"policy": "LowerPriority"}
            if draw(st.booleans()):
                preemption["borrowWithinCohort"]["maxPriorityThreshold"] = draw(st.sampled_from([0, 3, 5]))
        nominal = draw(amount)
        lending = draw(maybe)
        if lending is not None and int(lending) > int(nominal):
            lending = nominal
        docs.append(cq(f"q{i}", f"co{draw(st.integers(0, n_cohorts - 1))}",
                       cpu=(nominal, draw(maybe), lending), memory=draw(amount), **preemption))
    for w in range(draw(st.integers(0, 25))):
        usage = {"cpu": draw(st.integers(1, 4).map(str))}
        if draw(st.booleans()):
            usage["memory"] = draw(st.integers(1, 4).map(str))
        if draw(st.integers(0, 5)) == 0:
            usage = {"memory": usage.get("memory", "1")}
        docs.append(admitted(f"w{w}", f"q{draw(st.integers(0, n_cq - 1))}", priority=draw(priority),
                             reserved=draw(st.integers(0, 5)), created=draw(st.integers(0, 5)),
                             evicted=draw(st.integers(0, 6)) == 0, **usage))
    snap = forest(*docs)
    queue = f"q{draw(st.integers(0, n_cq - 1))}"
    wl = incoming(priority=draw(priority), created=draw(st.integers(0, 5)), cpu="1")
    frs = draw(st.sampled_from([{CPU}, {MEM}, {CPU, MEM}]))
    requests = {fr: draw(st.integers(1, 9)) * 1000 for fr in frs}
    return snap, queue, wl, requests, frs


def _view(candidates: Any) -> list[tuple[str, str | None, Variant]]:
    return [(c.wl.key, c.lca.name if c.lca is not None else None, c.variant) for c in candidates]


def _reference_targets(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo,
                       requests: Mapping[FR, int], frs: set[FR]) -> list[Target]:
    """``classical_targets`` as written before the stream: build, sort, walk everything."""
    candidates = collect_candidates(snapshot, cq, wl, requests, frs)
    if not len(candidates):
        return []
    ordered = candidates.ordered()
    for borrowing in attempts(cq, candidates, frs):
        def valid(borrowing: bool = borrowing) -> Iterator[Target]:
            for c in ordered:
                if is_valid(snapshot, cq, c, frs, borrowing=borrowing):
                    yield Target(c.wl, c.variant.reason)

        def fits(borrowing: bool = borrowing) -> bool:
            return workload_fits(cq, requests, allow_borrowing=borrowing)

        targets = minimal_targets(snapshot, valid(), fits)
        if targets:
            return targets
    return []


@settings(max_examples=400, deadline=None)
@given(cases())
def test_stream_is_the_ordered_candidate_set(case: tuple) -> None:
    snap, queue, wl, requests, frs = case
    cq = snap.cluster_queues[queue]
    reference = collect_candidates(snap, cq, wl, requests, frs)
    stream = candidate_stream(snap, cq, wl, requests, frs)
    event(f"candidates: {min(len(reference), 5)}")
    assert _view(stream.ordered(borrowing=False)) == _view(reference.ordered())
    assert _view(stream.ordered(borrowing=True)) == _view(
        c for c in reference.ordered() if c.variant is not Variant.RECLAIM_WITHOUT_BORROWING)
    assert stream.empty == (len(reference) == 0)
    assert stream.none_from_other_queues == reference.none_from_other_queues
    assert stream.none_for_hierarchical_reclaim == reference.none_for_hierarchical_reclaim


@settings(max_examples=400, deadline=None)
@given(cases())
def test_search_on_the_stream_picks_the_same_targets(case: tuple) -> None:
    snap, queue, wl, requests, frs = case
    cq = snap.cluster_queues[queue]
    before = {n: dict(c.node.usage) for n, c in snap.cluster_queues.items()}
    expected = [(t.workload.key, t.reason) for t in _reference_targets(snap, cq, wl, requests, frs)]
    event(f"targets: {min(len(expected), 3)}")
    assert [(t.workload.key, t.reason) for t in classical_targets(snap, cq, wl, requests, frs)] == expected
    assert {n: dict(c.node.usage) for n, c in snap.cluster_queues.items()} == before
    # searches in a steady stretch keep the sorted runs and the pruned walk for the next one
    with snap.steady():
        for _ in range(2):
            found = classical_targets(snap, cq, wl, requests, frs)
            assert [(t.workload.key, t.reason) for t in found] == expected
    assert {n: dict(c.node.usage) for n, c in snap.cluster_queues.items()} == before
