"""Fenced writes: with leader election on, a follower decides everything and writes nothing.

The daemon runs the same way leader or not: it watches, keeps its World and actors warm and
decides every round, so a takeover needs no warm-up.  What differs is the one side-effect edge.
:class:`FencedPort` stands in front of the API port (:class:`~kueued.kube.commits.KubePort`)
and lets a write through only while the elector's fence is open
(:meth:`~kueued.kube.lease.LeaderElector.fence`); otherwise it refuses, as a 409 would, and
counts the refusal.  The coordinator answers a refused admission by giving the reservation
back and deciding again later, which is exactly what a follower should do.

Two details make that cheap and safe:

- **A refusal is held** for up to ``hold`` seconds, or until this process becomes leader.
  Otherwise a follower with an admissible backlog would refuse, revert and decide again as
  fast as the CPU allows (a refused round counts as a change).  Held, it decides about once
  per ``hold``; as leader it answers at once.
- **A decision's write is cut off when the fence closes** (admit and evict run at most
  :meth:`~kueued.kube.lease.LeaderElector.remaining` seconds): no admission sent by a leader
  is still being retried after another process could have taken over.  Status writes
  (pending conditions, the second phase of an eviction, ElasticQuota annotations) are only
  checked when they start: they are idempotent, and cutting a batch short would drop some.

Bookkeeping that writes nothing (``pending``, ``forget``, ``resume_eviction``) always goes
through, so a new leader writes what its predecessor left undone.  :class:`FencedClient`
fences the other writers the same way (the tree's status and Events): their write raises
:class:`NotLeader`, an :class:`~kueued.kube.errors.ApiError` they already treat as a failed
write to retry later; :class:`FencedStatus` keeps a follower's status publisher from even
trying (and logging a refusal per object).  What only a leader should run at all (the Job controller, whose
follower would retry every Job's refused write) runs under :func:`run_while_leading`:
started on each acquisition, cancelled on each loss.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

import anyio
import structlog

from kueued.kube.errors import ApiError
from kueued.kube.port import ApiPort, Condition, Recorder, StatusPublisher

__all__ = ["Fence", "FencedPort", "FencedClient", "FencedStatus", "NotLeader", "run_while_leading"]

log = structlog.get_logger("kueued.kube.fencing")


class Fence(Protocol):
    """What the writers ask of :class:`~kueued.kube.lease.LeaderElector`."""

    def remaining(self) -> float:
        """Seconds the fence stays open from now; 0 when closed."""
        ...

    async def wait_leading(self, leading: bool = True) -> None: ...


class NotLeader(ApiError):
    """A write refused before it was sent: this process does not hold the lease, or its fence is closed."""

    def __init__(self, what: str) -> None:
        super().__init__(None, "NotLeader", f"{what}: this process is not the leader")


class FencedPort:
    """An :class:`~kueued.kube.port.ApiPort` that writes only inside the fence."""

    instant = False  # a held refusal waits: commits must go out concurrently, not one hold after another

    def __init__(self, port: ApiPort, fence: Fence, *, hold: float = 1.0) -> None:
        self.port = port
        self.fence = fence
        self.hold = hold
        self.refusals: Counter[str] = Counter()  # by write: admit, evict, pending, ...; "...:cut" if cut off
        self._open: bool | None = None          # as last logged

    @property
    def pipelined(self) -> bool:
        """Whether the port behind lets rounds run while admissions are written (``actors.pipeline``)."""
        return bool(getattr(self.port, "pipelined", False))

    @property
    def leading(self) -> bool:
        """Is the fence open (this process leads) now?"""
        return self.fence.remaining() > 0

    # --- what the daemon and the metrics read of the port behind -----------------------------------
    @property
    def counts(self) -> Mapping[tuple[str, str, str], int]:
        """The port's commits by (kind, ClusterQueue, reason): what reached the API, for metrics."""
        counts: Mapping[tuple[str, str, str], int] = getattr(self.port, "counts", {})
        return counts

    @property
    def log(self) -> deque:
        kept: deque = getattr(self.port, "log", deque())
        return kept

    @property
    def timings(self) -> Any:
        return getattr(self.port, "timings", None)

    # --- decisions ------------------------------------------------------------------------------------
    async def admit(self, workload: str, *, cluster_queue: str, flavors: dict[str, dict[str, str]],
                    usage: dict[tuple[str, str], int], counts: dict[str, int] | None = None) -> bool:
        remaining = self._gate()
        if remaining <= 0:
            return await self._refuse("admit")
        with anyio.move_on_after(remaining) as scope:
            return await self.port.admit(workload, cluster_queue=cluster_queue, flavors=flavors, usage=usage,
                                         **({"counts": counts} if counts is not None else {}))
        return self._cut("admit", scope)

    async def evict(self, workload: str, *, cluster_queue: str, reason: str, message: str,
                    preempted: bool = True) -> bool:
        remaining = self._gate()
        if remaining <= 0:
            return await self._refuse("evict")
        with anyio.move_on_after(remaining) as scope:
            return await self.port.evict(workload, cluster_queue=cluster_queue, reason=reason, message=message,
                                         **({} if preempted else {"preempted": False}))
        return self._cut("evict", scope)

    async def deactivate(self, workload: str, *, reason: str, message: str) -> bool:
        if self._gate() <= 0:
            return await self._refuse("deactivate")
        return await self.port.deactivate(workload, reason=reason, message=message)

    @property
    def echoes(self) -> bool:
        return self.port.echoes

    # --- status: checked when it starts -------------------------------------------------------------
    async def annotate_quota(self, quota: str, *, namespace: str, annotations: dict[str, str]) -> bool:
        if self._gate() <= 0:
            self.refusals["annotate_quota"] += 1
            return False
        return await self.port.annotate_quota(quota, namespace=namespace, annotations=annotations)

    async def quota_used(self, quota: str, *, namespace: str, used: dict[str, str | None]) -> bool:
        if self._gate() <= 0:
            self.refusals["quota_used"] += 1
            return False
        return await self.port.quota_used(quota, namespace=namespace, used=used)

    async def set_quota_condition(self, quota: str, *, namespace: str, condition: Condition) -> bool:
        if self._gate() <= 0:
            self.refusals["set_quota_condition"] += 1
            return False
        return await self.port.set_quota_condition(quota, namespace=namespace, condition=condition)

    async def flush_pending(self, *, busy: Callable[[], bool] | None = None) -> int:
        if self._gate() <= 0:
            self.refusals["flush_pending"] += 1
            return 0  # kept due in the port behind: a new leader writes them
        return await self.port.flush_pending(busy=busy)

    async def finish_evictions(self) -> list[str]:
        if self._gate() <= 0:
            self.refusals["finish_evictions"] += 1
            return []
        return await self.port.finish_evictions()

    # --- bookkeeping, never a write ------------------------------------------------------------------
    def pending(self, workload: str, message: str) -> None:
        self.port.pending(workload, message)

    def forget(self, workload: str) -> None:
        self.port.forget(workload)

    def resume_eviction(self, workload: str, message: str) -> None:
        self.port.resume_eviction(workload, message)

    def released(self, workload: str) -> bool:
        return self.port.released(workload)

    # --- the gate -----------------------------------------------------------------------------------
    def _gate(self) -> float:
        remaining = self.fence.remaining()
        is_open = remaining > 0
        if is_open != self._open:
            log.info("commits_allowed" if is_open else "commits_fenced", refused=sum(self.refusals.values()))
            self._open = is_open
        return remaining

    async def _refuse(self, what: str) -> bool:
        self.refusals[what] += 1
        with anyio.move_on_after(self.hold):
            await self.fence.wait_leading()
        return False

    def _cut(self, what: str, scope: anyio.CancelScope) -> bool:
        assert scope.cancelled_caught
        self.refusals[f"{what}:cut"] += 1
        log.warning("commit_cut_off", commit=what, why="the fence closed while the write was in flight")
        return False


