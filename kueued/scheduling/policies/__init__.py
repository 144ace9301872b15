"""KEP-1093 queue policies on the nodes of the cohort tree, and LocalQueue weights.

Why
---
KEP-1093 (multi-level cluster queues) lets an admin say, per node of the tree, in
which order the node's children get their turn: ``fifo`` (Kueue's order), ``fair``
(the least consumer first) or ``capacity`` (whoever is below its guaranteed share
first), and lets a ClusterQueue serve its LocalQueues by weight.  Kueue has no field
for it, so kueued reads the annotation ``kueued.io/admission-policy`` on a Cohort or
ClusterQueue; :mod:`kueued.model.validation.policy` refuses any other value.

What each policy does
---------------------
On a **Cohort** it orders the candidates of the Cohort's children (the tournament of
:mod:`.tournament`, the cycle's ``iterate``):

* ``fifo`` (also: no annotation): Kueue's classical order, borrowing level, then
  priority, then creation time;
* ``fair``: children whose subtree would stay within its own quota with the
  candidate's request first (as Kueue's fair sharing, gate
  FairSharingPrioritizeNonBorrowing), then the child subtree consuming least, consumption
  measured as the dominant resource's share of what the Cohort could ever hand out,
  divided by the child's ``spec.fairSharing.weight`` (default 1), ties in classical order;
* ``capacity``: children whose subtree uses less than its guaranteed quota (nominal
  for a ClusterQueue, the nominal quotas of its whole subtree for a Cohort) first, the
  furthest below first; then the others in classical order.

On a **ClusterQueue** it orders the ClusterQueue's own pending workloads across its
LocalQueues (:mod:`.local_queues`): ``fair`` serves the LocalQueue whose admitted
usage divided by its ``spec.fairSharing.weight`` is least first; ``capacity`` serves
first the LocalQueues below their weight's part of the ClusterQueue's nominal quota,
the furthest below first; ``fifo`` keeps Kueue's order.  A Cohort's policy ranks
subtrees, a ClusterQueue's ranks LocalQueues; neither reaches past its own children.
Shares are measured on current usage (what is admitted, plus, in a Cohort, what this
cycle already processed), before the candidate's own request: the KEP's "the more a
queue has consumed, the later".

Only leaves take workloads: a LocalQueue names a ClusterQueue, never a Cohort, and
Cohort cycles are already found by the forest builder (queues on or under a cycle are
inactive).

How it is wired
---------------
:func:`kueued.engine.wiring.make_iterate` returns a :class:`PolicyOrder` whenever
fair sharing is off; with no ``fair``/``capacity`` Cohort it hands each cycle to
Kueue's :func:`~kueued.scheduling.cycle.classical_order` unchanged, so a tree without
the annotation behaves exactly as Kueue.  The coordinator sets a ClusterQueue's
pending-queue hook from :func:`local_queue_hook` when admission fair sharing does not
already own it (:func:`kueued.engine.wiring.queue_order_hook`).

With Kueue's fair sharing on (Configuration ``fairSharing``), fair sharing's own
tournament decides the order and these annotations are ignored (still validated):
two share definitions fighting over one order would explain nothing.  Admission fair
sharing (KEP-4136) likewise wins over a ClusterQueue's ``fair`` where both apply.

:mod:`.shares` holds the numbers, which ``simulate`` also reports per queue.
"""

from kueued.model.validation.policy import ADMISSION_POLICY, CAPACITY, FAIR, FIFO, POLICIES
from kueued.scheduling.policies.local_queues import local_queue_hook, local_queue_usage
from kueued.scheduling.policies.shares import (
    capacity_of,
    consumption,
    fair_share,
    guarantee_in_use,
    owned,
    per_resource,
    policy_of,
)
from kueued.scheduling.policies.tournament import PolicyOrder, cohort_policies, policy_order

__all__ = ["ADMISSION_POLICY", "POLICIES", "FIFO", "FAIR", "CAPACITY", "PolicyOrder", "policy_order",
           "cohort_policies", "local_queue_hook", "local_queue_usage", "policy_of", "consumption",
           "owned", "per_resource", "capacity_of", "fair_share", "guarantee_in_use"]
