"""Cohort trees deeper than the limit are inactive below it, as a cycle makes them; no walk
recurses over a user-controlled depth, so 64 levels schedule, borrow and preempt."""

from __future__ import annotations

from actors.simulation import simulate
from kueued.model.limits import MAX_TREE_DEPTH
from kueued.quota.tree import Edges, find_too_deep
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
from tests.elastic.builders import EQ


def test_levels_past_the_limit_are_found_iteratively() -> None:
    chain = {f"c{i}": f"c{i - 1}" if i else "" for i in range(5000)}  # far deeper than any stack
    deep = find_too_deep(chain, set())
    assert min(deep.values()) == MAX_TREE_DEPTH + 1 and len(deep) == 5000 - MAX_TREE_DEPTH
    edges = Edges(chain, {"top": "c0", "bottom": "c4999", "edge": f"c{MAX_TREE_DEPTH - 1}"})
    assert edges.cq_cut_off("bottom") and not edges.cq_cut_off("top") and not edges.cq_cut_off("edge")


def _chain(levels: int) -> list[dict]:
    top = cohort("c0", quotas("default", cpu="10"))
    return [top, *(cohort(f"c{i}", parent=f"c{i - 1}") for i in range(1, levels))]


def _admitted(manifest: dict, cq: str) -> dict:
    manifest["status"] = {
        "admission": {"clusterQueue": cq, "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
        "conditions": [{"type": t, "status": "True", "reason": t, "lastTransitionTime": "2026-01-01T00:00:00Z"}
                       for t in ("QuotaReserved", "Admitted")]}
    return manifest


def _scenario(levels: int) -> list[dict]:
    """A queue at the bottom of ``levels`` Cohorts has borrowed all it can (the top's 10 cpu and the
    other queue's 3); that queue reclaims its 3 by preempting across every level."""
    reclaim = {"reclaimWithinCohort": "Any"}
    objects = [namespace("ns"), flavor("default"), *_chain(levels - 1),
               cluster_queue("deep", quotas("default", cpu="1"), cohort=f"c{levels - 2}"),
               cluster_queue("top", quotas("default", cpu="3"), cohort="c0", preemption=reclaim),
               local_queue("deep", "ns", "deep"), local_queue("top", "ns", "top")]
    objects += [_admitted(workload(f"d{i}", "ns", "deep", created=i, cpu="1"), "deep") for i in range(14)]
    objects += [workload(f"t{i}", "ns", "top", created=20 + i, priority=10, cpu="1") for i in range(3)]
    objects.append(workload("later", "ns", "deep", created=30, cpu="1"))
    return objects


def test_a_tree_at_the_depth_limit_borrows_and_preempts_across_every_level() -> None:
    report = simulate(_scenario(MAX_TREE_DEPTH))
    assert report.rejected == {}
    assert {k for k, w in report.workloads.items() if w.state == "admitted" and k.startswith("ns/t")} == \
        {"ns/t0", "ns/t1", "ns/t2"}
    assert len(report.evictions) == 3


def test_a_queue_below_the_limit_is_inactive_with_the_reason() -> None:
    report = simulate(_scenario(300))
    assert report.workloads["ns/t0"].state == "admitted"  # the top of the tree still schedules
    assert (report.workloads["ns/later"].reason or "") == (
        "ClusterQueue deep is inactive: cohort c298 is at level 299 of its tree; kueued allows at most 64 levels")


def test_an_elastic_quota_that_would_pass_the_limit_is_refused() -> None:
    world = World()
    for i in range(MAX_TREE_DEPTH + 1):
        q = EQ(f"e{i}").is_parent().min(cpu="1").max(cpu="10")
        if i:
            q = q.parent(f"e{i - 1}")
        world.apply(q.build())
    assert list(world.rejected) == [f"ElasticQuota/kube-system/e{MAX_TREE_DEPTH}"]
    assert f"at most {MAX_TREE_DEPTH} levels" in world.rejected[f"ElasticQuota/kube-system/e{MAX_TREE_DEPTH}"]


def test_a_cohort_on_a_cycle_and_one_below_it_are_told_apart() -> None:
    from kueued.quota.tree import cycle_words, find_cyclic
    parent = {"a": "b", "b": "a", "below": "a", "fine": ""}
    assert find_cyclic(parent) == {"a", "b", "below"}
    assert [cycle_words(parent, c) for c in ("a", "b", "below")] == [
        "is part of a cycle", "is part of a cycle", "is below a cycle"]
