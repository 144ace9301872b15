"""Messages between the coordinator, ClusterQueue actors and Cohort actors.

Frozen, tagged msgspec Structs, dispatched with ``match``.  Amounts are per
(flavor, resource) in exact milli-units.  A workload reaches its queue as its immutable
spec (``WorkloadSpec``, with the history a new version carries over); the queue builds and
owns its scheduling state (``WorkloadInfo``), which travels by reference only where the
queue lends it to a round (a nominated head, an admission, a requeue) or shows it to a
reclaim query, never copied.

Up the tree:   Reserve (a borrow request: reserve these amounts or deny), Release; each
               names the child it comes from, so a Cohort knows what each child holds of it.
Up and down:   Reclaim (a preemptor's candidate query: up from its ClusterQueue, and down
               into every subtree that can hold candidates), answered by Reached.
Down the tree: Evict, then Released (a reclaim in Kueue's two phases: the victim keeps its quota
               until its reservation is cleared, then it is released and requeued).
Coordinator -> ClusterQueue: Nominate (a round's head and balance), LookFurther, Unpark, Enqueue, Forget,
Requeue, RequeueParked, Admit, Revert, Evict, Finish, Adopt, Replace, Queued, Sample, Report,
Reclaim; a workload that leaves its queue (Finish, Forget) is answered with Left, its history.
Coordinator -> any node: Report, Configure, Recharge.
"""

from __future__ import annotations

from typing import Any

import msgspec

FRAmounts = dict[tuple[str, str], int]


class Msg(msgspec.Struct, frozen=True, tag=True):
    pass


class Reserve(Msg, frozen=True):
    """Reserve ``amounts`` at this node and, for what exceeds its free local quota, above;
    ``child`` is the node it comes from ("" from the coordinator)."""

    workload: str
    amounts: FRAmounts
    child: str = ""


class Release(Msg, frozen=True):
    workload: str
    amounts: FRAmounts
    child: str = ""


class Reclaim(Msg, frozen=True):
    """A preemptor's query for the admitted workloads it could take quota back from.

    Sent by the coordinator to the preemptor's ClusterQueue, which answers with its own
    workloads on ``frs`` and sends the query ``up``; a Cohort sends it down into each other
    child subtree that can hold candidates and on up; ``came_from`` is the child already
    searched (its node key).  Classical preemption (``fair`` False) prunes a subtree whose usage is within
    its quota on every FR of ``frs`` (Kueue's hierarchical candidate walk: nothing there can
    be reclaimed); under fair sharing a ClusterQueue answers only when it borrows on one of
    ``frs`` (Kueue's fair-sharing candidates), and no Cohort prunes.
    """

    preemptor: str
    frs: frozenset[tuple[str, str]]
    fair: bool = False
    cohort: bool = True   # may take quota back in the Cohort (else only in its own queue)
    up: bool = True
    # nodes an earlier classical query of the round on the same FRs searched: not entered again
    # (everything a walk would find in or above one was found then: actors.reclaim.ask_all)
    skip: frozenset[str] = frozenset()
    came_from: str = ""


class Reached(Msg, frozen=True):
    """A node's part of a Reclaim answer: the admitted workloads it holds on the FRs
    (ClusterQueues only; ``found`` is (ClusterQueue, workloads) pairs), the nodes it searched
    (by node key, ``actors.node.node_key``: a Cohort and a ClusterQueue may share a name),
    and the answers still to come from the nodes it sent the query on to (``more``: reply
    slots the asker awaits, so no node ever waits on another and no query can deadlock)."""

    found: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    searched: tuple[str, ...] = ()
    more: tuple[Any, ...] = ()


class Granted(Msg, frozen=True):
    pass


class Denied(Msg, frozen=True):
    node: str  # the node that refused, by kind ("cohort NAME", "ClusterQueue NAME": the two may share a name)
    fr: tuple[str, str]
    used: int
    allowed: int


class Report(Msg, frozen=True):
    pass


class NodeReport(Msg, frozen=True):
    """A node's balance; a ClusterQueue's answer to ``Report`` also lists what it holds
    admitted (a round's ``Nominate`` does not: candidates are asked for with ``Reclaim``)."""

    name: str
    usage: FRAmounts
    admitted: tuple[Any, ...] = ()


class Configure(Msg, frozen=True):
    """New limits, subtree quota and parent (an actor or None) after a topology change; a
    Cohort is also given its children: (name, actor, the most each may hold of it per FR
    while still within its own quota), for routing Reclaim queries; a ClusterQueue whether
    it is active and whether its queueing strategy is StrictFIFO."""

    limits: Any
    subtree: FRAmounts
    parent: Any
    children: tuple[tuple[str, Any, FRAmounts], ...] = ()
    active: bool = True
    strict: bool = False


