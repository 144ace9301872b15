"""ElasticQuota trees on the actor engine: one actor per group, requests up, runtime down.

An ElasticQuota tree is a quota tree whose admission policy is runtime quota.  It lives
beside the Kueue-style trees: its :class:`ElasticCoordinator` is the sibling of
``actors.coordinator.Coordinator``, started in the same task group and committing
through the same API port, in ``simulate`` and in the daemon alike.  Every decision is
made by the pure code (``kueued.quota.elastic`` for amounts,
``kueued.scheduling.elastic.GroupState`` for admission, preemption and recycling), one
group at a time, so this engine and ``ElasticRun`` decide identically.

Modules (one concept each):

* :mod:`.messages`: the frozen, tagged messages;
* :mod:`.flow`: :class:`Flow`, which counts told messages so the tree's rest is awaitable;
* :mod:`.tree`: what the root and an inner group share (children's requests in, shares out);
* :mod:`.root`: :class:`ElasticRootActor`, Koordinator's root quota: the cluster total (the
  Nodes' allocatable minus what the system and default groups use, or without Nodes the
  top-level groups' max), divided among the top-level groups;
* :mod:`.group`: :class:`ElasticGroupActor`, one per group (the system and default groups
  included): its spec, its workloads (a :class:`GroupState` and a pending heap), the last
  limited request each child told it, the runtime its parent gave it, the recycling timer;
* :mod:`.coordinator`: :class:`ElasticCoordinator`: wiring, rounds, commits, changes;
* :mod:`.status`: what is written back: request/runtime annotations, validity conditions.

Data flow (every message a tell through one :class:`Flow`, which counts them):

1. Requests go UP.  When a group's request moves (a workload held or released, a child's
   ``RequestUp``), it computes ``limit_request`` (min(request, max), raised to min for a
   group that does not lend) and tells its parent ``RequestUp``.  The system and default
   groups sit outside the tree; when Nodes are modelled they tell the root
   ``OutsideUsage`` whenever what they use moves.
2. Runtime goes DOWN.  When a parent's inputs move (a child's request, its own total, the
   Nodes' total), it divides its total among its children with ``divide_runtime`` and
   tells each child whose share changed ``RuntimeDown``; an inner child divides in turn.
   A group the root never reaches (a missing parent) never gets a runtime: zero, as in
   ``compute_runtime``.
3. Each message carries its sender's sequence number and a receiver keeps only the
   newest per sender, so the state the tree settles in depends only on the last value
   each group sent, never on the order messages were delivered in: it is the pure
   computation's.

Rounds (the coordinator, asks only; after each one it waits for the flow to settle, so
every decision sees the runtime the pure engine would):

* scheduling pass: ``BeginPass`` to every group (what was set aside returns to its
  heap; the reply is its head), then repeatedly ``TryAdmit`` to the group whose head
  comes first (priority, creation, key: a k-way merge of the heaps is the pure pass's
  global order).  The group decides with ``GroupState.schedule``; victims and failures
  are set aside until the next pass, as the pure pass snapshots its pending list.  The
  coordinator commits victims' evictions, then the admission, through the port; a
  refused commit is ``Restore``-d / ``Revert``-ed and retried next round.
* recycling pass: ``Recycle(now, delay)`` to every group by name.  A group evicts only
  once its used has stayed above its runtime for the delay (Koordinator's
  ``delayEvictTime``, ``Settings.delay_evict_time``); without a clock (``simulate``
  without arrivals, the conformance scenarios) the delay counts as elapsed.  The reply
  says when recycling is next due there, so a timeline or the daemon can wake up then.

A round that admits and evicts nothing is quiescence.

Changes while running (the daemon, a timeline): workloads held and released one at a
time; a Node's coming or going is one ``NodeTotal`` to the root; a group added, changed
or removed rebuilds the tree, every workload and recycling timer carried over by key
(see :mod:`.coordinator`).  After each settled batch the daemon has each ElasticQuota's
request and runtime written as Koordinator's annotations (:mod:`.status`).
"""

from actors.elastic.coordinator import ElasticCoordinator, simulate_elastic
from actors.elastic.flow import Flow
from actors.elastic.group import ElasticGroupActor
from actors.elastic.root import ElasticRootActor

__all__ = ["Flow", "ElasticGroupActor", "ElasticRootActor", "ElasticCoordinator", "simulate_elastic"]
