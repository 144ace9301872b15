"""The reliability tests' tree, their view of the cluster, and the invariants they check.

A test builds a :class:`Tree` (two Cohorts of two ClusterQueues, flavors ``rel-on-demand``
then ``rel-spot``, cpu only, explicit borrowing limits so every queue's ceiling is a number
the test knows), creates Workloads against it through :class:`~tests.reliability.api.Admin`,
and reads the cluster back with :func:`observe` into a :class:`State`:

- ``placement``: each Workload's outcome, ``"<queue>:<flavor>"`` when admitted,
  ``"finished"`` or ``"pending"``; what two runs of one scenario compare;
- ``breaches``: what must never be seen, at any moment: an admission to a ClusterQueue
  the Workload's LocalQueue does not name, or admitted usage over a ClusterQueue's
  nominal quota plus its borrowing limit, or over its Cohort's nominal quotas (an evicted
  Workload whose admission is not cleared yet counts as released: kueued frees its quota
  at the first of an eviction's two writes);
- ``unsettled``: what is fine for a moment but not once kueued has settled: a pending
  Workload without a reason (``QuotaReserved=False`` and a message), an eviction half
  written (``Evicted=True`` and still an admission), a ClusterQueue whose status usage
  differs from the sum of its admitted Workloads.

:func:`settle` polls until nothing is unsettled and the placement has held still for a
while.  Polled, not awaited: the only events here are another process's API writes, and
a watch of our own would be one more client to keep in step.  Finished Workloads keep
their admission (Kueue's way) but no quota, so they count for nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas
from tests.reliability.api import Admin

ON_DEMAND, SPOT = "rel-on-demand", "rel-spot"
FLAVORS = (ON_DEMAND, SPOT)
PREEMPTION = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any", "borrowWithinCohort": {
    "policy": "Never"}}


@dataclass(frozen=True)
class Queue:
    name: str
    cohort: str
    nominal: dict[str, int]  # flavor -> cpus
    borrowing: dict[str, int]  # flavor -> cpus it may borrow

    def ceiling(self, flavor_name: str) -> int:
        return (self.nominal[flavor_name] + self.borrowing[flavor_name]) * 1000


@dataclass(frozen=True)
class Tree:
    namespace: str
    queues: tuple[Queue, ...]

    @classmethod
    def small(cls, prefix: str, *, on_demand: int, spot: int) -> Tree:
        """Cohorts ``{prefix}-alpha`` (queues a1, a2) and ``{prefix}-beta`` (b1, b2); each queue may borrow
        as much as its sibling lends, which is all of it."""
        queues = tuple(Queue(f"{prefix}-{q}", f"{prefix}-{c}", {ON_DEMAND: on_demand, SPOT: spot},
                             {ON_DEMAND: on_demand, SPOT: spot})
                       for c, q in (("alpha", "a1"), ("alpha", "a2"), ("beta", "b1"), ("beta", "b2")))
        return cls(prefix, queues)

    @property
    def cohorts(self) -> list[str]:
        return sorted({q.cohort for q in self.queues})

    def queue(self, name: str) -> Queue:
        return next(q for q in self.queues if q.name == name)

    def manifests(self) -> list[dict[str, Any]]:
        out = [namespace(self.namespace), flavor(ON_DEMAND), flavor(SPOT)]
        out += [cohort(name) for name in self.cohorts]
        for q in self.queues:
            out.append(cluster_queue(q.name, *(quotas(f, cpu=(str(q.nominal[f]), str(q.borrowing[f])))
                                               for f in FLAVORS), cohort=q.cohort, preemption=PREEMPTION))
            out.append(local_queue(q.name, self.namespace, q.name))  # each LocalQueue named as its queue
        return out

    def cluster_scoped(self) -> list[tuple[str, str]]:
        """What :meth:`~tests.reliability.api.Admin.delete_all` removes after the namespace's objects."""
        return [("clusterqueues", q.name) for q in self.queues] + [("cohorts", c) for c in self.cohorts]


def workload(tree: Tree, name: str, queue: str, *, cpu: int, priority: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": tree.namespace},
            "spec": {"queueName": queue, "priority": priority, "podSets": [{
                "name": "main", "count": 1,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}},
            }]}}


def milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or () if c.get("type") == kind), None)


@dataclass
class State:
    placement: dict[str, str] = field(default_factory=dict)
    breaches: list[str] = field(default_factory=list)
    unsettled: list[str] = field(default_factory=list)
    usage: dict[tuple[str, str], int] = field(default_factory=dict)  # (queue, flavor) -> admitted milli-cpus
    releasing: list[str] = field(default_factory=list)  # evicted, admission not cleared yet
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> the Workload as read

    def count(self, what: str) -> int:
        return sum(1 for p in self.placement.values() if p == what or (what == "admitted" and ":" in p))