class Recharge(Msg, frozen=True):
    """Reset usage to what the admitted workloads below hold (after Configure)."""


class Nominate(Msg, frozen=True):
    """Pop this round's head and report the balance and admissions in the same reply.

    With ``known`` (the coordinator's remembered verdicts for this queue, as data: a read-only
    view by shape and the generation that makes one hold, ``kueued.scheduling.verdicts.Known``) the
    queue folds ahead: it parks the heads ``known`` answers, up to ``limit``, and the
    coordinator later keeps as many of those parks as the whole tree's rounds were dead
    (``Unpark``)."""

    known: Any = None
    limit: int = 0
    requeue_parked: bool = False  # first move every parked workload back (RequeueParked, folded in)


class Nomination(Msg, frozen=True):
    head: Any
    report: NodeReport
    parked: tuple[Any, ...] = ()    # (head, verdict) parked ahead, in pop order (with ``known``)
    looked_ahead: bool = False       # whether the queue could fold at all


class LookFurther(Msg, frozen=True):
    """Go on folding from the last ``Nominate`` (or ``LookFurther``): the head it left in flight
    has a verdict in ``known`` now (the coordinator judged it), so park it and the heads after
    it that ``known`` answers, up to ``limit`` parks in all; answered with a :class:`Nomination`."""

    known: Any
    limit: int


class Unpark(Msg, frozen=True):
    """Keep only the first ``keep`` parks of the last ``Nominate``; ``parked[keep]`` is the head."""

    keep: int


class Enqueue(Msg, frozen=True):
    """Queue a workload (its spec); ``history``: what it carries from the queue it left (:class:`Left`)."""

    spec: Any
    history: Left | None = None


class Replace(Msg, frozen=True):
    """An admitted workload's new version (its spec), which keeps the admission: the queue holds
    it in the old one's place, with the old one's placement and history."""

    spec: Any


class Forget(Msg, frozen=True):
    """Take these workloads out of the queue, wherever they wait (a routing change sends
    every queue the whole pending set at once; each drops only what it holds).  Answered
    with (key, :class:`Left`) for each it held: their history goes with them.  ``keys`` None:
    every workload it holds pending (its ClusterQueue is deleted)."""

    keys: frozenset[str] | None


class Queued(Msg, frozen=True):
    """Which workloads the queue holds pending (their keys)."""


class Requeue(Msg, frozen=True):
    """A head the round did not admit, back to its queue by the queue's rules.  The queue, which
    owns the workload's scheduling state, records what the round settled for it: whether it
    issued evictions and waits for them (``preempting``), and the victims whose eviction it
    committed (``evicted``: never evicted by it again)."""

    workload: Any
    reason: str
    preempting: bool = False
    evicted: frozenset[str] = frozenset()


class RequeueParked(Msg, frozen=True):
    pass


class Sample(Msg, frozen=True):
    """Ask a queue for its statistics record; as a message it sees every deferred arrival and
    requeue delivered first (reading the actor directly would miss them).  ``local_queues``:
    also its pending workloads per LocalQueue (the LocalQueueMetrics gate; a pass over them all)."""

    local_queues: bool = False


class Admit(Msg, frozen=True):
    """Reserve up the tree for this workload (lent by its queue for the round); on a grant, hold
    it as admitted with this ``placement`` (a ``Placement``: the coordinator indexes the same one
    once the admission is committed)."""

    workload: Any
    placement: Any


class Revert(Msg, frozen=True):
    """The commit failed: release an admission's reservation and requeue it."""

    key: str


class Evict(Msg, frozen=True):
    """The eviction is committed (its first phase): the victim keeps its quota until ``Released``.
    ``requeue_at``: the victim's queue order time once it is back in the heap, when the eviction
    moves it (:func:`kueued.scheduling.workload.queue_order_time`); None keeps the one it has."""

    key: str
    requeue_at: float | None = None


class Released(Msg, frozen=True):
    """The eviction has cleared the victim's reservation (its second phase): release its quota
    up the tree and return it to the heap."""

    key: str


class Finish(Msg, frozen=True):
    """The workload finished or was deleted (or a new version replaces it): release its quota, do
    not requeue it.  Answered with :class:`Left`, or None when the queue does not hold it."""

    key: str


class Left(Msg, frozen=True):
    """A workload has left its queue: whether it held quota there, and the state it carries on
    to the next queue entry (a new version, a queue it is routed to again): how often it was
    evicted, whom it evicted, whether it waits for those evictions."""

    admitted: bool
    evictions: int = 0
    victims: frozenset[str] = frozenset()
    preempting: bool = False


class Adopt(Msg, frozen=True):
    """Hold a workload that is already admitted (a restart, an update): charge its usage as is."""

    spec: Any
    placement: Any
    history: Left | None = None

