"""Messages between the coordinator, ClusterQueue actors and Cohort actors.

Frozen, tagged msgspec Structs, dispatched with ``match``.  Amounts are per
(flavor, resource) in exact milli-units.  Workloads travel by reference (the
scheduler's ``WorkloadInfo``), never copied.

Up the tree:   Reserve (a borrow request: reserve these amounts or deny), Release.
Down the tree: Evict (a reclaim: release a victim and requeue it).
Coordinator -> ClusterQueue: Nominate (a round's head and balance), PopHead, Enqueue, Forget,
Requeue, RequeueParked, Admit, Revert, Evict, Finish, Adopt, Replace, Report.
Coordinator -> any node: Report, Configure, Recharge.
"""

from __future__ import annotations

from typing import Any

import msgspec

FRAmounts = dict[tuple[str, str], int]


class Msg(msgspec.Struct, frozen=True, tag=True):
    pass


class Reserve(Msg, frozen=True):
    """Reserve ``amounts`` at this node and, for what exceeds its free local quota, above."""

    workload: str
    amounts: FRAmounts


class Release(Msg, frozen=True):
    workload: str
    amounts: FRAmounts


class Granted(Msg, frozen=True):
    pass


class Denied(Msg, frozen=True):
    node: str
    fr: tuple[str, str]
    used: int
    allowed: int


class Report(Msg, frozen=True):
    pass


class NodeReport(Msg, frozen=True):
    """A node's balance; a ClusterQueue's also says what it holds admitted: the whole set, or
    (``admitted`` None) nothing new since the version the asker holds, or with ``delta`` the
    changes since then: drop ``removed``, then add ``added`` in order."""

    name: str
    usage: FRAmounts
    admitted: tuple[Any, ...] | None = ()
    version: int = -1
    delta: bool = False
    added: tuple[Any, ...] = ()
    removed: tuple[str, ...] = ()


class Configure(Msg, frozen=True):
    """New limits, subtree quota and parent (an actor or None) after a topology change."""

    limits: Any
    subtree: FRAmounts
    parent: Any
    spec: Any = None


class Recharge(Msg, frozen=True):
    """Reset usage to what the admitted workloads below hold (after Configure)."""


class PopHead(Msg, frozen=True):
    pass


class Nominate(Msg, frozen=True):
    """Pop this round's head and report the balance and admissions in the same reply.

    With ``known`` (the coordinator's remembered verdicts for this queue, a callable) the
    queue folds ahead: it parks the heads ``known`` answers, up to ``limit``, and the
    coordinator later keeps as many of those parks as the whole tree's rounds were dead
    (``Unpark``)."""

    known: Any = None
    limit: int = 0
    requeue_parked: bool = False  # first move every parked workload back (RequeueParked, folded in)
    seen: int = -1                # the version of the admitted set the coordinator holds


class Nomination(Msg, frozen=True):
    head: Any
    report: NodeReport
    parked: tuple[Any, ...] = ()    # (head, verdict) parked ahead, in pop order (with ``known``)
    looked_ahead: bool = False       # whether the queue could fold at all


class Unpark(Msg, frozen=True):
    """Keep only the first ``keep`` parks of the last ``Nominate``; ``parked[keep]`` is the head."""

    keep: int


class Enqueue(Msg, frozen=True):
    workload: Any


class Replace(Msg, frozen=True):
    """An admitted workload's new version, which keeps the admission: hold it in the old one's place."""

    workload: Any


class Forget(Msg, frozen=True):
    """Take these workloads out of the queue, wherever they wait (a routing change sends
    every queue the whole pending set at once; each drops only what it holds)."""

    keys: frozenset[str]


class Requeue(Msg, frozen=True):
    workload: Any
    reason: str


class RequeueParked(Msg, frozen=True):
    pass


class Sample(Msg, frozen=True):
    """Ask a queue for its statistics record; as a message it sees every deferred arrival and
    requeue delivered first (reading the actor directly would miss them)."""


class Admit(Msg, frozen=True):
    """Reserve up the tree for this workload; on a grant, hold it as admitted."""

    workload: Any
    usage: FRAmounts
    flavors: Any
    at: float


class Revert(Msg, frozen=True):
    """The commit failed: release an admission's reservation and requeue it."""

    key: str


class Evict(Msg, frozen=True):
    key: str


class Finish(Msg, frozen=True):
    """The workload finished or was deleted: release its quota, do not requeue it."""

    key: str


class Adopt(Msg, frozen=True):
    """Hold a workload that is already admitted (a restart, an update): charge its usage as is."""

    workload: Any


class Fingerprint(Msg, frozen=True):
    pass
