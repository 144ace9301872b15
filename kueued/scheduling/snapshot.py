"""A scheduling cycle's view of the quota forest: Kueue's ``Snapshot``.

A :class:`Snapshot` holds one :class:`~kueued.quota.node.QuotaNode` per ClusterQueue
and Cohort, the admitted workloads of every ClusterQueue, and the parsed queue
settings the cycle needs.  The engine assembles it at the start of a cycle from the
state the actors own (each ClusterQueue and Cohort contributes its own node) and the
cycle mutates it freely: admissions add usage, capacity reservations add usage,
preemption simulations remove and restore workloads.  Nothing here talks to actors or
the API; :meth:`Snapshot.clone` gives a cheap private copy (usage dicts are copied,
limits and specs are shared, never mutated).

A search that runs once per head (preemption) may keep what it derives from one
ClusterQueue's admitted workloads with :meth:`Snapshot.derived`, e.g. those workloads
sorted in candidate order.  Such a value lives as long as the ClusterQueue's workloads
are unchanged: :meth:`add_workload` and :meth:`remove_workload` drop it, and so does
replacing the ``workloads`` dict (an actor's report); a clone starts with none.
Within :meth:`Snapshot.steady` (the cycle's nominations: every search restores what
it removes) a search may also keep what it derives from usage, in ``steady_cache``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from kueued.model import api
from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["ResourceGroup", "ClusterQueueSnapshot", "CohortSnapshot", "Snapshot"]

T = TypeVar("T")


class ResourceGroup:
    __slots__ = ("covered", "flavors")

    def __init__(self, covered: list[str], flavors: list[str]) -> None:
        self.covered = covered
        self.flavors = flavors


class ClusterQueueSnapshot:
    __slots__ = ("name", "spec", "node", "groups", "group_of", "workloads", "active",
                 "inactive_reason", "fair_weight", "admission_scope", "_heights", "touched")

    def __init__(self, name: str, spec: api.ClusterQueueSpec, node: QuotaNode,
                 *, active: bool = True, inactive_reason: str = "") -> None:
        self.name = name
        self.spec = spec
        self.node = node
        self.groups = [ResourceGroup(list(rg.covered_resources), [f.name for f in rg.flavors])
                       for rg in spec.resource_groups]
        self.group_of = {r: g for g in self.groups for r in g.covered}
        self.workloads: dict[str, WorkloadInfo] = {}
        self.active = active
        self.inactive_reason = inactive_reason
        self.fair_weight = _weight(spec.fair_sharing)
        self.admission_scope = bool(spec.admission_scope and spec.admission_scope.admission_mode
                                    == "UsageBasedAdmissionFairSharing")
        self._heights: list[tuple[int, ...]] = []  # one cell, shared with every clone
        # the owning Snapshot's set of queues whose usage moved (Snapshot.register sets it)
        self.touched: set[str] = set()

    def copy_onto(self, node: QuotaNode) -> ClusterQueueSnapshot:
        """This queue on another node (a clone's): its own admitted set, everything else shared
        (``_heights`` too: a clone has the same shape).  Through ``__init__`` (a compiled class
        cannot be made with ``__new__`` alone), then the derived fields are this queue's."""
        c = ClusterQueueSnapshot(self.name, self.spec, node, active=self.active,
                                 inactive_reason=self.inactive_reason)
        c.groups = self.groups
        c.group_of = self.group_of
        c.workloads = dict(self.workloads)
        c.fair_weight = self.fair_weight
        c.admission_scope = self.admission_scope
        c._heights = self._heights
        return c

    # --- shortcuts onto the quota node -------------------------------------------------------
    @property
    def parent(self) -> QuotaNode | None:
        return self.node.parent

    def nominal(self, fr: FR) -> int:
        return self.node.limit(fr).nominal

    def usage(self, fr: FR) -> int:
        return self.node.usage.get(fr, 0)

    def available(self, fr: FR) -> int:
        return max(0, qn.available(self.node, fr))

    def potential_available(self, fr: FR) -> int:
        return qn.potential_available(self.node, fr)

    def ancestor_heights(self) -> tuple[int, ...]:
        """``height`` of each ancestor, parent first.

        A forest's shape never changes once built (a topology change builds a new one,
        with new ClusterQueueSnapshots), and a clone copies it: computed once, shared.
        """
        if not self._heights:
            self._heights.append(tuple(qn.height(a) for a in self.node.ancestors()))
        return self._heights[0]

    def borrowing(self, fr: FR) -> bool:
        return self.nominal(fr) < self.usage(fr)

    def fits(self, usage: dict[FR, int]) -> bool:
        return all(v <= self.available(fr) for fr, v in usage.items())

    def add_usage(self, usage: dict[FR, int]) -> None:
        self.touched.add(self.name)
        for fr, v in usage.items():
            qn.add_usage(self.node, fr, v)

    def remove_usage(self, usage: dict[FR, int]) -> None:
        self.touched.add(self.name)
        for fr, v in usage.items():
            qn.remove_usage(self.node, fr, v)

    def __repr__(self) -> str:
        return f"<CQ {self.name}>"


class CohortSnapshot:
    __slots__ = ("name", "spec", "node", "fair_weight", "explicit")

    def __init__(self, name: str, spec: api.CohortSpec | None, node: QuotaNode) -> None:
        self.name = name
        self.spec = spec
        self.node = node
        self.explicit = spec is not None
        self.fair_weight = _weight(spec.fair_sharing if spec else None)

    def copy_onto(self, node: QuotaNode) -> CohortSnapshot:
        """This Cohort on another node (a clone's)."""
        k = CohortSnapshot(self.name, self.spec, node)
        k.explicit = self.explicit
        k.fair_weight = self.fair_weight
        return k


def _weight(fs: api.FairSharing | None) -> float:
    if fs is None or fs.weight is None:
        return 1.0
    from kueued.model.quantity import parse
    return parse(fs.weight) / 1000


class Snapshot:
    """Every ClusterQueue and Cohort of the forest, with their nodes linked."""

    def __init__(self, *, flavors: dict[str, api.ResourceFlavor], fair_sharing: bool = False,
                 settings: Any = None) -> None:
        self.settings = settings  # kueued.world.Settings of the run (feature gates, strategies)
        self.cluster_queues: dict[str, ClusterQueueSnapshot] = {}
        self.cohorts: dict[str, CohortSnapshot] = {}
        self.flavors = flavors
        self.fair_sharing = fair_sharing
        self.by_node: dict[int, ClusterQueueSnapshot | CohortSnapshot] = {}
        # per ClusterQueue: (the workloads dict it was derived from, {what: value})
        self._derived: dict[str, tuple[dict[str, WorkloadInfo], dict[str, Any]]] = {}
        self.steady_cache: dict[Any, Any] | None = None  # a dict only inside steady()
        self._cycle_copy: Snapshot | None = None  # cycle_copy's clone, made on first use
        # ClusterQueues whose usage or admitted set moved since the cycle copy last matched
        # (on the live snapshot: by the engine; on the copy: by the cycle that used it)
        self._touched: set[str] = set()

    def register(self, item: ClusterQueueSnapshot | CohortSnapshot) -> None:
        if isinstance(item, ClusterQueueSnapshot):
            item.touched = self._touched
            self.cluster_queues[item.name] = item
        else:
            self.cohorts[item.name] = item
        self.by_node[id(item.node)] = item

    def owner(self, node: QuotaNode) -> ClusterQueueSnapshot | CohortSnapshot:
        return self.by_node[id(node)]

    def nodes(self) -> Iterator[QuotaNode]:
        for cq in self.cluster_queues.values():
            yield cq.node
        for co in self.cohorts.values():
            yield co.node

    # --- workloads ---------------------------------------------------------------------------
    def add_workload(self, wl: WorkloadInfo) -> None:
        cq = self.cluster_queues[wl.cluster_queue]  # type: ignore[index]
        cq.workloads[wl.key] = wl
        cq.add_usage(wl.usage)
        self._derived.pop(cq.name, None)

    def remove_workload(self, wl: WorkloadInfo) -> None:
        cq = self.cluster_queues[wl.cluster_queue]  # type: ignore[index]
        if cq.workloads.pop(wl.key, None) is not None:
            cq.remove_usage(wl.usage)
            self._derived.pop(cq.name, None)

    def derived(self, cq: ClusterQueueSnapshot, what: str, build: Callable[[ClusterQueueSnapshot], T]) -> T:
        """``build(cq)``, kept until the ClusterQueue's admitted workloads change."""
        entry = self._derived.get(cq.name)
        if entry is None or entry[0] is not cq.workloads:
            entry = (cq.workloads, {})
            self._derived[cq.name] = entry
        values = entry[1]
        if what not in values:
            values[what] = build(cq)
        return values[what]  # type: ignore[no-any-return]

    @contextmanager
    def steady(self) -> Iterator[None]:
        """A stretch in which usage and admitted workloads stay as they are between searches.

        Searches may remove workloads while they run but restore them before they
        return, so what one derives from usage at its start holds for the next.
        """
        self.steady_cache = {}
        try:
            yield
        finally:
            self.steady_cache = None

    @contextmanager
    def without(self, workloads: Iterable[WorkloadInfo]) -> Iterator[None]:
        """Temporarily remove admitted workloads (a preemption simulation)."""
        removed = [wl for wl in workloads if wl.key in self.cluster_queues[wl.cluster_queue].workloads]  # type: ignore[index]
        for wl in removed:
            self.remove_workload(wl)
        try:
            yield
        finally:
            for wl in removed:
                self.add_workload(wl)

    def cycle_copy(self, *, refresh: bool = True) -> Snapshot:
        """A private copy for one cycle, the same object every time.

        A cycle needs a private copy of the usage and the admitted workloads, not of the
        forest's shape, which never changes (a topology change builds a new forest).  So
        the first call clones and later calls :meth:`refresh` that clone: one usage dict
        per node and one workloads dict per ClusterQueue (about a sixth of a full clone at
        a thousand ClusterQueues).  ``refresh=False`` is for a caller that replaces every
        balance and admitted set itself (the actor coordinator, from the actors' replies).
        What the last cycle derived is dropped either way.
        """
        copy = self._cycle_copy
        if copy is None:
            copy = self._cycle_copy = self.clone()
            self._touched.clear()
        elif refresh:
            copy.refresh(self)
        else:
            copy.drop_derived()
        return copy

    def refresh(self, live: Snapshot) -> None:
        """Make this snapshot, a :meth:`clone` of ``live``'s forest, equal to ``live`` again.

        Only what moved is copied: the ClusterQueues whose usage went up or down on either
        side since the copy last matched (every such change passes through
        :meth:`ClusterQueueSnapshot.add_usage` / ``remove_usage``, which note the queue),
        with their admitted sets and every Cohort above them.  Fair sharing's ordering adds
        and takes back usage on the nodes directly, so under fair sharing all is copied.
        """
        mine = self.cluster_queues
        if self.fair_sharing or live.fair_sharing:
            names: Iterable[str] = live.cluster_queues
            cohort_names: Iterable[str] = live.cohorts
        else:
            names = self._touched | live._touched
            above: set[str] = set()
            for name in names:
                node = live.cluster_queues[name].node.parent
                while node is not None and node.name not in above:
                    above.add(node.name)
                    node = node.parent
            cohort_names = above
        for name in names:
            cq = live.cluster_queues[name]
            c = mine[name]
            c.node.usage = dict(cq.node.usage)
            c.workloads = dict(cq.workloads)
        cohorts, theirs = self.cohorts, live.cohorts
        for name in cohort_names:
            cohorts[name].node.usage = dict(theirs[name].node.usage)
        self._touched.clear()
        live._touched.clear()
        self.drop_derived()

    def drop_derived(self) -> None:
        """Forget what searches derived (:meth:`derived`, ``steady_cache``): the state is replaced."""
        self._derived.clear()
        self.steady_cache = None

    def clone(self) -> Snapshot:
        """A private copy for one cycle: new nodes with copied usage, shared specs."""
        out = Snapshot(flavors=self.flavors, fair_sharing=self.fair_sharing, settings=self.settings)
        mapping: dict[int, QuotaNode] = {}
        for old in self.nodes():
            new = QuotaNode(old.name, is_cohort=old.is_cohort)
            new.limits = old.limits
            new.subtree = old.subtree
            new.usage = dict(old.usage)
            mapping[id(old)] = new
        for old in self.nodes():
            new = mapping[id(old)]
            new.parent = mapping[id(old.parent)] if old.parent is not None else None
            new.children = [mapping[id(c)] for c in old.children]
        for cq in self.cluster_queues.values():
            out.register(cq.copy_onto(mapping[id(cq.node)]))
        for co in self.cohorts.values():
            out.register(co.copy_onto(mapping[id(co.node)]))
        return out
