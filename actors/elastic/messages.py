"""Messages between the elastic coordinator, ElasticQuota group actors and the root.

Frozen, tagged msgspec Structs, dispatched with ``match`` (the Kueue side's are in
``actors/messages.py``).  Amounts are per resource in exact milli-units, except a
runtime travelling down, which stays in Koordinator's calculator values (cpu in
millicores, other resources in whole units) so that no rounding happens between
levels.  Workloads travel by reference (``ElasticWorkload``), never copied.

Up the tree (told, counted by the flow):   RequestUp (child -> parent),
                                           OutsideUsage (system/default group -> root).
Down the tree (told, counted by the flow): RuntimeDown (parent -> child).
Coordinator -> group (asked):              Hold, Release, Handover, BeginPass, TryAdmit,
                                           Recycle, Revert, Restore, GroupReport.
Coordinator -> root (asked):               NodeTotal.
Coordinator -> group or root (asked):      Stats.
"""

from __future__ import annotations

from typing import Any

import msgspec

Amounts = dict[str, int]
Order = tuple[int, float, str]  # ElasticWorkload.order(): smaller is tried first


class Msg(msgspec.Struct, frozen=True, tag=True):
    pass


# --- the tree ------------------------------------------------------------------------------
class RequestUp(Msg, frozen=True):
    """A child's limited request, min(request, max), as its parent aggregates it."""

    child: str
    limited: Amounts
    seq: int  # the sender's counter: a receiver keeps only the newest per sender


class OutsideUsage(Msg, frozen=True):
    """What the system or default group uses now; the root shares the Nodes' total minus it."""

    group: str
    used: Amounts
    seq: int


class RuntimeDown(Msg, frozen=True):
    """A child's runtime (Koordinator values, the parent's calculator keys) and scaled min."""

    runtime: Amounts
    scaled_min: Amounts
    seq: int


# --- the coordinator -----------------------------------------------------------------------
class Hold(Msg, frozen=True):
    """Keep these workloads (admitted as they are, pending in the heap) and announce the request.

    The first one a group gets also tells its parent its request when it holds nothing:
    a group that does not lend asks for its min regardless.
    """

    workloads: tuple[Any, ...]


class Release(Msg, frozen=True):
    """A workload finished, was deleted or changed: forget it (its usage and its request).

    Answered with the workload as the group last knew it (None if it held no such key), so
    a new version can take over what was decided for the old one.
    """

    workload: str


class Handover(Msg, frozen=True):
    """The tree is being rebuilt: give up every workload and the recycling timer."""


class Handed(Msg, frozen=True):
    workloads: tuple[Any, ...]  # ElasticWorkload, by reference
    over_since: float | None


class NodeTotal(Msg, frozen=True):
    """The Nodes' allocatable changed (a Node came or went): the root shares a new total."""

    total: Amounts


class BeginPass(Msg, frozen=True):
    """A scheduling pass starts: what was set aside in the last one returns to the heap."""


class TryAdmit(Msg, frozen=True):
    """Pop the head and decide it: admit, admit with victims of this group, or set it aside."""


class Decision(Msg, frozen=True):
    workload: str
    admitted: bool
    victims: tuple[str, ...]
    reason: str
    usage: Amounts  # what the admission charges, for the commit
    head: Order | None  # the next head, so the coordinator can keep merging heaps


class Recycle(Msg, frozen=True):
    """Forced recycling: evict what keeps used above runtime if it has for ``delay``.

    ``now`` is the coordinator's clock (None: no clock, the delay has elapsed).
    """

    now: float | None
    delay: float


class Recycled(Msg, frozen=True):
    victims: tuple[str, ...]
    deadline: float | None  # when recycling is next due here (None: not over, or nothing to gain)


class Revert(Msg, frozen=True):
    """The admission's commit failed: set the workload aside as pending with this reason."""

    workload: str
    reason: str


class Restore(Msg, frozen=True):
    """An eviction's commit failed: the workload is admitted again."""

    workload: str


class GroupReport(Msg, frozen=True):
    pass


class GroupReply(Msg, frozen=True):
    """A group's amounts (milli-units) and its workloads' final results."""

    name: str
    request: Amounts
    runtime: Amounts
    min: Amounts
    max: Amounts
    results: dict[str, Any]  # key -> ElasticWorkloadResult


class Stats(Msg, frozen=True):
    pass


class GroupStats(Msg, frozen=True):
    """Inspectable state of one group actor (metrics, ``kueued status``)."""

    name: str
    mailbox: int
    handled: int
    pending: int
    admitted: int
    request: Amounts
    runtime: Amounts
    used: Amounts = {}  # what its admitted workloads hold (its own, not its subtree's)
