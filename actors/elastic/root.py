"""Koordinator's root quota as an actor: the cluster total, divided among the top-level groups.

The total is the Nodes' allocatable (without Nodes, the top-level groups' max) minus what
the system and default groups use (updateClusterTotalResourceNoLock).  It moves
when a Node comes or goes (``NodeTotal`` from the coordinator) and when the system or
default group's usage does (``OutsideUsage``); either way the root divides again at once,
min scaling included, so a shrunk cluster scales the mins down before the next decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actors.elastic.flow import Flow
from actors.elastic.messages import Amounts, GroupStats, NodeTotal, OutsideUsage, RequestUp, Stats
from actors.elastic.tree import ParentActor, koord
from kueued.model import koordinator as k
from kueued.quota.elastic import sum_resources

__all__ = ["ElasticRootActor"]


class ElasticRootActor(ParentActor):
    def __init__(self, flow: Flow, *, keys: Iterable[str], node_total: Mapping[str, int] | None) -> None:
        super().__init__(k.ROOT_QUOTA, flow)
        self.keys = sorted(keys)
        self.node_total = None if node_total is None else dict(node_total)
        self.outside: dict[str, Amounts] = {}
        self._outside_seq: dict[str, int] = {}

    def cluster_total(self) -> Amounts:
        """What the root shares, in milli-units (updateClusterTotalResourceNoLock)."""
        if self.node_total is None:
            total = sum_resources(self.children[c].spec.max for c in sorted(self.children))
        else:
            total = dict(self.node_total)
        for r, v in sum_resources(self.outside[g] for g in sorted(self.outside)).items():
            total[r] = total.get(r, 0) - v  # quotav1.Subtract keeps every key
        return total

    def divide_total(self) -> Amounts:
        return koord(self.cluster_total())

    def division_keys(self) -> list[str]:
        return self.keys

    def set_node_total(self, total: Mapping[str, int]) -> None:
        self.node_total = dict(total)
        self.divide()

    def handle(self, msg: Any) -> Any:
        match msg:
            case RequestUp(child=child, limited=limited, seq=seq):
                try:
                    if self.on_request(child, limited, seq):
                        self.divide()
                finally:
                    self.flow.done()
                return None
            case OutsideUsage(group=group, used=used, seq=seq):
                try:
                    if seq > self._outside_seq.get(group, 0):
                        self._outside_seq[group] = seq
                        self.outside[group] = dict(used)
                        self.divide()
                finally:
                    self.flow.done()
                return None
            case NodeTotal(total=total):
                return self.set_node_total(total)
            case Stats():
                s = self.stats()
                return GroupStats(self.name, s.mailbox, s.handled, 0, 0, {}, self.cluster_total())
        raise TypeError(f"{self.name}: unexpected message {type(msg).__name__}")
