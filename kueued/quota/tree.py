"""The cohort forest's edges: who is whose parent, implicit cohorts, and cycles.

Kept apart from the amounts (``node.py``), as Kueue keeps ``pkg/cache/hierarchy``
apart from ``resource_node.go``.  Input is plain names: each ClusterQueue's
``cohortName`` and each Cohort object's ``parentName``.  A name that is referenced
but has no Cohort object is an *implicit* cohort (no quota, no limits, no parent).

A cycle in ``parentName`` edges makes every cohort on it, every cohort below it and
every ClusterQueue under those inactive; the rest of the forest is unaffected
(KEP-79).  Cycle detection colours nodes once, so the cost is linear.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["Edges", "find_cyclic"]


class Edges:
    """Parent links of cohorts and ClusterQueues, with implicit cohorts filled in."""

    def __init__(self, cohort_parent: Mapping[str, str], cq_cohort: Mapping[str, str]) -> None:
        self.cohort_parent: dict[str, str] = {k: v for k, v in cohort_parent.items()}
        self.cq_cohort: dict[str, str] = {k: v for k, v in cq_cohort.items() if v}
        self.explicit = set(cohort_parent)
        names = set(cohort_parent) | {p for p in cohort_parent.values() if p} | set(self.cq_cohort.values())
        self.cohorts = sorted(names)
        self.cyclic = find_cyclic(self.cohort_parent)

    def parent_of_cohort(self, name: str) -> str | None:
        return self.cohort_parent.get(name) or None

    def is_inactive_cohort(self, name: str) -> bool:
        return name in self.cyclic

    def cq_in_cycle(self, cq: str) -> bool:
        cohort = self.cq_cohort.get(cq)
        return cohort is not None and cohort in self.cyclic


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
