"""Quota node arithmetic: examples from KEP-79 and Kueue, and Hypothesis invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.quota import node as qn
from kueued.quota.node import Limits, QuotaNode

FR = ("default", "cpu")


def tree(spec: dict[str, tuple[str | None, int, int | None, int | None]]) -> dict[str, QuotaNode]:
    """name -> (parent, nominal, borrowingLimit, lendingLimit); names starting with 'cq' are leaves."""
    nodes = {n: QuotaNode(n, is_cohort=not n.startswith("cq")) for n in spec}
    for name, (parent, nominal, bl, ll) in spec.items():
        nodes[name].limits = {FR: Limits(nominal, bl, ll)}
        if parent:
            nodes[name].parent = nodes[parent]
            nodes[parent].children.append(nodes[name])

    def fill(n: QuotaNode) -> None:
        total = n.limits[FR].nominal
        for c in n.children:
            fill(c)
            total += c.subtree[FR] - qn.local_quota(c, FR)
        n.subtree = {FR: total}

    for n in nodes.values():
        if n.parent is None:
            fill(n)
    return nodes


def test_cohort_lending_limit_covers_its_subtree() -> None:
    # root(0) <- lender(own 1, LL 500m) <- lender-cq(1); root <- borrower <- cq-b(0)
    t = tree({"root": (None, 0, None, None), "lender": ("root", 1000, None, 500),
              "cqlender": ("lender", 1000, None, None), "borrower": ("root", 0, None, None),
              "cqb": ("borrower", 0, None, None)})
    assert t["lender"].subtree[FR] == 2000
    assert t["root"].subtree[FR] == 500
    assert qn.available(t["cqb"], FR) == 500
    assert qn.available(t["cqlender"], FR) == 2000


def test_borrowing_limit_caps_what_a_node_takes_from_its_parent() -> None:
    t = tree({"co": (None, 0, None, None), "cqa": ("co", 2000, 1000, None), "cqb": ("co", 10000, None, None)})
    assert qn.available(t["cqa"], FR) == 3000
    assert qn.potential_available(t["cqa"], FR) == 3000
    qn.add_usage(t["cqb"], FR, 10000)
    assert qn.available(t["cqa"], FR) == 2000


@pytest.mark.parametrize(("used", "value", "height", "may_reclaim"), [
    pytest.param(0, 1000, 0, True, id="within-nominal"),
    pytest.param(1000, 2000, 1, True, id="fits-in-team-cohort"),
    pytest.param(0, 9000, 2, False, id="needs-root"),
])
def test_lowest_fitting_height(used: int, value: int, height: int, may_reclaim: bool) -> None:
    from kueued.model import api
    from kueued.scheduling.flavors import lowest_fitting_height
    from kueued.scheduling.snapshot import ClusterQueueSnapshot
    t = tree({"root": (None, 5000, None, None), "team": ("root", 0, None, None),
              "cqa": ("team", 2000, None, None), "cqb": ("team", 2000, None, None)})
    qn.add_usage(t["cqa"], FR, used)
    cq = ClusterQueueSnapshot("cqa", api.ClusterQueueSpec(), t["cqa"])
    assert lowest_fitting_height(cq, FR, value) == (height, may_reclaim)


# --- properties ------------------------------------------------------------------------------

amount = st.integers(min_value=0, max_value=20) .map(lambda x: x * 500)
maybe = st.one_of(st.none(), amount)


@st.composite
def trees(draw):
    n_cohorts = draw(st.integers(1, 5))
    spec: dict[str, tuple] = {}
    for i in range(n_cohorts):
        parent = None if i == 0 else f"co{draw(st.integers(0, i - 1))}"
        spec[f"co{i}"] = (parent, draw(amount), draw(maybe) if parent else None, draw(maybe) if parent else None)
    for i in range(draw(st.integers(1, 6))):
        spec[f"cq{i}"] = (f"co{draw(st.integers(0, n_cohorts - 1))}", draw(amount), draw(maybe), draw(maybe))
    # lendingLimit <= nominal for ClusterQueues, as the webhook requires
    for k, (p, nom, bl, ll) in list(spec.items()):
        if k.startswith("cq") and ll is not None and ll > nom:
            spec[k] = (p, nom, bl, nom)
    return tree(spec)


def parent_charge_invariant(nodes: dict[str, QuotaNode]) -> None:
    for n in nodes.values():
        if n.is_cohort:
            expected = sum(qn.parent_share(c, FR, c.usage.get(FR, 0)) for c in n.children)
            assert n.usage.get(FR, 0) == expected, n


@settings(max_examples=300, deadline=None)
@given(trees(), st.lists(st.tuples(st.integers(0, 5), amount), max_size=30))
def test_admitting_only_what_fits_never_exceeds_the_tree(nodes, requests) -> None:
    leaves = [n for n in nodes.values() if not n.is_cohort]
    for idx, value in requests:
        leaf = leaves[idx % len(leaves)]
        if value <= qn.available(leaf, FR):
            qn.add_usage(leaf, FR, value)
        assert qn.violations(nodes.values()) == []
        parent_charge_invariant(nodes)


@settings(max_examples=300, deadline=None)
@given(trees(), st.lists(st.tuples(st.integers(0, 5), amount), max_size=20), st.randoms())
def test_add_then_remove_is_identity(nodes, adds, rnd) -> None:
    leaves = [n for n in nodes.values() if not n.is_cohort]
    done = []
    for idx, value in adds:
        leaf = leaves[idx % len(leaves)]
        qn.add_usage(leaf, FR, value)
        done.append((leaf, value))
        parent_charge_invariant(nodes)
    rnd.shuffle(done)  # removal order does not matter: charges are path-independent
    for leaf, value in done:
        qn.remove_usage(leaf, FR, value)
        parent_charge_invariant(nodes)
    assert all(n.usage.get(FR, 0) == 0 for n in nodes.values())


@settings(max_examples=200, deadline=None)
@given(trees())
def test_potential_available_bounds_available(nodes) -> None:
    for n in nodes.values():
        if not n.is_cohort:
            assert 0 <= max(0, qn.available(n, FR)) <= qn.potential_available(n, FR)
