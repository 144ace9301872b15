"""The unrolled quota arithmetic in ``kueued.quota.node`` against a plain reference.

``node.py`` walks the tree in loops with everything inlined, because the scheduler calls
it millions of times a run.  The reference below is the straightforward recursive code it
replaced (one helper per formula, ``max``/``min`` everywhere); every property here says
the two agree exactly, on random trees and random (even negative) usage, including FRs a
node has no limits for and nodes whose limits or subtree quota were reassigned.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.quota import node as qn
from kueued.quota.node import Limits, QuotaNode
from tests.quota.test_node import FR, amount, maybe, trees

OTHER = ("default", "memory")  # an FR the trees strategy gives no node limits for
FRS = (FR, OTHER)


# --- the reference: the recursive code node.py started from ----------------------------------

_NO_LIMITS = Limits()


def ref_limit(node: QuotaNode, fr) -> Limits:
    return node.limits.get(fr, _NO_LIMITS)


def ref_local_quota(node: QuotaNode, fr) -> int:
    ll = ref_limit(node, fr).lending_limit
    if ll is None:
        return 0
    return max(0, node.subtree.get(fr, 0) - ll)


def ref_local_available(node: QuotaNode, fr) -> int:
    return max(0, ref_local_quota(node, fr) - node.usage.get(fr, 0))


def ref_add_usage(node: QuotaNode, fr, value: int) -> None:
    while True:
        free_local = ref_local_available(node, fr)
        node.usage[fr] = node.usage.get(fr, 0) + value
        parent = node.parent
        if parent is None or value <= free_local:
            return
        value -= free_local
        node = parent


def ref_remove_usage(node: QuotaNode, fr, value: int) -> None:
    while True:
        stored_in_parent = node.usage.get(fr, 0) - ref_local_quota(node, fr)
        node.usage[fr] = node.usage.get(fr, 0) - value
        parent = node.parent
        if stored_in_parent <= 0 or parent is None:
            return
        value = min(value, stored_in_parent)
        node = parent


def ref_available(node: QuotaNode, fr) -> int:
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    guaranteed = ref_local_quota(node, fr)
    used = node.usage.get(fr, 0)
    from_parent = ref_available(node.parent, fr)
    bl = ref_limit(node, fr).borrowing_limit
    if bl is not None:
        stored_in_parent = node.subtree.get(fr, 0) - guaranteed
        used_in_parent = max(0, used - guaranteed)
        from_parent = min(from_parent, stored_in_parent - used_in_parent + bl)
    return max(0, guaranteed - used) + from_parent


def ref_potential_available(node: QuotaNode, fr) -> int:
    if node.parent is None:
        return node.subtree.get(fr, 0)
    value = ref_local_quota(node, fr) + ref_potential_available(node.parent, fr)
    bl = ref_limit(node, fr).borrowing_limit
    if bl is not None:
        value = min(value, node.subtree.get(fr, 0) + bl)
    return value


def ref_height(node: QuotaNode) -> int:
    if not node.children:
        return 0
    return 1 + max(ref_height(c) for c in node.children)


def ref_violations(nodes):
    out = []
    for node in nodes:
        for fr, used in node.usage.items():
            if node.parent is None:
                allowed = node.subtree.get(fr, 0)
            else:
                bl = ref_limit(node, fr).borrowing_limit
                if bl is None:
                    continue
                allowed = node.subtree.get(fr, 0) + bl
            if used > allowed:
                out.append((node, fr, used, allowed))
    return out


def ref_allowed(node: QuotaNode, fr, *, has_parent: bool) -> int | None:
    if not has_parent:
        return node.subtree.get(fr, 0)
    bl = ref_limit(node, fr).borrowing_limit
    return None if bl is None else node.subtree.get(fr, 0) + bl


# --- strategies ------------------------------------------------------------------------------

signed = st.integers(min_value=-10, max_value=20).map(lambda x: x * 500)


@st.composite
def states(draw):
    """A random tree, some nodes stripped of their limits, random usage on every node.

    Usage is drawn freely (not charged through ``add_usage``) so every branch of the
    arithmetic is reached, negative amounts included; the functions are pure arithmetic
    on whatever state they are given, so they must agree on any of it.
    """
    nodes = draw(trees())
    for n in nodes.values():
        if draw(st.integers(0, 5)) == 0:
            n.limits = {}
        for fr in FRS:
            if draw(st.booleans()):
                n.usage[fr] = draw(signed)
    return nodes


def assert_reads_agree(nodes: dict[str, QuotaNode]) -> None:
    for n in nodes.values():
        for fr in FRS:
            where = (n, fr, n.limits.get(fr), n.subtree.get(fr), n.usage.get(fr))
            assert qn.available(n, fr) == ref_available(n, fr), where
            assert qn.potential_available(n, fr) == ref_potential_available(n, fr), where
            assert qn.local_quota(n, fr) == ref_local_quota(n, fr), where
            assert qn.local_available(n, fr) == ref_local_available(n, fr), where
            got, want = n.limit(fr), ref_limit(n, fr)
            assert (got.nominal, got.borrowing_limit, got.lending_limit) == \
                (want.nominal, want.borrowing_limit, want.lending_limit), where
            for value in (0, 500, 3000):
                assert qn.parent_share(n, fr, value) == max(0, value - ref_local_quota(n, fr)), where
            for has_parent in (False, True):
                assert qn.allowed(n, fr, has_parent=has_parent) == ref_allowed(n, fr, has_parent=has_parent)
        assert qn.height(n) == ref_height(n)
    assert qn.violations(nodes.values()) == ref_violations(nodes.values())


def twin(nodes: dict[str, QuotaNode]) -> dict[str, QuotaNode]:
    """A deep copy, node by node (a compiled QuotaNode has no ``copy`` protocol): the reference
    charges one, the fast code the other."""
    out = {}
    for name, n in nodes.items():
        new = QuotaNode(n.name, is_cohort=n.is_cohort)
        new.limits, new.subtree, new.usage = dict(n.limits), dict(n.subtree), dict(n.usage)
        out[name] = new
    by_id = {id(n): out[name] for name, n in nodes.items()}
    for name, n in nodes.items():
        out[name].parent = by_id[id(n.parent)] if n.parent is not None else None
        out[name].children = [by_id[id(c)] for c in n.children]
    return out


def usages(nodes: dict[str, QuotaNode]) -> dict[str, dict]:
    return {name: dict(n.usage) for name, n in nodes.items()}


# --- properties ------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(states())
def test_reads_match_the_reference(nodes) -> None:
    assert_reads_agree(nodes)


ops = st.lists(st.tuples(st.booleans(), st.integers(0, 10), st.sampled_from(FRS), amount), max_size=30)


@settings(max_examples=300, deadline=None)
@given(states(), ops)
def test_charges_match_the_reference(nodes, steps) -> None:
    ref = twin(nodes)
    names = sorted(nodes)
    for adding, idx, fr, value in steps:
        name = names[idx % len(names)]
        if adding:
            qn.add_usage(nodes[name], fr, value)
            ref_add_usage(ref[name], fr, value)
        else:
            qn.remove_usage(nodes[name], fr, value)
            ref_remove_usage(ref[name], fr, value)
        assert usages(nodes) == usages(ref)
        assert_reads_agree(nodes)


@settings(max_examples=200, deadline=None)
@given(states(), st.data())
def test_reassigned_limits_and_subtree_are_seen(nodes, data) -> None:
    assert_reads_agree(nodes)  # reads first, so anything derived from the old dicts is in place
    for n in nodes.values():
        match data.draw(st.integers(0, 3)):
            case 0:
                n.limits = {FR: Limits(data.draw(amount), data.draw(maybe), data.draw(maybe))}
            case 1:
                n.subtree = {FR: data.draw(amount)}
            case 2:
                n.limits, n.subtree = {}, {}
            case _:
                pass
    assert_reads_agree(nodes)
    # and a clone's way: the new node takes the old one's dicts whole
    for n in nodes.values():
        fresh = QuotaNode(n.name, is_cohort=n.is_cohort)
        fresh.limits = n.limits
        fresh.subtree = n.subtree
        assert qn.local_quota(fresh, FR) == ref_local_quota(n, FR)