class FencedClient:
    """A :class:`~kueued.kube.client.KubeClient` whose writes go out only inside the fence; reads pass.

    For the writers beside the port: :class:`~kueued.kube.status_publisher.TreeStatusPublisher`
    and :class:`~kueued.kube.events.EventRecorder` (outside the fence a write raises
    :class:`NotLeader`, which they count, log once and retry or drop), and the Job controller
    between the fence closing and :func:`run_while_leading` stopping it.
    """

    def __init__(self, client: Any, fence: Fence) -> None:
        self.client = client
        self.fence = fence
        self.refusals: Counter[str] = Counter()

    def _check(self, what: str) -> None:
        if self.fence.remaining() <= 0:
            self.refusals[what] += 1
            raise NotLeader(what)

    # --- reads --------------------------------------------------------------------------------------
    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self.client.get(*args, **kwargs)

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        return await self.client.list(*args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        return self.client.watch(*args, **kwargs)

    # --- writes -------------------------------------------------------------------------------------
    async def create(self, *args: Any, **kwargs: Any) -> Any:
        self._check("create")
        return await self.client.create(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        self._check("delete")
        return await self.client.delete(*args, **kwargs)

    async def patch(self, *args: Any, **kwargs: Any) -> Any:
        self._check("patch")
        return await self.client.patch(*args, **kwargs)

    async def patch_json(self, *args: Any, **kwargs: Any) -> Any:
        self._check("patch_json")
        return await self.client.patch_json(*args, **kwargs)

    async def patch_status(self, *args: Any, **kwargs: Any) -> Any:
        self._check("patch_status")
        return await self.client.patch_status(*args, **kwargs)

    async def replace_status(self, *args: Any, **kwargs: Any) -> Any:
        self._check("replace_status")
        return await self.client.replace_status(*args, **kwargs)

    async def create_event(self, *args: Any, **kwargs: Any) -> Any:
        self._check("create_event")
        return await self.client.create_event(*args, **kwargs)


class FencedStatus:
    """A :class:`~kueued.kube.port.StatusPublisher` that publishes only inside the fence.

    Outside it :meth:`publish` does nothing at all (no status computed, no write tried, nothing
    logged per object); the first publish of a new leader computes every status afresh and writes
    what differs from what the cluster shows.  Give the publisher a :class:`FencedClient` as well:
    it covers a fence that closes in the middle of a publish.
    """

    def __init__(self, publisher: StatusPublisher, fence: Fence) -> None:
        self.publisher = publisher
        self.fence = fence
        self.skipped = 0

    @property
    def recorder(self) -> Recorder | None:
        return self.publisher.recorder

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        await self.publisher.run(task_status=task_status)

    async def publish(self, coord: Any) -> int:
        if self.fence.remaining() <= 0:
            self.skipped += 1
            return 0
        return await self.publisher.publish(coord)

    def put_off(self) -> float:
        return self.publisher.put_off() if self.fence.remaining() > 0 else math.inf

    def validated(self, manifest: Mapping[str, Any], reason: str | None) -> bool:
        return self.publisher.validated(manifest, reason)

    def in_force(self, manifest: Mapping[str, Any], held: Mapping[str, Any] | None, *, refused: bool) -> None:
        self.publisher.in_force(manifest, held, refused=refused)

    def forget(self, key: str) -> None:
        self.publisher.forget(key)


async def run_while_leading(fence: Fence, task: Callable[[], Coroutine[Any, Any, Any]], *,
                            name: str = "") -> None:
    """Run ``task()`` each time this process becomes leader; cancel it as soon as it stops leading.

    For what only the leader runs at all (Kueue runs its controllers on the leader only): a fresh
    one per term (``lambda: JobController(...).run()``), so a term starts from a new list, not from
    a cache that stopped following the cluster when the last term ended.
    """
    while True:
        await fence.wait_leading()
        log.info("leader_task_started", task=name)
        async with anyio.create_task_group() as tg:
            tg.start_soon(task, name=name or None)
            await fence.wait_leading(False)
            tg.cancel_scope.cancel()
        log.info("leader_task_stopped", task=name)
