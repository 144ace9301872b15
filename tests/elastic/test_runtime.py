"""Elastic quota tree math: requests bottom up, runtime top down, largest remainder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.model import koordinator as k
from kueued.quota.elastic import (
    ElasticGroup,
    Share,
    aggregate_requests,
    compute_runtime,
    hamilton_deltas,
    implicit_cluster_total,
    redistribute,
    scale_mins,
)
from tests.elastic.builders import EQ, group, milli


def _runtimes(groups: list[ElasticGroup], requests: dict[str, dict[str, int]], total: dict[str, int]):
    quota = compute_runtime({g.name: g for g in groups}, requests, total)
    return {name: q.runtime for name, q in quota.items()}


def test_seed_example_in_millicores():
    groups = [
        group("a", min=milli(cpu="10m"), max=milli(cpu="40m")),
        group("b", min=milli(cpu="15m"), max=milli(cpu="60m")),
        group("c", min=milli(cpu="20m"), max=milli(cpu="50m")),
        group("d", min=milli(cpu="15m"), max=milli(cpu="80m")),
    ]
    requests = {"a": milli(cpu="5m"), "b": milli(cpu="20m"), "c": milli(cpu="40m"), "d": milli(cpu="70m")}
    got = _runtimes(groups, requests, milli(cpu="100m"))
    assert [got[n]["cpu"] for n in "abcd"] == [5, 20, 35, 40]


@pytest.mark.parametrize(("pool", "weights", "want"), [
    pytest.param(3, [1] * 10, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0], id="ties-by-name"),
    pytest.param(45, [60, 50, 80], [14, 12, 19], id="seed-largest-remainders"),
    pytest.param(9, [50, 80], [3, 6], id="seed-second-round"),
    pytest.param(10, [0, 1], [0, 10], id="weight-zero-gets-nothing"),
    pytest.param(7, [0, 0], [0, 0], id="no-weight-no-split"),
])
def test_hamilton_deltas(pool, weights, want):
    shares = [Share(f"q-{i:02d}", 0, 10**9, w, True) for i, w in enumerate(weights)]
    assert hamilton_deltas(pool, shares) == want


def test_weight_zero_leftover_stays_unassigned():
    shares = [Share("b", 15, 20, 60, True), Share("d", 15, 70, 0, True)]
    assert redistribute(100, shares) == {"b": 20, "d": 15}


def test_mins_above_total_are_not_taken_back_without_scaling():
    shares = [Share("a", 60, 60, 1, True), Share("b", 50, 90, 1, True)]
    assert redistribute(100, shares) == {"a": 60, "b": 50}


def test_scale_mins_floor_per_resource_only_where_oversubscribed():
    got = scale_mins({"cpu": 100_000, "memory": 500}, {"a": {"cpu": 60_000, "memory": 100},
                                                      "b": {"cpu": 50_000, "memory": 100}})
    assert got == {"a": {"cpu": 54545, "memory": 100}, "b": {"cpu": 45454, "memory": 100}}


def test_non_lending_group_raises_request_to_min_and_keeps_it_idle():
    groups = {
        "root": group("root", min=milli(cpu="60"), max=milli(cpu="96"), lend=False, is_parent=True),
        "c1": group("c1", parent="root", min=milli(cpu="20"), max=milli(cpu="96"), lend=False),
        "c2": group("c2", parent="root", min=milli(cpu="20"), max=milli(cpu="96"), lend=False),
    }
    request, limited = aggregate_requests(groups, {})
    assert request["c1"] == milli(cpu="20")
    assert request["root"] == milli(cpu="60")
    got = _runtimes(list(groups.values()), {}, milli(cpu="100"))
    assert (got["root"], got["c1"], got["c2"]) == (milli(cpu="60"), milli(cpu="20"), milli(cpu="20"))


def test_limited_request_goes_up_but_request_is_not_capped():
    groups = {
        "p": group("p", min=milli(cpu="0"), max=milli(cpu="10"), is_parent=True),
        "x": group("x", parent="p", max=milli(cpu="8")),
        "y": group("y", parent="p", max=milli(cpu="8")),
    }
    request, limited = aggregate_requests(groups, {"x": milli(cpu="20"), "y": milli(cpu="5")})
    assert request["x"] == milli(cpu="20") and limited["x"] == milli(cpu="8")
    assert request["p"] == milli(cpu="13") and limited["p"] == milli(cpu="10")


def test_unreachable_and_builtin_groups():
    groups = [
        group("orphan", parent="missing", max=milli(cpu="5")),
        group(k.DEFAULT_QUOTA, max=milli(cpu="3")),
        group("team", max=milli(cpu="5")),
    ]
    got = _runtimes(groups, {"orphan": milli(cpu="1"), "team": milli(cpu="2")}, milli(cpu="10"))
    assert got["orphan"] == milli(cpu="0")
    assert got[k.DEFAULT_QUOTA] == milli(cpu="3")
    assert got["team"] == milli(cpu="2")


def test_implicit_total_is_top_level_max():
    groups = {"cluster": group("cluster", max=milli(cpu="10"), is_parent=True),
              "t": group("t", parent="cluster", max=milli(cpu="50"))}
    assert implicit_cluster_total(groups) == milli(cpu="10")


@pytest.mark.parametrize(("annotation", "want"), [
    pytest.param(None, {"cpu": 10_000, "memory": 4000}, id="absent-means-max"),
    pytest.param({"cpu": "1"}, {"cpu": 1000, "memory": 4000}, id="missing-keys-from-max"),
    pytest.param({"cpu": "0"}, {"cpu": 0, "memory": 4000}, id="zero-kept-when-not-all-zero"),
    pytest.param({"cpu": "0", "memory": "0"}, {"cpu": 10_000, "memory": 4000}, id="all-zero-means-max"),
    pytest.param({"cpu": "2", "gpu": "1"}, {"cpu": 2000, "memory": 4000}, id="extra-keys-dropped"),
])
def test_effective_shared_weight(annotation, want):
    builder = EQ("q").max(cpu="10", memory="4")
    if annotation is not None:
        builder.weight(**annotation)
    max_ = milli(cpu="10", memory="4")
    assert k.effective_shared_weight(builder.build(), max_) == want


# --- properties ---------------------------------------------------------------------------

RESOURCES = ("cpu", "nvidia.com/gpu")  # millicores and whole units


@st.composite
def trees(draw):
    """A random tree (two levels below the root at most) with requests and a total."""
    n = draw(st.integers(1, 7))
    groups: dict[str, ElasticGroup] = {}
    parents: list[str] = [k.ROOT_QUOTA]
    requests: dict[str, dict[str, int]] = {}
    for i in range(n):
        name = f"g{i}"
        parent = draw(st.sampled_from(parents))
        mins, maxes, weights = {}, {}, {}
        for r in RESOURCES:
            unit = 1 if r == "cpu" else 1000
            hi = draw(st.integers(0, 200)) * unit
            maxes[r] = hi
            mins[r] = draw(st.integers(0, hi // unit)) * unit
            weights[r] = draw(st.integers(0, 5)) * 1000
        inner = parent == k.ROOT_QUOTA and draw(st.booleans())
        groups[name] = ElasticGroup(
            name=name, parent=parent, is_parent=inner, min=mins, max=maxes,
            shared_weight=weights if draw(st.booleans()) else None,
            allow_lent_resource=draw(st.booleans()),
        )
        if inner:
            parents.append(name)
        requests[name] = {r: draw(st.integers(0, 300)) * (1 if r == "cpu" else 1000) for r in RESOURCES}
    total = {r: draw(st.integers(0, 600)) * (1 if r == "cpu" else 1000) for r in RESOURCES}
    return groups, requests, total


@settings(max_examples=300, deadline=None)
@given(trees())
def test_siblings_never_get_more_than_the_parent_shares(tree):
    groups, requests, total = tree
    quota = compute_runtime(groups, requests, total)
    shares = {k.ROOT_QUOTA: total} | {name: q.runtime for name, q in quota.items()}
    for parent, available in shares.items():
        kids = [g for g in groups.values() if g.parent == parent]
        for r in RESOURCES:
            assert sum(quota[g.name].runtime[r] for g in kids) <= available.get(r, 0)


@settings(max_examples=300, deadline=None)
@given(trees())
def test_demand_at_or_above_scaled_min_gets_it(tree):
    groups, requests, total = tree
    for q in compute_runtime(groups, requests, total).values():
        for r in RESOURCES:
            if q.limited_request.get(r, 0) >= q.scaled_min.get(r, 0):
                assert q.runtime[r] >= q.scaled_min.get(r, 0)


@settings(max_examples=300, deadline=None)
@given(trees())
def test_runtime_within_max_and_request(tree):
    groups, requests, total = tree
    for name, q in compute_runtime(groups, requests, total).items():
        for r in RESOURCES:
            assert q.runtime[r] <= q.max[r]
            assert q.runtime[r] <= q.limited_request.get(r, 0)
            if groups[name].allow_lent_resource:
                assert q.runtime[r] <= q.request.get(r, 0)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**12), st.lists(st.integers(0, 10**6), min_size=1, max_size=12))
def test_hamilton_is_exact_and_fair(pool, weights):
    shares = [Share(f"q{i}", 0, 0, w, True) for i, w in enumerate(weights)]
    deltas = hamilton_deltas(pool, shares)
    total_weight = sum(weights)
    if total_weight == 0:
        assert deltas == [0] * len(weights)
        return
    assert sum(deltas) == pool
    for w, d in zip(weights, deltas, strict=True):
        assert w * pool // total_weight <= d <= w * pool // total_weight + 1
