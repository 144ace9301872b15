"""Why workloads wait and why queues are inactive, logged once per change by the daemon.

A daemon that only logs decisions leaves an operator guessing at what it did *not* do.
After each batch of rounds :class:`ReasonLog` compares every pending workload's reason and
every ClusterQueue's inactive reason with what it logged last, and logs at INFO only what
appeared or changed:

- ``workload_pending`` (workload, cluster_queue, reason): the sentence ``simulate`` prints,
  quota reasons with the blocking node of the tree and its numbers
  (``cohort acme: cpu 18 used + 6 requested > 18 quota``);
- ``cluster_queue_inactive`` (cluster_queue, reason) and ``cluster_queue_active`` when it
  clears.

A reason is compared by its sentence before the numbers are worked out, so a backlog whose
verdicts do not move costs one dictionary comparison per workload per batch, and no log
line.  What was logged for a workload that is admitted or deleted is forgotten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import structlog

from kueued.kube.pending_reasons import PENDING, kueue_condition
from kueued.scheduling.explain import STRICT_FIFO_WAIT, explain

if TYPE_CHECKING:
    from actors.coordinator import Coordinator
    from kueued.kube.port import ApiPort
    from kueued.scheduling.elastic import ElasticOutcome
    from kueued.scheduling.snapshot import Snapshot
    from kueued.scheduling.workload import WorkloadSpec
    from kueued.world import World

__all__ = ["ReasonLog", "Elastic"]

ELASTIC = "elastic"  # World.route's word for a workload an ElasticQuota group holds
ELASTIC_WAIT = "waiting in its ElasticQuota group"


class Elastic(Protocol):
    """What the log asks of the ElasticQuota coordinator (``actors.elastic.ElasticCoordinator``)."""

    async def outcome(self) -> ElasticOutcome: ...

log = structlog.get_logger("kueued.daemon")


class ReasonLog:
    def __init__(self) -> None:
        self._pending: dict[str, str] = {}
        self._inactive: dict[str, str] = {}

    async def update(self, coord: Coordinator, port: ApiPort | None = None, elastic: Elastic | None = None) -> None:
        """Log what changed; tell ``port`` each changed pending reason (it keeps them in status).
        ``elastic`` says why a workload of an ElasticQuota waits (else it would read "elastic")."""
        world = coord.world
        changed: list[tuple[str, str]] = []
        pending: dict[str, str] = {}
        inactive = self._inactive_now(coord)
        quota_side = await self._elastic_reasons(coord, elastic)
        for key, wl in world.workloads.items():
            if key in world.placed or quota_side.get(key) == "":
                continue  # admitted, by the Kueue side or an ElasticQuota group
            if inactive and key not in coord.unrouted:  # its queue stopped or went: no round judges it,
                cq_name = world.route(wl)[0]            # and what one said before no longer holds (Kueue's
                if cq_name in inactive:                 # workload controller rewrites it on the queue's change)
                    coord.reasons[key] = inactive[cq_name]
            why = quota_side.get(key) or coord.unrouted.get(key) or coord.reasons.get(key) or _unjudged(world, wl)
            pending[key] = why
            if self._pending.get(key) != why:
                changed.append((key, why))
        self._pending = pending
        snapshot = await coord.assemble() if any("quota" in why for _, why in changed) else None
        for key, why in changed:
            sentence = self._log_pending(coord, key, why, snapshot)
            if port is not None and (key in coord.reasons or key in coord.unrouted):
                port.pending(key, sentence)  # a verdict, not a workload no round has judged yet
                self._warn(coord, key, sentence)
        self._log_queues(coord)

    def _log_pending(self, coord: Coordinator, key: str, why: str, snapshot: Snapshot | None) -> str:
        wl = coord.world.workloads[key]
        cq_name = coord.world.route(wl)[0]
        if snapshot is not None and key not in coord.unrouted and "quota" in why:
            cq = snapshot.cluster_queues.get(cq_name or "")
            detail = explain(cq, wl) if cq is not None else ""
            if detail:
                why = f"{why} ({detail})"
        log.info("workload_pending", workload=key, cluster_queue=cq_name, reason=why)
        return why

    @staticmethod
    def _warn(coord: Coordinator, key: str, sentence: str) -> None:
        """Kueue's scheduler warns ``Pending`` with its message on a workload it judged and could not
        admit (a queue problem is the workload controller's condition alone, no Event)."""
        reason, message = kueue_condition(sentence)
        manifest = coord.world.raw.get(f"Workload/{key}")
        if coord.recorder is not None and manifest is not None and reason == PENDING:
            coord.recorder.pending(manifest, message)

    @staticmethod
    async def _elastic_reasons(coord: Coordinator, elastic: Elastic | None) -> dict[str, str]:
        """Why each workload an ElasticQuota group holds waits ("" once admitted), when any does."""
        if elastic is None or ELASTIC not in coord.unrouted.values():
            return {}
        results = (await elastic.outcome()).workloads
        return {key: ("" if r.state == "admitted" else r.reason or ELASTIC_WAIT) for key, r in results.items()
                if coord.unrouted.get(key) == ELASTIC}

    @staticmethod
    def _inactive_now(coord: Coordinator) -> dict[str, str]:
        return {name: cq.inactive_reason for name, cq in coord.forest.cluster_queues.items() if not cq.active}

    def _log_queues(self, coord: Coordinator) -> None:
        inactive = self._inactive_now(coord)
        for name, why in inactive.items():
            if self._inactive.get(name) != why:
                log.info("cluster_queue_inactive", cluster_queue=name, reason=why)
        for name in self._inactive.keys() - inactive.keys():
            if name in coord.forest.cluster_queues:
                log.info("cluster_queue_active", cluster_queue=name)
        self._inactive = inactive


NOT_JUDGED = "queued: no scheduling round has judged it yet"


def _unjudged(world: World, wl: WorkloadSpec) -> str:
    """Why a routed workload no round gave a reason for waits: behind the head of a StrictFIFO queue
    (only its head is judged), else it has not been judged yet (it arrived, or was requeued, after the
    rounds that ran; a BestEffortFIFO queue judges each in turn)."""
    cq = world.cluster_queues.get(world.route(wl)[0] or "")
    return STRICT_FIFO_WAIT if cq is not None and cq.spec.queueing_strategy == "StrictFIFO" else NOT_JUDGED