def observe(admin: Admin, tree: Tree) -> State:
    """The cluster as it is now, judged (module docstring)."""
    state = State()
    routes = {q.name: q.name for q in tree.queues}  # LocalQueue -> ClusterQueue
    for wl in admin.workloads(tree.namespace):
        name = wl["metadata"]["name"]
        state.raw[name] = wl
        admission = wl.get("status", {}).get("admission")
        finished = condition(wl, "Finished")
        if finished is not None and finished.get("status") == "True":
            state.placement[name] = "finished"
            continue
        if admission:
            cq = admission["clusterQueue"]
            if cq != routes.get(wl["spec"]["queueName"]):
                state.breaches.append(f"{name} admitted to {cq}, but its LocalQueue names "
                                      f"{routes.get(wl['spec']['queueName'])}")
            evicted = condition(wl, "Evicted")
            if evicted is not None and evicted.get("status") == "True":
                # kueued frees an evicted Workload's quota at the first of the eviction's two writes
                state.unsettled.append(f"{name}: evicted but still holds its admission")
                state.releasing.append(name)
                state.placement[name] = "pending"
                continue
            flavors = set()
            for assignment in admission["podSetAssignments"]:
                for resource, flavor_name in assignment["flavors"].items():
                    flavors.add(flavor_name)
                    amount = milli(assignment["resourceUsage"][resource])
                    state.usage[(cq, flavor_name)] = state.usage.get((cq, flavor_name), 0) + amount
            state.placement[name] = f"{cq}:{','.join(sorted(flavors))}"
            continue
        state.placement[name] = "pending"
        reserved = condition(wl, "QuotaReserved")
        if reserved is None or reserved.get("status") != "False" or not reserved.get("message"):
            state.unsettled.append(f"{name}: pending without a reason ({json.dumps(reserved)})")
    for q in tree.queues:
        for f in FLAVORS:
            used = state.usage.get((q.name, f), 0)
            if used > q.ceiling(f):
                state.breaches.append(f"{q.name} admitted {used}m cpu of {f}, above its {q.ceiling(f)}m ceiling")
        status = admin.cluster_queue(q.name).get("status", {})
        shown = {(fu["name"], r["name"]): milli(r["total"]) for fu in status.get("flavorsUsage") or ()
                 for r in fu.get("resources") or ()}
        for f in FLAVORS:
            if shown.get((f, "cpu"), 0) != state.usage.get((q.name, f), 0):
                state.unsettled.append(f"{q.name} status says {shown.get((f, 'cpu'), 0)}m cpu of {f}, its admitted "
                                       f"Workloads sum to {state.usage.get((q.name, f), 0)}m")
    for c in tree.cohorts:
        members = [q for q in tree.queues if q.cohort == c]
        for f in FLAVORS:
            used = sum(state.usage.get((q.name, f), 0) for q in members)
            nominal = sum(q.nominal[f] for q in members) * 1000
            if used > nominal:
                holders = sorted(n for n, where in state.placement.items()
                                 if where.split(":")[0] in {q.name for q in members} and where.endswith(f))
                state.breaches.append(f"cohort {c} admitted {used}m cpu of {f}, above its {nominal}m quota "
                                      f"(held by {holders}; evicted, still holding: {state.releasing})")
    return state


def settle(admin: Admin, tree: Tree, *, timeout: float, quiet: float = 2.0, poll: float = 0.5,
           alive: Callable[[], str | None] = lambda: None, seen: list[State] | None = None) -> State:
    """Poll until nothing is unsettled and the placement held still for ``quiet`` seconds.

    ``alive`` says why the test cannot go on (the daemon died), or None; every state read is
    appended to ``seen``, so a caller can check the breaches of the way there too.
    """
    deadline = time.monotonic() + timeout
    since, last = time.monotonic(), None
    while True:
        state = observe(admin, tree)
        if seen is not None:
            seen.append(state)
        if state.breaches:
            raise AssertionError("invariant broken: " + "; ".join(state.breaches[:10]))
        if (why := alive()) is not None:
            raise AssertionError(why)
        now = time.monotonic()
        if state.unsettled or state.placement != last:
            since, last = now, state.placement
        elif now - since >= quiet:
            return state
        if now > deadline:
            raise AssertionError(f"not settled within {timeout:g}s: " + "; ".join(state.unsettled[:10]))
        time.sleep(poll)


def crash_signs(log_lines: Iterable[str], *, killed: bool = False) -> list[str]:
    """What in a daemon's JSON log says it crashed or hit an unexpected exception; a daemon
    ``killed`` (SIGKILL) may have left its last line half written."""
    signs = []
    lines = list(log_lines)
    for i, line in enumerate(lines):
        try:
            logged = json.loads(line)
        except json.JSONDecodeError:
            if not (killed and i == len(lines) - 1):
                signs.append(f"not JSON: {line[:200]}")
            continue
        if logged.get("event") == "uncaught_exception" or "exception" in logged or "traceback" in logged:
            signs.append(line[:2000])
    return signs
