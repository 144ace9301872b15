"""The Events the coordinator records about its decisions, with Kueue's reasons (a cluster's
``kueued.kube.events.EventRecorder``, or metrics in front of it; offline there is none).

Each is recorded once the decision is committed, on the Workload as the World last saw it
(fire and forget: an Event that cannot be written in time is dropped by the recorder)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kueued.kube.pending_reasons import preemption_message, priorities
from kueued.kube.workload_state import transitioned_at

if TYPE_CHECKING:
    from kueued.kube.port import Recorder
    from kueued.scheduling.snapshot import Snapshot
    from kueued.scheduling.workload import WorkloadInfo
    from kueued.world import World

__all__ = ["Recording", "queued_since"]


def queued_since(manifest: dict[str, Any], wl: WorkloadInfo) -> float:
    """When the workload was last queued (Kueue's ``QueuedWaitTime``): its ``Requeued`` condition's
    last transition, if it has one (an eviction, a reactivation), else its creation."""
    requeued = transitioned_at(manifest, "Requeued", status=None)
    return wl.created if requeued is None else requeued


class Recording:
    """The Event half of the Coordinator (a mixin: every attribute is the Coordinator's)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        world: World
        recorder: Recorder | None
        forest: Snapshot

    def _manifest(self, key: str) -> dict[str, Any] | None:
        return self.world.raw.get(f"Workload/{key}") if self.recorder is not None else None

    def _record_admission(self, wl: WorkloadInfo, cluster_queue: str, now: float) -> None:
        """Kueue's QuotaReserved and Admitted Events."""
        manifest = self._manifest(wl.key)
        if self.recorder is not None and manifest is not None:
            self.recorder.quota_reserved(manifest, cluster_queue=cluster_queue, waited=now - queued_since(manifest, wl))
            self.recorder.admitted(manifest, cluster_queue=cluster_queue)

    def _preemption_message(self, preemptor: str, preemptor_cq: str, victim_cq: str, reason: str) -> str:
        """Kueue's message for a victim's Evicted and Preempted conditions: who it made room for (UID,
        JobUID), why, and both ClusterQueues' paths from their root (``/root/.../cq``)."""
        return preemption_message(self.world.raw.get(f"Workload/{preemptor}") or {}, reason,
                                  self._path(preemptor_cq), self._path(victim_cq))

    def _path(self, cluster_queue: str) -> str:
        cq = self.forest.cluster_queues.get(cluster_queue)
        if cq is None:
            return ""
        return "/" + "/".join(reversed([cluster_queue, *(node.name for node in cq.node.ancestors())]))

    def _record_eviction(self, victim: WorkloadInfo, preemptor: WorkloadInfo, reason: str, message: str,
                         cluster_queue: str) -> None:
        """Kueue's Preempted (on the victim), PreemptedWorkload (on the preemptor) and EvictedDueToPreempted
        Events; ``cluster_queue`` is the victim's."""
        manifest = self._manifest(victim.key)
        if self.recorder is None or manifest is None:
            return
        by = self.world.raw.get(f"Workload/{preemptor.key}")
        if by is not None:
            self.recorder.preempted(manifest, preemptor=by, reason=reason, message=message,
                                    cluster_queue=cluster_queue,
                                    priorities=priorities(self._priority(preemptor.key), self._priority(victim.key)))
        self.recorder.evicted(manifest, reason="Preempted", message=message)

    def _priority(self, key: str) -> tuple[int, int]:
        spec = self.world.workloads.get(key)
        return self.world.priority_parts(spec.obj) if spec is not None else (0, 0)

    def _record_drain(self, key: str, reason: str, message: str) -> None:
        """``EvictedDueTo<reason>`` for an eviction that is no preemption (actors.drains)."""
        manifest = self._manifest(key)
        if self.recorder is not None and manifest is not None:
            self.recorder.evicted(manifest, reason=reason, message=message)

    def _record_deactivation(self, key: str, reason: str, message: str) -> None:
        """The workload controller's warning as it deactivates a workload (actors.deadlines)."""
        manifest = self._manifest(key)
        if self.recorder is not None and manifest is not None:
            self.recorder.deactivating(manifest, reason=reason, message=message)
