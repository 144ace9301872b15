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

Local check at node x with usage u asking for v more of fr:
``u + v <= subtree(x) + borrowingLimit(x)`` (when x has a parent and a limit) or
``u + v <= subtree(x)`` (a root).  The charge to the parent is
``max(0, u + v - lq) - max(0, u - lq)`` with ``lq = local_quota(x)``.  Chained up the
path this is exactly Kueue's ``available`` check, so the actors can never hold more
than the tree allows, whatever order messages arrive in.
"""

from __future__ import annotations

from typing import Any

from actors.messages import Configure, Denied, FRAmounts, Granted, NodeReport, Release, Report, Reserve
from actors.runtime import Actor, Reply
from kueued.quota import node as qn
from kueued.quota.node import QuotaNode

__all__ = ["NodeActor"]


class NodeActor(Actor):
    handles_at_once = True  # most of a round's messages find their queue idle (actors.runtime)

    def __init__(self, name: str, *, is_cohort: bool) -> None:
        super().__init__(name)
        self.node = QuotaNode(name, is_cohort=is_cohort)
        self.parent: NodeActor | None = None

    def configure(self, limits: Any, subtree: FRAmounts, parent: NodeActor | None) -> None:
        self.node.limits = limits
        self.node.subtree = subtree
        self.node.usage = {}
        self.parent = parent

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

    def reserve(self, workload: str, amounts: FRAmounts, *, force: bool = False) -> Any:
        """Reserve here and, for what climbs, above: the answer (:class:`Granted` or
        :class:`Denied`), or a coroutine for it when the parent could not answer at once."""
        has_parent = self.parent is not None
        if not force:
            for fr, v in amounts.items():
                limit = qn.allowed(self.node, fr, has_parent=has_parent)
                used = self.node.usage.get(fr, 0)
                if v > 0 and limit is not None and used + v > limit:
                    return Denied(self.name, fr, used, limit)
        charges = self._charges(amounts, +1)
        for fr, v in amounts.items():
            self.node.usage[fr] = self.node.usage.get(fr, 0) + v
        if charges and self.parent is not None:
            request = Reserve(workload, charges) if not force else _Force(workload, charges)
            reply = self.parent.post(request)
            if reply.done:  # the parent was idle and answered at once
                return self._parent_answered(reply.value if reply.ok else _raise(reply.value), amounts)
            return self._await_parent(reply, amounts)
        return _GRANTED

    async def _await_parent(self, reply: Reply, amounts: FRAmounts) -> Granted | Denied:
        # no timeout of its own: the coordinator's ask that started the chain has one
        return self._parent_answered(await reply.result(), amounts)

    def _parent_answered(self, answer: Granted | Denied, amounts: FRAmounts) -> Granted | Denied:
        if isinstance(answer, Denied):
            for fr, v in amounts.items():
                self.node.usage[fr] -= v
        return answer

    def handle_node(self, msg: Any) -> Any:
        """The messages every node answers: borrow requests, releases, reports, configuration.

        A borrow request is answered by a coroutine (the runtime awaits it), the rest at once."""
        match msg:
            case _Force(workload=w, amounts=a):
                return self.reserve(w, a, force=True)
            case Reserve(workload=w, amounts=a):
                return self.reserve(w, a)
            case Release(workload=w, amounts=a):
                self.release(w, a)
                return None
            case Report():
                return NodeReport(self.name, dict(self.node.usage))
            case Configure(limits=limits, subtree=subtree, parent=parent):
                self.configure(limits, subtree, parent)
                return None
        raise TypeError(f"{self.name}: unexpected message {type(msg).__name__}")

    def release(self, workload: str, amounts: FRAmounts) -> None:
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
        if charges and self.parent is not None:
            self.parent.tell(Release(workload, charges))


_GRANTED = Granted()


def _raise(exc: BaseException) -> Any:
    raise exc


class _Force(Reserve, frozen=True):
    """A reservation that skips the limit check: re-charging already admitted usage."""
