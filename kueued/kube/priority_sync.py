"""Kueue's WorkloadPriorityClass controller: a class's value written into ``spec.priority``.

Kueue keeps the value of a WorkloadPriorityClass in the ``spec.priority`` of every Workload
whose ``priorityClassRef`` names it (``workloadpriorityclass_controller.go``: on the class's
creation, and whenever its value changes; nothing on its deletion, so the last value written
stays).  kueued's World read the class's value in memory (``World.priority_of``) but never wrote
it, so ``kubectl get workloads`` showed the old priority, a deleted class left Workloads at a
value nobody had seen, and a restart in between decided on the stale ``spec.priority``: the
same history, another admission.

:class:`PrioritySync` works out which Workloads disagree with their class (:func:`due`) and
patches ``spec.priority`` on the status publisher's pass (``{"spec": {"priority": v}}``, a merge
patch: the value is the same whoever writes it), at most :data:`PER_PASS` a pass, and looks at
the Workloads only after a round (a class or a Workload changed) or while some are left to
write: not on every pass of an idle daemon.  A Workload the API server no longer has is skipped;
another refusal is tried again on a later pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import structlog

from kueued.kube.errors import ApiError, ApiNotFound
from kueued.world import World

__all__ = ["PrioritySync", "due", "PER_PASS"]

log = structlog.get_logger("kueued.kube.priority_sync")

PER_PASS = 64
"""Workloads patched per pass: a class shared by thousands of Workloads changes them over several."""


def due(world: World) -> Iterator[tuple[str, str, int]]:
    """(namespace, name, the class's value) of every Workload whose ``spec.priority`` is not its
    WorkloadPriorityClass's value."""
    classes = world.priority_classes
    if not classes:
        return
    for spec in world.workloads.values():
        ref = spec.obj.spec.priority_class_ref
        if ref is None or ref.kind != "WorkloadPriorityClass" or ref.name not in classes:
            continue
        value = classes[ref.name]
        if spec.obj.spec.priority != value:
            yield spec.obj.metadata.namespace, spec.obj.metadata.name, value


class PrioritySync:
    def __init__(self) -> None:
        self.written = 0
        self._epoch: object = None  # the state last looked at in full, while nothing was left to write

    async def sync(self, client: Any, world: World, *, limit: int = PER_PASS, epoch: object = None) -> int:
        """Patch up to ``limit`` Workloads that disagree with their class; how many were written.
        ``epoch`` names the state looked at (the coordinator's round count): the Workloads are not
        looked at again while it stays the same and the last look left nothing to write."""
        if epoch is not None and epoch == self._epoch:
            return 0
        done, left = 0, False
        for namespace, name, value in due(world):
            if done >= limit:
                left = True
                break
            try:
                await client.patch("Workload", namespace, name, {"spec": {"priority": value}})
            except ApiNotFound:
                continue
            except ApiError as exc:
                log.warning("workload_priority_write_failed", workload=f"{namespace}/{name}",
                            error=type(exc).__name__, detail=str(exc)[:200])
                left = True
                continue
            done += 1
            log.info("workload_priority_updated", workload=f"{namespace}/{name}", priority=value)
        self.written += done
        self._epoch = None if left else epoch
        return done
