"""The cohort forest's edges: who is whose parent, implicit cohorts, and cycles.

Kept apart from the amounts (``node.py``), as Kueue keeps ``pkg/cache/hierarchy``
apart from ``resource_node.go``.  Input is plain names: each ClusterQueue's
``cohortName`` and each Cohort object's ``parentName``.  A name that is referenced
but has no Cohort object is an *implicit* cohort (no quota, no limits, no parent).

A cycle in ``parentName`` edges makes every cohort on it, every cohort below it and
every ClusterQueue under those inactive; the rest of the forest is unaffected
(KEP-79).  Cycle detection colours nodes once, so the cost is linear.

A chain deeper than :data:`~kueued.model.limits.MAX_TREE_DEPTH` levels does the same to
the cohorts past the limit and everything below them (KEP-79 sets no limit; kueued's
stacks need one, and a real organisation is a handful of levels deep).  Inactive
cohorts are cut from their parents, so no tree the scheduler walks is deeper than the
limit.  Both walks are iterative.
"""

from __future__ import annotations

from collections.abc import Mapping

from kueued.model.limits import MAX_TREE_DEPTH

__all__ = ["Edges", "find_cyclic", "find_too_deep", "on_cycle", "cycle_words"]


class Edges:
    """Parent links of cohorts and ClusterQueues, with implicit cohorts filled in."""

    def __init__(self, cohort_parent: Mapping[str, str], cq_cohort: Mapping[str, str]) -> None:
        self.cohort_parent: dict[str, str] = {k: v for k, v in cohort_parent.items()}
        self.cq_cohort: dict[str, str] = {k: v for k, v in cq_cohort.items() if v}
        self.explicit = set(cohort_parent)
        names = set(cohort_parent) | {p for p in cohort_parent.values() if p} | set(self.cq_cohort.values())
        self.cohorts = sorted(names)
        self.cyclic = find_cyclic(self.cohort_parent)
        self.too_deep = find_too_deep(self.cohort_parent, self.cyclic)
        self.inactive = self.cyclic | self.too_deep.keys()

    def parent_of_cohort(self, name: str) -> str | None:
        return self.cohort_parent.get(name) or None

    def cq_cut_off(self, cq: str) -> bool:
        """The ClusterQueue's cohort is on or under a cycle, or past the depth limit."""
        cohort = self.cq_cohort.get(cq)
        return cohort is not None and cohort in self.inactive


def find_cyclic(parent: Mapping[str, str]) -> set[str]:
    """Cohorts on a cycle of ``parent`` links or below one."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    bad: set[str] = set()
    for start in parent:
        if start in state:
            continue
        path: list[str] = []
        node: str | None = start
        while node is not None and node not in state:
            state[node] = 1
            path.append(node)
            node = parent.get(node) or None
        # node is None (a root), done (2) or on this path (1) => a new cycle
        tainted = node is not None and (state[node] == 1 or node in bad)
        for name in path:
            state[name] = 2
            if tainted:
                bad.add(name)
    return bad


def on_cycle(parent: Mapping[str, str], name: str) -> bool:
    """Is ``name`` itself on a cycle of ``parent`` links (not only below one)?"""
    seen: set[str] = set()
    node = parent.get(name) or None
    while node is not None and node not in seen:
        if node == name:
            return True
        seen.add(node)
        node = parent.get(node) or None
    return False


def cycle_words(parent: Mapping[str, str], name: str) -> str:
    """How a cohort of ``find_cyclic`` stands to its cycle, for a reason a person reads."""
    return "is part of a cycle" if on_cycle(parent, name) else "is below a cycle"


def find_too_deep(parent: Mapping[str, str], cyclic: set[str]) -> dict[str, int]:
    """Cohorts (off cycles) at level > MAX_TREE_DEPTH, a root being level 1, with their level."""
    level: dict[str, int] = {}
    for start in parent:
        path: list[str] = []
        node: str | None = start
        while node is not None and node not in level and node not in cyclic:
            path.append(node)
            node = parent.get(node) or None
        above = level.get(node, 0) if node is not None else 0
        for name in reversed(path):
            above += 1
            level[name] = above
    return {name: n for name, n in level.items() if n > MAX_TREE_DEPTH}
