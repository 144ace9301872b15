"""The API port: the one edge through which decisions leave the engine.

The coordinator commits an admission or an eviction through an :class:`ApiPort`; the
Kubernetes implementation (a later issue, ``kueued.kube.client``) patches the Workload
with its resourceVersion, and a conflict makes the commit fail, so the coordinator
releases the reservation and requeues.  :class:`InMemoryPort` is the twin ``simulate``
and the tests use; it can be told to refuse commits to exercise that path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgspec

__all__ = ["ApiPort", "InMemoryPort", "Committed"]


class Committed(msgspec.Struct, frozen=True):
    kind: str            # "admit" | "evict"
    workload: str        # namespace/name
    cluster_queue: str
    detail: str = ""


class ApiPort(Protocol):
    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int]) -> bool: ...

    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str) -> bool: ...


class InMemoryPort:
    """Records every commit; ``refuse`` decides which admissions fail (a conflict)."""

    def __init__(self, *, refuse: Callable[[str], bool] | None = None) -> None:
        self.log: list[Committed] = []
        self.refuse = refuse

    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int]) -> bool:
        if self.refuse is not None and self.refuse(workload):
            return False
        self.log.append(Committed("admit", workload, cluster_queue))
        return True

    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str) -> bool:
        self.log.append(Committed("evict", workload, cluster_queue, f"{reason}: {message}"))
        return True
