"""What the root and an inner group share: children's requests in, their runtimes out.

A parent keeps the newest limited request each child told it (a sequence number per
sender, so an overtaken message is ignored) and the share it last told each child, so it
tells a child only when its share moved.  Dividing is the pure
``quota.elastic.divide_runtime``, run on nothing but what the children told.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from actors.elastic.flow import Flow
from actors.elastic.messages import Amounts, RuntimeDown
from actors.runtime import Actor
from kueued.model import koordinator as k
from kueued.quota.elastic import divide_runtime

if TYPE_CHECKING:
    from actors.elastic.group import ElasticGroupActor

__all__ = ["ParentActor", "koord"]


def koord(amounts: Mapping[str, int]) -> Amounts:
    """Milli-units to Koordinator's calculator values (cpu in millicores, others in whole units)."""
    return {r: k.koord_value(r, v) for r, v in amounts.items()}


class ParentActor(Actor):
    def __init__(self, name: str, flow: Flow) -> None:
        super().__init__(name)
        self.flow = flow
        self.children: dict[str, ElasticGroupActor] = {}
        self.child_limited: dict[str, Amounts] = {}
        self._child_seq: dict[str, int] = {}
        self._sent_down: dict[str, tuple[Amounts, Amounts]] = {}
        self._seq = 0

    def adopt(self, child: ElasticGroupActor) -> None:
        """Wiring, before any actor runs: the child's requests come here."""
        self.children[child.name] = child
        child.parent = self

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def divide_total(self) -> Amounts | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def division_keys(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_request(self, child: str, limited: Amounts, seq: int) -> bool:
        """A child's limited request; False when it is older than one already seen."""
        if seq <= self._child_seq.get(child, 0):
            return False
        self._child_seq[child] = seq
        self.child_limited[child] = dict(limited)
        return True

    def divide(self) -> None:
        """Split the total among the children; tell each whose share moved.

        A child's spec is read from the child actor: it is fixed for the actor's life (a
        changed group is a rebuilt tree), so reading it shares nothing that moves.
        """
        total = self.divide_total()
        if total is None or not self.children:
            return
        kids = sorted(self.children)
        runtime, scaled = divide_runtime(
            total, [(self.children[c].spec, self.child_limited.get(c, {})) for c in kids],
            keys=self.division_keys(),
        )
        for c in kids:
            share = (runtime[c], scaled[c])
            if self._sent_down.get(c) != share:
                self._sent_down[c] = share
                self.flow.tell(self.children[c], RuntimeDown(runtime[c], scaled[c], self.next_seq()))
