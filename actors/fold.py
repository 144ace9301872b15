"""Folding a tree's dead rounds: the rounds in which every head fails and nothing else happens.

In a backlog, Kueue's BestEffortFIFO queues walk their heaps a head per round: a head that
does not fit is parked and the next one comes up.  While no head of a tree fits (or finds
victims), such a round admits, evicts and reserves nothing that outlives it, so the next
round starts from the same state, and so on: the tree's rounds are *dead* up to the first
round in which one of its queues has a live head.  Measured on ``bench/throughput.py``'s
contended shape (1,000 ClusterQueues in one tree, 50,000 workloads), 650 of 1,053 rounds were
dead but had some head no verdict answered yet, and they took 55 % of the rounds' time
(1,000 nominations and 1,000 cycle entries each).

A round folds them (:meth:`Fold._fold`), under a clock and while verdicts are on
(:mod:`kueued.scheduling.verdicts`):

1. ``Nominate`` carries each queue's remembered verdicts (``Known``); the queue parks the
   heads they answer, up to its tree's look-ahead limit, and pops the first they do not;
2. the coordinator judges each such head on the round's snapshot
   (:func:`~kueued.scheduling.cycle.judge_alone`): one whose queue never looks for victims
   (or needs none: everything it asks fits or can never fit) and that fails is a new verdict,
   kept, and its queue is asked to go on (``LookFurther``: park it and the known ones after
   it).  Only the queues short of the tree's dead rounds so far go on;
3. a tree's dead rounds are the fewest parks before a live head among its queues (a queue
   that ran dry does not count; a queue that cannot look ahead has a live head at once);
   every queue keeps that many parks and ``Unpark`` undoes the rest.

Why this decides as round after round does: a head's verdict is a function of the tree's
state (its generation), and every dead round starts from the same state; a dead head's
processing only completes its message.  A verdict judged ahead for a head past the tree's
first live round is still a true verdict for the state it was judged on, kept until the
generation moves.  The agreement tests (``tests/scheduling/test_verdicts.py``) run both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.messages import LookFurther, Nomination, Reclaim, Unpark
from actors.reclaim import query_for
from kueued.scheduling.cycle import judge_alone
from kueued.scheduling.snapshot import Snapshot
from kueued.scheduling.workload import WorkloadInfo

if TYPE_CHECKING:
    from actors.cluster_queue import ClusterQueueActor
    from kueued.engine.wiring import PreemptorFactory
    from kueued.scheduling.fairsharing.admission import AdmissionFairSharing
    from kueued.scheduling.verdicts import Verdicts
    from kueued.world import World

__all__ = ["Fold", "FOLD_LIMIT", "LIVE_LOOK_AHEAD"]

FOLD_LIMIT = 256
"""Heads a ClusterQueue may park ahead in one round when folding dead rounds."""

LIVE_LOOK_AHEAD = 8
"""How far a tree's queues look ahead in the round after one that was live."""

Heads = list[tuple[WorkloadInfo, str]]
Judge = Callable[[WorkloadInfo, str], bool]


