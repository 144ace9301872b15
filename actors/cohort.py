"""A Cohort actor: its own quota and limits, the usage its children pushed up to it.

It answers borrow requests (:class:`Reserve`) from its children by checking its own
balance and forwarding the excess to its parent, releases on :class:`Release`, and
reports its usage so the coordinator can assemble a cycle's snapshot.
"""

from __future__ import annotations

from typing import Any

from actors.messages import Configure, NodeReport, Release, Report, Reserve
from actors.node import NodeActor, _Force

__all__ = ["CohortActor"]


class CohortActor(NodeActor):
    def __init__(self, name: str) -> None:
        super().__init__(name, is_cohort=True)

    async def handle(self, msg: Any) -> Any:
        match msg:
            case _Force(workload=w, amounts=a):
                return await self.reserve(w, a, force=True)
            case Reserve(workload=w, amounts=a):
                return await self.reserve(w, a)
            case Release(workload=w, amounts=a):
                return await self.release(w, a)
            case Report():
                return NodeReport(self.name, dict(self.node.usage))
            case Configure(limits=limits, subtree=subtree, parent=parent):
                self.configure(limits, subtree, parent)
                return None
        raise TypeError(f"cohort {self.name}: unexpected message {type(msg).__name__}")
