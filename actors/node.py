"""The balance every tree node keeps, and the borrow-request protocol over it.

Each ClusterQueue and Cohort actor owns a parentless :class:`QuotaNode` (its limits,
subtree quota and usage, per FR) and a reference to its parent *actor*.  A
:class:`~actors.messages.Reserve` is checked and applied locally, then the part that
exceeds the node's free local quota climbs to the parent as a new Reserve; a denial
anywhere unwinds every reservation made on the way.  A :class:`~actors.messages.Release`
climbs the same way but as a tell: it cannot be refused, so nobody waits for it (see
:meth:`NodeActor.release` for what a reader of balances must do instead).  Reserved amounts are usage at
once, so every later request sees them; nothing becomes an admission without the
coordinator's commit, and a failed commit releases the chain again.

A Cohort also keeps what each child holds of it (``held``: every Reserve and Release names
the child it comes from) and, from Configure, the most each child may hold while still
within its own quota (``within``: ``subtree - local_quota``, since what a child holds of
its parent is ``max(0, usage - local_quota)``).  That is all it needs to route a
:class:`~actors.messages.Reclaim` query: down into a child only when the child is over its
quota on one of the query's FRs, so the search for candidates never enters a subtree
that cannot hold any (:meth:`NodeActor.reclaim`).

Local check at node x with usage u asking for v more of fr:
``u + v <= subtree(x) + borrowingLimit(x)`` (when x has a parent and a limit) or
``u + v <= subtree(x)`` (a root).  The charge to the parent is
``max(0, u + v - lq) - max(0, u - lq)`` with ``lq = local_quota(x)``.  Chained up the
path this is exactly Kueue's ``available`` check, so the actors can never hold more
than the tree allows, whatever order messages arrive in.
"""

from __future__ import annotations

from typing import Any

from actors.messages import (
    Configure,
    Denied,
    FRAmounts,
    Granted,
    NodeReport,
    Reached,
    Reclaim,
    Release,
    Report,
    Reserve,
)
from actors.runtime import Actor, Reply
from kueued.quota import node as qn
from kueued.quota.node import QuotaNode

__all__ = ["NodeActor", "within_quota"]


def node_key(name: str, *, is_cohort: bool) -> str:
    """How the tree's messages name a node: a Cohort and a ClusterQueue may share a name (two
    kinds), so a child, a query's origin and a searched node are named with their kind."""
    return ("cohort/" if is_cohort else "queue/") + name


