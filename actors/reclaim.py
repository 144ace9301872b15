"""Reclaim queries: a round's preemptors ask the tree for the workloads they may take quota from.

The coordinator holds balances for a cycle, never the queues' admitted workloads: those
stay with the ClusterQueue actors.  Before the pure cycle (``run_cycle``) decides, each
head whose search for victims could run asks the tree for its candidates:

1. :func:`query_for` says whether a head needs to ask.  It does when its ClusterQueue may
   preempt at all and flavor assignment, run on the cycle-start balances with an oracle
   that finds no candidates, consults that oracle even once: only then would the real
   search run during nomination.  A head whose every resource fits asks nothing; one that
   does not fit and may be admitted with fewer pods (``kueued.scheduling.partial``) asks,
   since its smaller sizes may need the search.
2. The query (:class:`~actors.messages.Reclaim`) goes to the preemptor's ClusterQueue,
   which answers with its own workloads and sends the query up; every Cohort on the way
   sends it down into each other child subtree that can hold candidates under Kueue's
   rules and on up (``NodeActor.reclaim``); ClusterQueues below answer with theirs.
   The query's FRs are every (flavor, resource) the head could be given: at least those
   the search asks about, so a subtree the search would enter is never pruned.
3. :func:`gather` collects the answers (each node's ``Reached`` names the replies still to
   come from the nodes it sent the query on to; nothing in the tree waits on anything).

The cycle's snapshot then holds, per ClusterQueue, only the workloads some query reached,
and the pure search (``kueued.scheduling.preemption``) chooses the victims among them exactly
as it would over every workload of the tree: it never looks into a pruned subtree, and
the property tests check both the reach and the victims against the search over the whole
tree.  One approximation, rare and documented: a preemptor whose victims overlap another's
is re-assigned later in the cycle (``cycle._process``) on balances that earlier admissions of
the cycle have raised; a subtree pushed over its quota only then was not asked, so that
re-assignment does not see its workloads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import msgspec

from actors.messages import Reached, Reclaim
from actors.node import NodeActor, node_key
from kueued.scheduling import partial
from kueued.scheduling.flavors import Assignment, Mode, assign_flavors
from kueued.scheduling.preemption.policy import NEVER
from kueued.scheduling.snapshot import ClusterQueueSnapshot, Snapshot
from kueued.scheduling.workload import WorkloadInfo

__all__ = ["query_for", "searches", "gather", "ask_all"]


def searches(cq: ClusterQueueSnapshot) -> bool:
    """May ``cq``'s heads search for victims at all (it is active and some policy preempts)?"""
    spec = cq.spec.preemption
    return cq.active and (spec.within_cluster_queue not in ("", NEVER) or (
        cq.node.parent is not None and spec.reclaim_within_cohort not in ("", NEVER)))


def query_for(snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo, *,
              fair: bool) -> Reclaim | Assignment | None:
    """The query ``wl``'s nomination needs; or, when its search for victims cannot run because
    everything fits, the assignment nomination would make (handed to ``run_cycle``, which then
    does not assign it again); or None when the queue never preempts."""
    if not searches(cq):
        return None
    spec = cq.spec.preemption
    cohort = cq.node.parent is not None and spec.reclaim_within_cohort not in ("", NEVER)
    asked = [False]

    def no_candidates(cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: tuple[str, str], value: int) -> Mode:
        asked[0] = True
        return Mode.NO_CANDIDATES

    assignment = assign_flavors(snapshot, cq, wl, no_candidates)
    if not asked[0] and (assignment.mode == Mode.FIT or not partial.can_be_reduced(wl)):
        return assignment  # (fewer pods of one that does not fit may need the search: it asks)
    frs = frozenset((flavor, r) for r in wl.total_requests()
                    if (group := cq.group_of.get(r)) is not None for flavor in group.flavors)
    return Reclaim(cq.name, frs, fair, cohort)


async def gather(actor: NodeActor, query: Reclaim, *, timeout: float = math.inf) -> tuple[
        dict[str, tuple[WorkloadInfo, ...]], list[str]]:
    """Send ``query`` to ``actor`` and collect every node's answer: (ClusterQueue -> the
    workloads it offered, the nodes searched)."""
    found: dict[str, tuple[WorkloadInfo, ...]] = {}
    searched: list[str] = []
    await _collect([actor.post(query)], found, searched, timeout)
    return found, searched


async def ask_all(actors: Mapping[str, NodeActor], queries: Iterable[Reclaim], *,
                  timeout: float = math.inf) -> dict[str, tuple[WorkloadInfo, ...]]:
    """Every query of a round; what they reached together, per ClusterQueue.

    A classical query (not ``fair``) whose preemptor an earlier query on the same FRs has
    searched is not sent: it would reach nothing new.  That earlier walk came down to the
    preemptor's queue through each of its ancestors below their meeting point, entering at
    each every child not within its quota, and at the meeting point and above the two walks
    are the same; so the later walk's own queue, and every subtree it would enter on its way
    up, were searched already, and a classical query's answer from a queue does not depend
    on who asks (only a fair-sharing one does: a queue answers it only when borrowing, but
    always to its own preemptor).  A round's preemptors in one busy tree made one walk each
    over the whole tree before (66 % of ``bench/throughput.py``'s preemption shape).

    For the same reason a classical query that is sent skips the nodes earlier ones on its FRs
    searched (``Reclaim.skip``): it does not go down into one, nor up into one.  A walk that
    searched a node entered each of its children not within its quota (or came up through
    one), and a walk that left its own queue went up to the root; so what a walk would find
    in or above a searched node was found already."""
    found: dict[str, tuple[WorkloadInfo, ...]] = {}
    covered: dict[frozenset[tuple[str, str]], set[str]] = {}  # FRs -> the nodes classical walks searched
    for q in queries:
        if not q.fair:
            seen = covered.get(q.frs, ())
            if node_key(q.preemptor, is_cohort=False) in seen:
                continue
            if seen:
                q = msgspec.structs.replace(q, skip=frozenset(seen))
        walk: list[str] = []
        await _collect([actors[q.preemptor].post(q)], found, walk, timeout)
        if not q.fair:
            covered.setdefault(q.frs, set()).update(walk)
    return found


async def _collect(pending: list, found: dict[str, tuple[WorkloadInfo, ...]], searched: list[str],
                   timeout: float) -> None:
    while pending:
        reached: Reached = await pending.pop().result(timeout)
        for name, workloads in reached.found:
            found[name] = workloads
        searched.extend(reached.searched)
        pending.extend(reached.more)
