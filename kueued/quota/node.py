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

Amounts are exact ints (milli-units); nothing here allocates beyond dict updates (and
``height``'s list per tree level).

Why the functions read as loops with everything inlined: the scheduler calls them
millions of times a run (every flavor tried, every candidate walked), and a helper call,
a ``max()`` or a recursion per tree level cost more than the arithmetic (inlined, each
is 2-2.5x faster per call).  Each walks up once:

* ``available(x) = free(x) + min(cap(x), available(parent))`` with
  ``free = max(0, local_quota - usage)`` and
  ``cap = subtree - local_quota - max(0, usage - local_quota) + borrowingLimit`` (no cap
  without a limit).  The walk keeps the answer as ``base + min(cap, available(here))``;
  stepping from a node to its parent adds the node's ``free`` to ``base`` and makes
  ``cap = min(cap - free, cap(node))``.  At the root, ``available = subtree - usage``.
* ``potential_available(x) = min(subtree + borrowingLimit, local_quota + potential(parent))``
  folds the same way: ``base += local_quota``, ``cap = min(cap - local_quota,
  subtree + borrowingLimit - local_quota)``.

Integer ``min`` and ``+`` commute exactly, so the loops give the recursive definitions'
results bit for bit; ``tests/quota/test_node_reference.py`` keeps the recursive code and
checks that on random trees.

``local_quota`` is recomputed on every call, not cached: it is two dict lookups, and
``limits`` / ``subtree`` are reassigned whole (a forest build, a snapshot clone, an
actor's ``Configure``), so a cache would need them to be properties whose setters clear
it.  Measured, that was slower than no cache: every read of ``node.subtree`` elsewhere,
and every clone, pays for the property.
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
    """``max(0, subtree - lendingLimit)`` with a lending limit, else 0."""
    lim = node.limits.get(fr)
    if lim is None or (ll := lim.lending_limit) is None:
        return 0
    q = node.subtree.get(fr, 0) - ll
    return q if q > 0 else 0


def local_available(node: QuotaNode, fr: FR) -> int:
    """``max(0, local_quota - usage)``: the node's never-lent quota still free."""
    lim = node.limits.get(fr)
    if lim is None or (ll := lim.lending_limit) is None:
        q = 0
    else:
        q = node.subtree.get(fr, 0) - ll
        if q < 0:
            q = 0
    q -= node.usage.get(fr, 0)
    return q if q > 0 else 0


def add_usage(node: QuotaNode, fr: FR, value: int) -> None:
    """Charge ``value`` to ``node``; what exceeds its free local quota climbs to the parent."""
    while True:
        usage = node.usage
        used = usage.get(fr, 0)
        usage[fr] = used + value
        parent = node.parent
        if parent is None:
            return
        lim = node.limits.get(fr)
        if lim is None or (ll := lim.lending_limit) is None:
            free_local = -used if used < 0 else 0
        else:
            guaranteed = node.subtree.get(fr, 0) - ll
            if guaranteed < 0:
                guaranteed = 0
            free_local = guaranteed - used
            if free_local < 0:
                free_local = 0
        if value <= free_local:
            return
        value -= free_local
        node = parent


def remove_usage(node: QuotaNode, fr: FR, value: int) -> None:
    """Inverse of :func:`add_usage`."""
    while True:
        usage = node.usage
        used = usage.get(fr, 0)
        usage[fr] = used - value
        parent = node.parent
        if parent is None:
            return
        lim = node.limits.get(fr)
        if lim is None or (ll := lim.lending_limit) is None:
            stored_in_parent = used
        else:
            guaranteed = node.subtree.get(fr, 0) - ll
            stored_in_parent = used - guaranteed if guaranteed > 0 else used
        if stored_in_parent <= 0:
            return
        if stored_in_parent < value:
            value = stored_in_parent
        node = parent


def available(node: QuotaNode, fr: FR) -> int:
    """How much more of ``fr`` a workload at ``node`` could take now (may be negative).

    One walk up, folding each level into ``base + min(cap, ...)``: see the module docstring.
    """
    base = 0
    cap = None  # no borrowing limit met yet
    parent = node.parent
    while parent is not None:
        used = node.usage.get(fr, 0)
        lim = node.limits.get(fr)
        if lim is None:
            free = -used if used < 0 else 0
            if cap is not None:
                cap -= free
        else:
            ll = lim.lending_limit
            if ll is None:
                guaranteed = 0
            else:
                guaranteed = node.subtree.get(fr, 0) - ll
                if guaranteed < 0:
                    guaranteed = 0
            free = guaranteed - used
            if free < 0:
                free = 0
            if cap is not None:
                cap -= free
            bl = lim.borrowing_limit
            if bl is not None:
                in_parent = used - guaranteed
                if in_parent < 0:
                    in_parent = 0
                own = node.subtree.get(fr, 0) - guaranteed - in_parent + bl
                if cap is None or own < cap:
                    cap = own
        base += free
        node = parent
        parent = node.parent
    top = node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    return base + (top if cap is None or top <= cap else cap)


def potential_available(node: QuotaNode, fr: FR) -> int:
    """The most ``fr`` a workload at ``node`` could ever take, with no usage anywhere."""
    base = 0
    cap = None
    parent = node.parent
    while parent is not None:
        lim = node.limits.get(fr)
        if lim is not None:
            ll = lim.lending_limit
            if ll is None:
                guaranteed = 0
            else:
                guaranteed = node.subtree.get(fr, 0) - ll
                if guaranteed < 0:
                    guaranteed = 0
            if cap is not None:
                cap -= guaranteed
            base += guaranteed
            bl = lim.borrowing_limit
            if bl is not None:
                own = node.subtree.get(fr, 0) + bl - guaranteed
                if cap is None or own < cap:
                    cap = own
        node = parent
        parent = node.parent
    top = node.subtree.get(fr, 0)
    return base + (top if cap is None or top <= cap else cap)


def borrowing_with(node: QuotaNode, fr: FR, value: int) -> bool:
    """Would ``node`` be above its own (subtree) quota with ``value`` more usage?"""
    return node.subtree.get(fr, 0) < node.usage.get(fr, 0) + value


def height(node: QuotaNode) -> int:
    """Distance to the furthest leaf: a Cohort whose children are only ClusterQueues has 1."""
    h = 0
    level = node.children
    while level:  # level by level: no recursion, no generator per node
        h += 1
        level = [c for n in level for c in n.children]
    return h


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
    share = usage - local_quota(node, fr)
    return share if share > 0 else 0


def allowed(node: QuotaNode, fr: FR, *, has_parent: bool) -> int | None:
    """The most usage ``node`` may hold, or None when only its ancestors bound it."""
    if not has_parent:
        return node.subtree.get(fr, 0)
    bl = node.limit(fr).borrowing_limit
    return None if bl is None else node.subtree.get(fr, 0) + bl