class NodeActor(Actor):
    handles_at_once = True  # most of a round's messages find their queue idle (actors.runtime)

    def __init__(self, name: str, *, is_cohort: bool) -> None:
        super().__init__(name)
        self.node = QuotaNode(name, is_cohort=is_cohort)
        self.key = node_key(name, is_cohort=is_cohort)
        self.parent: NodeActor | None = None
        self.children: dict[str, tuple[NodeActor, FRAmounts]] = {}  # node key -> (actor, within)
        self.held: dict[str, FRAmounts] = {}  # child's node key -> what it holds of this node

    def configure(self, limits: Any, subtree: FRAmounts, parent: NodeActor | None,
                  children: tuple[tuple[str, Any, FRAmounts], ...] = ()) -> None:
        self.node.limits = limits
        self.node.subtree = subtree
        self.node.usage = {}
        self.parent = parent
        self.children = {name: (actor, within) for name, actor, within in children}
        self.held = {}

    def _count(self, child: str, amounts: FRAmounts, sign: int) -> None:
        if not child:
            return
        held = self.held.setdefault(child, {})
        for fr, v in amounts.items():
            held[fr] = held.get(fr, 0) + sign * v

    def _charges(self, amounts: FRAmounts, sign: int) -> FRAmounts:
        """What the parent holds more (or, with sign -1, less) once ``amounts`` are charged here:
        ``parent_share(u + v) - parent_share(u)``, ``parent_share(u) = max(0, u - local_quota)``
        (the local quota worked out once for both: this runs at every level of every
        reservation and release)."""
        node = self.node
        usage = node.usage
        out = {}
        for fr, v in amounts.items():
            u = usage.get(fr, 0)
            lq = qn.local_quota(node, fr)
            after = u + sign * v - lq
            before = u - lq
            c = (after if after > 0 else 0) - (before if before > 0 else 0)
            if c:
                out[fr] = sign * c
        return out

    def reserve(self, workload: str, amounts: FRAmounts, *, force: bool = False, child: str = "") -> Any:
        """Reserve here and, for what climbs, above: the answer (:class:`Granted` or
        :class:`Denied`), or a coroutine for it when the parent could not answer at once.
        ``child`` is the node asking (none when a ClusterQueue reserves for itself)."""
        has_parent = self.parent is not None
        if not force:
            for fr, v in amounts.items():
                limit = qn.allowed(self.node, fr, has_parent=has_parent)
                used = self.node.usage.get(fr, 0)
                if v > 0 and limit is not None and used + v > limit:
                    return Denied(f"{'cohort' if self.node.is_cohort else 'ClusterQueue'} {self.name}", fr, used, limit)
        charges = self._charges(amounts, +1)
        for fr, v in amounts.items():
            self.node.usage[fr] = self.node.usage.get(fr, 0) + v
        self._count(child, amounts, +1)
        if charges and self.parent is not None:
            request = (Reserve(workload, charges, self.key) if not force
                       else _Force(workload, charges, self.key))
            reply = self.parent.post(request)
            if reply.done:  # the parent was idle and answered at once
                return self._parent_answered(reply.value if reply.ok else _raise(reply.value), amounts, child)
            return self._await_parent(reply, amounts, child)
        return _GRANTED

    async def _await_parent(self, reply: Reply, amounts: FRAmounts, child: str) -> Granted | Denied:
        # no timeout of its own: the coordinator's ask that started the chain has one
        return self._parent_answered(await reply.result(), amounts, child)

    def _parent_answered(self, answer: Granted | Denied, amounts: FRAmounts, child: str) -> Granted | Denied:
        if isinstance(answer, Denied):
            for fr, v in amounts.items():
                self.node.usage[fr] -= v
            self._count(child, amounts, -1)
        return answer

    # --- reclaim: a preemptor's candidate query --------------------------------------------
    def reclaim(self, query: Reclaim) -> Reached:
        """A Cohort's part of a query: on to every other child that can hold candidates, and
        up.  Nothing here waits: the replies of the nodes it was sent on to go back to the
        asker, who awaits them (``Reached.more``).  A ClusterQueue answers for itself
        (``ClusterQueueActor.reclaim``)."""
        more = []
        down = Reclaim(query.preemptor, query.frs, query.fair, up=False, skip=query.skip)
        preemptor = node_key(query.preemptor, is_cohort=False)
        for key, (actor, within) in self.children.items():
            if key == query.came_from or key == preemptor or key in query.skip:
                continue
            if not query.fair and self._child_within(key, within, query.frs):
                continue  # within its quota on every FR asked: nothing below can be reclaimed
            more.append(actor.post(down))
        if query.up and self.parent is not None and self.parent.key not in query.skip:
            more.append(self.parent.post(Reclaim(query.preemptor, query.frs, query.fair, came_from=self.key,
                                                 skip=query.skip)))
        return Reached(searched=(self.key,), more=tuple(more))

    def _child_within(self, child: str, within: FRAmounts, frs: frozenset[tuple[str, str]]) -> bool:
        """Kueue's ``IsWithinNominalInResources`` for a child, from what it holds of this node."""
        held = self.held.get(child, {})
        for fr in frs:
            if held.get(fr, 0) > within.get(fr, 0):
                return False
        return True

    def handle_node(self, msg: Any) -> Any:
        """The messages every node answers: borrow requests, releases, reports, configuration.

        A borrow request is answered by a coroutine (the runtime awaits it), the rest at once."""
        match msg:
            case _Force(workload=w, amounts=a, child=c):
                return self.reserve(w, a, force=True, child=c)
            case Reserve(workload=w, amounts=a, child=c):
                return self.reserve(w, a, child=c)
            case Release(workload=w, amounts=a, child=c):
                self.release(w, a, child=c)
                return None
            case Reclaim():
                return self.reclaim(msg)
            case Report():
                return NodeReport(self.name, dict(self.node.usage))
            case Configure(limits=limits, subtree=subtree, parent=parent, children=children):
                self.configure(limits, subtree, parent, children)
                return None
        raise TypeError(f"{self.name}: unexpected message {type(msg).__name__}")

    def release(self, workload: str, amounts: FRAmounts, *, child: str = "") -> None:
        """Give back ``amounts``; the share the parent held follows as a tell, not an ask.

        A release can never be refused, so nothing waits for it.  Until the parent has
        handled it the parent shows more usage than it has, which only ever denies a
        borrow request that would have been granted (never the other way round).  Whoever
        reads balances must read a child before its parent, after the child has handled
        what it was sent: then every release sent up is already in the parent's mailbox,
        ahead of the read (``Coordinator._fill_cohorts``, ``Coordinator.drain_cohorts``).
        """
        charges = self._charges(amounts, -1)
        for fr, v in amounts.items():
            self.node.usage[fr] = self.node.usage.get(fr, 0) - v
        self._count(child, amounts, -1)
        if charges and self.parent is not None:
            self.parent.tell(Release(workload, charges, self.key))


_GRANTED = Granted()


def within_quota(node: QuotaNode) -> FRAmounts:
    """The most a child may hold of its parent while still within its own quota, per FR:
    ``subtree - local_quota`` (what it holds of the parent is ``usage - local_quota``)."""
    return {fr: q - qn.local_quota(node, fr) for fr, q in node.subtree.items()}


def _raise(exc: BaseException) -> Any:
    raise exc


class _Force(Reserve, frozen=True):
    """A reservation that skips the limit check: re-charging already admitted usage."""
