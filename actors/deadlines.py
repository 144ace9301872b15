"""A Workload's maximum execution time (Kueue's KEP-3125, ``spec.maximumExecutionTimeSeconds``).

Kueue's workload controller (``reconcileMaxExecutionTime``) gives an admitted workload
``maximumExecutionTimeSeconds`` minus ``status.accumulatedPastExecutionTimeSeconds`` from
the moment it was admitted.  When that has run out it sets the ``DeactivationTarget``
condition (reason ``MaximumExecutionTimeExceeded``, "exceeding the maximum execution time"),
clears the accumulated time and records a Warning Event ("The maximum execution time (60s)
exceeded"); the next reconcile sets ``spec.active: false``, and the deactivated workload is
evicted with reason ``DeactivatedDueToMaximumExecutionTimeExceeded`` ("The workload is
deactivated due to exceeding the maximum execution time"), the condition removed.  An
admission that ends otherwise (a preemption, a drain) adds the seconds it ran to the
accumulated time, so the budget spans every admission of the workload.

:class:`Deadlines` (a mixin of the Coordinator) keeps, for each admitted workload with a
limit, when it runs out: set when an admission is committed or adopted (a reservation made
before this run, at its ``QuotaReserved`` time), checked at the start of every round
(:meth:`expire`).  The port writes the condition and ``spec.active: false``
(:meth:`~kueued.kube.port.ApiPort.deactivate`); on a cluster the watch brings the new version
back, in-process the coordinator applies it itself.  Either way the deactivated version
reaches the drain (``actors.drains``), which evicts it with the reason above.  The seconds
an admission ran are kept here as well as on the Workload (the port writes them with an
eviction's second phase), so a re-admission in the same run need not wait for the echo.

Time is the coordinator's clock (the wall clock in the daemon, the timeline's in a timed
``simulate``); :meth:`next_deadline` lets the daemon and the timeline wake up when one is due
although nothing else happens.  An untimed ``simulate`` has no clock: it is one instant, a
snapshot run to quiescence (no workload finishes in it either), so no limit runs out there,
not even one whose reservation its objects carry from long before: their timestamps order
queues, they do not say how long ago "now" is.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog

from actors.commits import commit_all
from kueued.model.clock import rfc3339

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from kueued.kube.port import ApiPort
    from kueued.scheduling.workload import Placement, WorkloadSpec
    from kueued.world import Change, World

__all__ = ["Deadlines", "MAX_EXECUTION", "MAX_EXECUTION_MESSAGE"]

MAX_EXECUTION = "MaximumExecutionTimeExceeded"
MAX_EXECUTION_MESSAGE = "exceeding the maximum execution time"
DEACTIVATION_TARGET = "DeactivationTarget"

RETRY = 1.0
"""Seconds before a refused deactivation is tried again."""

log = structlog.get_logger("kueued.coordinator")


class Deadlines:
    """The maximum-execution-time half of the Coordinator (a mixin: every attribute is the Coordinator's)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        world: World
        port: ApiPort
        clock: Callable[[], float] | None
        _deadlines: dict[str, tuple[float, float]]
        _past: dict[str, int]
        _evicting: dict[str, str]
        _tg: TaskGroup | None

        def now(self) -> float: ...
        def _record_deactivation(self, key: str, reason: str, message: str) -> None: ...
        async def _react(self, change: Change, key: str, old: WorkloadSpec | None, tg: TaskGroup, *,
                         status_kept: bool = False) -> None: ...

    def _watch_deadline(self, key: str, placement: Placement) -> None:
        """An admission committed or adopted: when its workload's limit runs out, if it has one."""
        spec = self.world.workloads.get(key)
        limit = spec.obj.spec.maximum_execution_time_seconds if spec is not None else None
        if spec is None or limit is None or self.clock is None:  # no limit, or no time passes
            self._deadlines.pop(key, None)
            return
        self._deadlines[key] = (placement.at + limit - self._past_of(key, spec), placement.at)

    def _ran(self, key: str, placement: Placement | None) -> None:
        """An admission ended without the workload finishing (its eviction released): the seconds it
        ran count against its limit at the next admission."""
        spec = self.world.workloads.get(key)
        self._deadlines.pop(key, None)
        if placement is None or spec is None:
            return
        self._past[key] = self._past_of(key, spec) + int(max(0.0, self.now() - placement.at))

    def _past_of(self, key: str, spec: WorkloadSpec) -> int:
        """Seconds the workload's earlier admissions ran: as this run counted them, else its status says."""
        return self._past.get(key, spec.obj.status.accumulated_past_execution_time_seconds or 0)

    def next_deadline(self) -> float | None:
        """When the next admitted workload runs out of time (the coordinator's clock), or None."""
        return min((due for due, _ in self._deadlines.values()), default=None)

    async def expire(self) -> bool:
        """Deactivate every admitted workload whose time has run out (module notes); whether any was.
        The writes go out together, as a round's evictions do (``commit_all``)."""
        if not self._deadlines or self.clock is None:
            return False
        now = self.clock()
        due: list[tuple[str, float, WorkloadSpec, int]] = []
        for key in [key for key, (at, _) in self._deadlines.items() if at <= now]:
            _, admitted_at = self._deadlines.pop(key)
            spec = self.world.workloads.get(key)
            placed = self.world.placed.get(key)
            limit = spec.obj.spec.maximum_execution_time_seconds if spec is not None else None
            if (spec is not None and placed is not None and placed.at == admitted_at and limit is not None
                    and spec.obj.spec.active and key not in self._evicting):
                due.append((key, admitted_at, spec, limit))  # else gone, admitted again since, or on its way out
        written = await commit_all(self.port, [
            partial(self.port.deactivate, key, reason=MAX_EXECUTION, message=MAX_EXECUTION_MESSAGE)
            for key, *_ in due])
        for (key, admitted_at, spec, limit), ok in zip(due, written, strict=True):
            if not ok:  # the Workload changed meanwhile, or this process may not write now
                self._deadlines[key] = (now + RETRY, admitted_at)
                continue
            self._past.pop(key, None)  # Kueue clears the accumulated time as it deactivates
            log.info("workload_deactivated", workload=key, reason=MAX_EXECUTION, limit_seconds=limit)
            self._record_deactivation(key, MAX_EXECUTION, f"The maximum execution time ({limit}s) exceeded")
            manifest = self.world.raw.get(f"Workload/{key}")
            if manifest is not None and not self.port.echoes and self._tg is not None:  # in-process
                # nobody brings it back: applied here, kept as admitted with its quota until the drain
                # evicts it (an in-process manifest carries no admission, so the new status shows none)
                change, _ = self.world.apply(deactivated(manifest, MAX_EXECUTION, MAX_EXECUTION_MESSAGE))
                await self._react(change, key, spec, self._tg, status_kept=False)
        return any(written)


def deactivated(manifest: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    """``manifest`` as Kueue's workload controller leaves it: ``spec.active: false``, the
    ``DeactivationTarget`` condition set, no accumulated execution time."""
    new = copy.deepcopy(manifest)
    new.setdefault("spec", {})["active"] = False
    status = new.get("status")
    status = status if isinstance(status, dict) else {}
    new["status"] = status
    status.pop("accumulatedPastExecutionTimeSeconds", None)
    listed = status.get("conditions")
    kept = [c for c in listed if isinstance(c, dict) and c.get("type") != DEACTIVATION_TARGET] \
        if isinstance(listed, list) else []
    kept.append({"type": DEACTIVATION_TARGET, "status": "True", "reason": reason, "message": message,
                 "lastTransitionTime": rfc3339()})
    status["conditions"] = kept
    return new
