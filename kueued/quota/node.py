"""Quota arithmetic on one node of a cohort tree (KEP-79), per (flavor, resource).

A node is a ClusterQueue (a leaf) or a Cohort.  Each holds, per ``FR`` = (flavor,
resource): its own ``Limits`` (nominal, borrowingLimit, lendingLimit), its
``subtree`` quota and its ``usage``.  This mirrors Kueue's
``pkg/cache/scheduler/resource_node.go``:

* ``subtree(cq) = nominal``; ``subtree(cohort) = own nominal + sum(subtree(c) - local_quota(c))``.
* ``local_quota(x) = max(0, subtree(x) - lendingLimit(x))`` when a lending limit is set,
  else 0: the part of x's quota that is never lent upwards.
* usage enters at a ClusterQueue; whatever exceeds the node's free local quota is
  charged to its parent, recursively (``add_usage`` / ``remove_usage``).
* ``available(x)`` = free local quota + what the parent can give, capped by x's
  borrowing limit; ``potential_available`` is the same with no usage anywhere.

In the seed's notation ``T(x) = subtree(x) - usage(x)`` and a state is admissible iff
``T(x) >= -borrowingLimit(x)`` for every node with a limit and ``T(root) >= 0``;
:func:`violations` checks exactly that, and the Hypothesis properties use it.

Amounts are exact ints (milli-units); nothing here allocates beyond dict updates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["FR", "Limits", "QuotaNode", "add_usage", "remove_usage", "available",
           "potential_available", "local_quota", "local_available", "borrowing_with",
           "violations", "height"]

FR = tuple[str, str]
"""(flavor, resource)."""


class Limits:
    """A node's own quota for one FR.  ``None`` limits mean "no limit"."""

    __slots__ = ("nominal", "borrowing_limit", "lending_limit")

    def __init__(self, nominal: int = 0, borrowing_limit: int | None = None,
                 lending_limit: int | None = None) -> None:
        self.nominal = nominal
        self.borrowing_limit = borrowing_limit
        self.lending_limit = lending_limit

    def __repr__(self) -> str:
        return f"Limits({self.nominal}, bl={self.borrowing_limit}, ll={self.lending_limit})"


_NO_LIMITS = Limits()


class QuotaNode:
    """One node of the tree.  ``parent`` is None at a root (or a ClusterQueue without cohort)."""

    __slots__ = ("name", "is_cohort", "parent", "children", "limits", "subtree", "usage")

    def __init__(self, name: str, *, is_cohort: bool) -> None:
        self.name = name
        self.is_cohort = is_cohort
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.limits: dict[FR, Limits] = {}
        self.subtree: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}

    def __repr__(self) -> str:
        kind = "Cohort" if self.is_cohort else "ClusterQueue"
        return f"<{kind} {self.name}>"

    def limit(self, fr: FR) -> Limits:
        return self.limits.get(fr, _NO_LIMITS)

    def ancestors(self) -> Iterator[QuotaNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def frs(self) -> Iterable[FR]:
        return self.subtree.keys()


def local_quota(node: QuotaNode, fr: FR) -> int:
    ll = node.limit(fr).lending_limit
    if ll is None:
        return 0
    return max(0, node.subtree.get(fr, 0) - ll)


def local_available(node: QuotaNode, fr: FR) -> int:
    return max(0, local_quota(node, fr) - node.usage.get(fr, 0))


def add_usage(node: QuotaNode, fr: FR, value: int) -> None:
    """Charge ``value`` to ``node``; what exceeds its free local quota climbs to the parent."""
    while True:
        free_local = local_available(node, fr)
        node.usage[fr] = node.usage.get(fr, 0) + value
        parent = node.parent
        if parent is None or value <= free_local:
            return
        value -= free_local
        node = parent


def remove_usage(node: QuotaNode, fr: FR, value: int) -> None:
    """Inverse of :func:`add_usage`."""
    while True:
        stored_in_parent = node.usage.get(fr, 0) - local_quota(node, fr)
        node.usage[fr] = node.usage.get(fr, 0) - value
        parent = node.parent
        if stored_in_parent <= 0 or parent is None:
            return
        value = min(value, stored_in_parent)
        node = parent


def available(node: QuotaNode, fr: FR) -> int:
    """How much more of ``fr`` a workload at ``node`` could take now (may be negative)."""
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    guaranteed = local_quota(node, fr)
    used = node.usage.get(fr, 0)
    from_parent = available(node.parent, fr)
    bl = node.limit(fr).borrowing_limit
    if bl is not None:
        stored_in_parent = node.subtree.get(fr, 0) - guaranteed
        used_in_parent = max(0, used - guaranteed)
        from_parent = min(from_parent, stored_in_parent - used_in_parent + bl)
    return max(0, guaranteed - used) + from_parent


def potential_available(node: QuotaNode, fr: FR) -> int:
    """The most ``fr`` a workload at ``node`` could ever take, with no usage anywhere."""
    if node.parent is None:
        return node.subtree.get(fr, 0)
    value = local_quota(node, fr) + potential_available(node.parent, fr)
    bl = node.limit(fr).borrowing_limit
    if bl is not None:
        value = min(value, node.subtree.get(fr, 0) + bl)
    return value


def borrowing_with(node: QuotaNode, fr: FR, value: int) -> bool:
    """Would ``node`` be above its own (subtree) quota with ``value`` more usage?"""
    return node.subtree.get(fr, 0) < node.usage.get(fr, 0) + value


def height(node: QuotaNode) -> int:
    """Distance to the furthest leaf: a Cohort whose children are only ClusterQueues has 1."""
    if not node.children:
        return 0
    return 1 + max(height(c) for c in node.children)


def violations(nodes: Iterable[QuotaNode]) -> list[tuple[QuotaNode, FR, int, int]]:
    """Every (node, fr, usage, allowed) where usage exceeds what the tree allows.

    ``allowed`` is subtree + borrowingLimit for a node with a parent and a limit, the
    subtree quota at a root; a node with a parent and no limit is bounded by its
    ancestors only.
    """
    out = []
    for node in nodes:
        for fr, used in node.usage.items():
            if node.parent is None:
                allowed = node.subtree.get(fr, 0)
            else:
                bl = node.limit(fr).borrowing_limit
                if bl is None:
                    continue
                allowed = node.subtree.get(fr, 0) + bl
            if used > allowed:
                out.append((node, fr, used, allowed))
    return out


def parent_share(node: QuotaNode, fr: FR, usage: int) -> int:
    """What a node with this usage holds in its parent: ``max(0, usage - local_quota)``."""
    return max(0, usage - local_quota(node, fr))


def allowed(node: QuotaNode, fr: FR, *, has_parent: bool) -> int | None:
    """The most usage ``node`` may hold, or None when only its ancestors bound it."""
    if not has_parent:
        return node.subtree.get(fr, 0)
    bl = node.limit(fr).borrowing_limit
    return None if bl is None else node.subtree.get(fr, 0) + bl
