"""The daemon's metrics: what is refreshed after which pass (``actors.daemon``).

The counters (rounds, commits) are brought up after each pass that ran rounds; the queues'
gauges too, but while changes keep arriving at most once a second and no more often than their
own cost allows (:class:`Gauges`: each refresh asks every ClusterQueue actor for a sample, and on
1,000 queues that was an eighth of the daemon's CPU through the API server; paced by
:class:`~kueued.pace.Pace`, a refresh of 1,000 queues, about 41 ms, then runs every 1.6 s or
so); the watches' and the leader's on every pass.  A pass with nothing waiting refreshes at once,
so a quiet daemon's gauges are current: one a busy pass skipped is caught up by the first pass
that finds nothing waiting.  A refresh asks only the queues that handled a message since their last
answer (:meth:`Gauges._samples`): under a trickle of changes (5 Workloads a second on 1,000
ClusterQueues) asking all of them after every quiet pass was most of the daemon's CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.coordinator import Coordinator
from actors.elastic import ElasticCoordinator
from actors.messages import Sample
from kueued.health import Health
from kueued.kube.port import ApiPort
from kueued.metrics import Metrics, QueueSample
from kueued.metrics_local_queue import enabled, gated
from kueued.pace import Pace
from kueued.scheduling.fairsharing.share import Shares
from kueued.sources import Source

__all__ = ["Gauges", "observe_counters", "observe_pass"]


class Gauges:
    """When the queues' gauges are refreshed (module notes): when nothing waits to be applied,
    else at most every ``EVERY`` seconds and no sooner than their pace allows; one a pass skipped
    is caught up by a later pass."""

    EVERY = 1.0

    def __init__(self, metrics: Metrics, coord: Coordinator, elastic: ElasticCoordinator, source: Source,
                 clock: Callable[[], float]) -> None:
        self.metrics = metrics
        self.coord = coord
        self.elastic = elastic
        self.source = source
        self.clock = clock
        self.at = -float("inf")
        self.stale = False
        self.pace = Pace(clock)
        self._last: dict[str, tuple[Any, bool, QueueSample]] = {}  # queue -> (its actor, asked for LocalQueues, answer)

    def due(self) -> bool:
        due = not self.source.queued() or (self.clock() - self.at >= self.EVERY and self.pace.ready())
        self.stale = not due
        if due:
            self.at = self.clock()
        return due

    async def after_rounds(self, port: ApiPort, rounds: int) -> None:
        """After a pass that ran rounds: the counters, and the gauges when due."""
        observe_counters(self.metrics, port, rounds, self.coord)
        if self.due():
            await self._refresh()

    async def catch_up(self) -> None:
        """On a pass without rounds: the refresh a busier pass skipped, once it is due."""
        if self.stale and self.due():
            await self._refresh()

    async def _refresh(self) -> None:
        with self.pace.run():
            await self.observe()

    async def observe(self) -> None:
        """The queues' gauges (the LocalQueues' too while their gate is on) and the actors' mailboxes."""
        metrics, coord, elastic = self.metrics, self.coord, self.elastic
        lq = gated(metrics, enabled(coord.world.settings))
        samples = await self._samples(lq is not None)
        metrics.observe_queues(samples, coord.forest.cluster_queues, terminating=coord.world.terminating)
        metrics.observe_cohorts(coord.forest.cohorts)
        if lq is not None:  # each LocalQueue's holdings come with its queue's sample: no balances read
            lq.observe(coord.world, coord.forest, samples)
            lq.forget(coord.world.local_queues.keys())
        # each queue's admitted workloads: asked only when fair sharing's shares read them
        snapshot = await coord.assemble() if coord.world.settings.fair_sharing else None
        if snapshot is not None:
            shares = Shares(snapshot)
            metrics.observe_shares({n: shares.of(cq.node).rounded() for n, cq in snapshot.cluster_queues.items()},
                                   {n: shares.of(co.node).rounded() for n, co in snapshot.cohorts.items()})
        else:
            metrics.observe_shares({}, {})
        metrics.observe_mailboxes({**{f"ClusterQueue/{s.name}": s.mailbox for s in samples},
                                   **{f"Cohort/{n}": a.stats().mailbox for n, a in coord.cohorts.items()},
                                   **{f"ElasticQuota/{n}": a.stats().mailbox for n, a in elastic.groups.items()}})
        metrics.forget(coord.forest.cluster_queues.keys() | elastic.groups.keys())

    async def _samples(self, local_queues: bool) -> list[QueueSample]:
        """Every ClusterQueue's sample: asked, not read (a queue's deferred requeues are delivered
        before it answers), except where the last answer still holds: the same actor has handled
        nothing since (``Actor.unchanged_since``) and it was asked the same.  A pass under a trickle
        moves a queue or two of a thousand (``bench/gauges_refresh.py``)."""
        last = self._last
        samples: list[QueueSample] = []
        asked = []
        for name, actor in self.coord.cluster_queues.items():
            kept = last.get(name)
            if kept is not None and kept[0] is actor and kept[1] == local_queues and actor.unchanged_since(
                    kept[2].changes):
                samples.append(kept[2])
            else:
                asked.append((name, actor, actor.post(Sample(local_queues=local_queues))))
        for name, actor, reply in asked:
            sample: QueueSample = await reply.result(actor.ask_timeout)
            last[name] = (actor, local_queues, sample)
            samples.append(sample)
        if len(last) > len(samples):  # queues gone
            for name in last.keys() - self.coord.cluster_queues.keys():
                del last[name]
        return samples


def observe_counters(metrics: Metrics, port: ApiPort, rounds: int, coord: Coordinator | None = None) -> None:
    """After a pass that ran rounds: the rounds' and commits' counters, the commits' timings, the
    admission attempts and the cycles' preemption skips."""
    metrics.rounds.inc(rounds)
    if coord is not None:
        attempts, skips = coord.attempts, coord.preemption_skips
        metrics.observe_attempts([attempts.popleft() for _ in range(len(attempts))])
        metrics.observe_preemption_skips([skips.popleft() for _ in range(len(skips))])
    metrics.observe_commits(getattr(port, "counts", {}))
    timings = getattr(port, "timings", None)  # KubePort's; an in-memory commit takes no time worth a metric
    if timings:
        metrics.observe_timings([timings.popleft() for _ in range(len(timings))])


def observe_pass(metrics: Metrics, source: Source, health: Health) -> None:
    """Every pass, idle ones too: the watches' restarts (a cluster) and who commits."""
    metrics.observe_watches(getattr(source, "restarts", {}), getattr(source, "relists", {}))
    metrics.leader.set(1 if health.leader else 0)
