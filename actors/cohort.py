"""A Cohort actor: its own quota and limits, the usage its children pushed up to it.

It answers borrow requests (:class:`Reserve`) from its children by checking its own
balance and forwarding the excess to its parent, releases on :class:`Release`, and
reports its usage so the coordinator can assemble a cycle's snapshot.
"""

from __future__ import annotations

from typing import Any

from actors.node import NodeActor

__all__ = ["CohortActor"]


class CohortActor(NodeActor):
    def __init__(self, name: str) -> None:
        super().__init__(name, is_cohort=True)

    def handle(self, msg: Any) -> Any:
        return self.handle_node(msg)