class Fold:
    """The fold half of the Coordinator's rounds (a mixin: every attribute is the Coordinator's)."""

    if TYPE_CHECKING:  # what the Coordinator provides
        world: World
        make_preemptor: PreemptorFactory
        cluster_queues: dict[str, ClusterQueueActor]
        reasons: dict[str, str]
        verdicts: Verdicts
        afs: AdmissionFairSharing
        _fold_limit: dict[str, int]

    def _limit_of(self, root: str) -> int:
        """How far the queues of the tree rooted at ``root`` look ahead this round."""
        return self._fold_limit.get(root, FOLD_LIMIT)

    async def _fold(self, nominations: list[tuple[str, Nomination]], snap: Snapshot) -> tuple[Heads, bool]:
        """Fold each tree's dead rounds; the heads of the first round that is not dead, and
        whether any queue parked a head."""
        noms = dict(nominations)
        judge = self._judge(snap)
        while True:
            dead, further = self._dead_rounds(noms, judge)
            if not further:
                break
            asked = [(name, self.cluster_queues[name].post(LookFurther(
                self.verdicts.known(name, snap.cluster_queues[name]),
                self._limit_of(self.verdicts.root_of(name) or name))))
                for name in further]
            for name, reply in asked:
                noms[name] = await reply.result(self.cluster_queues[name].ask_timeout)
        heads_of: dict[str, Heads] = {}
        for name, n in noms.items():
            if n.head is not None:
                heads_of.setdefault(self.verdicts.root_of(name) or name, []).append((n.head, name))
        self._next_look_ahead(dead, heads_of, snap)
        heads: list[tuple[Any, str]] = []
        parked_any = False
        unparking = []
        for name, _ in nominations:
            n = noms[name]
            root = self.verdicts.root_of(name) or name
            keep = dead.get(root)
            if keep is None:
                self._fold_limit.pop(root, None)  # every queue of the tree ran dry: look far again
            if keep is not None and keep < len(n.parked):
                unparking.append((len(heads), name, self.cluster_queues[name].post(Unpark(keep))))
            kept = n.parked if keep is None else n.parked[:keep]
            for wl, verdict in kept:  # (its queue settled it as no preemptor: ClusterQueueActor)
                self.reasons[wl.key] = verdict.message
            parked_any = parked_any or bool(kept)
            heads.append((n.head, name))
        for i, name, reply in unparking:
            heads[i] = (await reply.result(self.cluster_queues[name].ask_timeout), name)
        return [(wl, name) for wl, name in heads if wl is not None], parked_any

    def _dead_rounds(self, noms: dict[str, Nomination], judge: Judge) -> tuple[dict[str, int], list[str]]:
        """Each tree's dead rounds as far as known (absent: every queue ran dry or may go on),
        and the queues to ask further: their head fails alone, short of their tree's dead rounds.
        Heads are judged shallowest first, and none at or past its tree's first live round."""
        dead: dict[str, int] = {}
        ahead: list[tuple[int, str, str, WorkloadInfo]] = []
        for name, n in noms.items():
            root = self.verdicts.root_of(name) or name
            if not n.looked_ahead:
                dead[root] = 0  # a live head at once
            elif n.head is not None:  # (a queue that ran dry bounds nothing)
                ahead.append((len(n.parked), root, name, n.head))
        ahead.sort(key=lambda a: a[0])
        going_on: list[tuple[int, str, str]] = []
        for depth, root, name, head in ahead:
            if depth >= dead.get(root, depth + 1):
                continue
            if depth < self._limit_of(root) and judge(head, name):
                going_on.append((depth, root, name))
            else:
                dead[root] = depth
        return dead, [name for depth, root, name in going_on if depth < dead.get(root, depth + 1)]

    def _judge(self, snap: Snapshot) -> Judge:
        """Whether a queue's head fails alone on the round's snapshot (its verdict kept then);
        a head whose nomination needs candidates from the tree is left to the cycle."""
        preemptor = self.make_preemptor(snap, self.world, afs=self.afs)
        judged: dict[str, bool] = {}

        def judge(wl: WorkloadInfo, name: str) -> bool:
            cq = snap.cluster_queues[name]
            v = self.verdicts.recall(cq, wl)
            if v is not None:
                return bool(v.reason)
            if wl.key not in judged:
                query = query_for(snap, cq, wl, fair=False)
                judged[wl.key] = not isinstance(query, Reclaim) and judge_alone(
                    snap, wl, name, preemptor=preemptor, namespaces=self.world.namespaces,
                    verdicts=self.verdicts, fitting=query) is not None
            return judged[wl.key]
        return judge

    def _next_look_ahead(self, dead: dict[str, int], heads_of: dict[str, Heads], snap: Snapshot) -> None:
        """A tree looks ahead next round about as far as its rounds were dead this one: a queue
        that parks far past its tree's dead rounds only has to unpark again.  After a live
        round a tree looks ahead only a little (``LIVE_LOOK_AHEAD``): its next heads are judged
        ahead all the same, and the verdicts the last state allowed are gone with it."""
        cqs = snap.cluster_queues  # (a verdict may be recalled by what it read: the round's state)
        for root, rounds in dead.items():
            if rounds == 0 and not self.verdicts.dead(heads_of.get(root, ()), cqs):
                self._fold_limit[root] = LIVE_LOOK_AHEAD
                continue
            self._fold_limit[root] = min(FOLD_LIMIT, 4 * rounds + 8)
