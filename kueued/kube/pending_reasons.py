"""How Kueue words a Workload's conditions: why it waits (``QuotaReserved=False``), and the
Evicted, Preempted and Requeued conditions around an eviction (a preemption's message:
:func:`preemption_message`).

kueued explains a wait in its own sentences (``simulate`` prints them, the daemon logs them);
the condition it writes on the Workload says it as Kueue does, so a script or dashboard made
for Kueue reads the same reason and message (``pkg/controller/core/workload_controller.go``,
``pkg/scheduler/scheduler.go``; with Kueue's released, legacy condition reasons):

- a queue that is missing or stopped: reason ``Inadmissible``, "LocalQueue X doesn't exist",
  "LocalQueue X is inactive", "ClusterQueue X doesn't exist", "ClusterQueue X is inactive"
  (the ClusterQueue's own ``Active`` condition says why);
- the annotation ``kueue.x-k8s.io/admission-gated-by``: reason ``AdmissionGated``,
  "Admission is gated by: GATES";
- a namespace outside the ClusterQueue's selector: reason ``Pending``, "Workload namespace
  doesn't match ClusterQueue selector";
- a deactivated workload (``spec.active: false``): no QuotaReserved condition at all, but
  ``Evicted=True``, reason ``Deactivated``, "The workload is deactivated", as Kueue's workload
  controller marks every deactivated workload, admitted or not (:data:`DEACTIVATED`);
- anything else (no quota, waiting for a preemption...): reason ``Pending`` and kueued's
  sentence, which starts as Kueue's does ("couldn't assign flavors to pod set main: ...").

The sentences come from a few places (``World.route``, ``actors.drains.held_back``, the
forest's inactive reasons, the cycle's namespace check); ``tests/kube/test_pending_reasons.py``
makes each of them through its own code and checks it is recognised here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kueued.kube.port import Condition

__all__ = ["PENDING", "INADMISSIBLE", "ADMISSION_GATED", "DEACTIVATED", "kueue_condition", "pending_condition",
           "requeued", "reset_evictions", "restarted", "already_shown", "preemption_message", "priorities",
           "HUMAN_PREEMPTION_REASONS", "JOB_UID_LABEL"]

HUMAN_PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}
"""Kueue's ``preemption.HumanReadablePreemptionReasons``: how a preemption message names the policy."""

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

PENDING = "Pending"
INADMISSIBLE = "Inadmissible"
ADMISSION_GATED = "AdmissionGated"
DEACTIVATED = "Deactivated"

_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^LocalQueue (\S+) doesn't exist"), INADMISSIBLE, "LocalQueue {0} doesn't exist"),
    (re.compile(r"^LocalQueue (\S+) is stopped"), INADMISSIBLE, "LocalQueue {0} is inactive"),
    (re.compile(r"^ClusterQueue (\S+) doesn't exist"), INADMISSIBLE, "ClusterQueue {0} doesn't exist"),
    (re.compile(r"^ClusterQueue (\S+) is inactive"), INADMISSIBLE, "ClusterQueue {0} is inactive"),
    (re.compile(r"^namespace \S+ doesn't match the namespaceSelector"), PENDING,
     "Workload namespace doesn't match ClusterQueue selector"),
)


def kueue_condition(sentence: str) -> tuple[str, str]:
    """(reason, message) of the QuotaReserved=False condition for kueued's ``sentence``."""
    if sentence.startswith("Admission is gated by: "):
        return ADMISSION_GATED, sentence
    if sentence.startswith("the Workload is deactivated"):
        return DEACTIVATED, "The workload is deactivated"  # the Evicted condition's, not QuotaReserved's
    for pattern, reason, message in _RULES:
        m = pattern.match(sentence)
        if m is not None:
            return reason, message.format(*m.groups())
    return PENDING, sentence


def reset_evictions(manifest: dict[str, Any]) -> list[Condition]:
    """Admitted again after an eviction: Kueue's ``resetActiveCondition`` turns off the Evicted and
    Preempted conditions that are on (only those: an absent one stays absent), keeping their message
    after ``Previously:``; left on, a restart would read the workload as evicted again."""
    return [Condition(c["type"], "False", "QuotaReserved", f"Previously: {c.get('message') or ''}"[:32768])
            for c in _conditions(manifest) if c.get("type") in ("Evicted", "Preempted") and c.get("status") == "True"]


def requeued(manifest: dict[str, Any], message: str) -> Condition:
    """Kueue's ``SetRequeuedCondition`` as its job reconciler clears an evicted workload's admission:
    the eviction's reason and message, True only for a preemption (the workload queues again at
    once; a drained or deactivated one waits for whatever stopped it)."""
    reason = next((c.get("reason") for c in _conditions(manifest)
                   if c.get("type") == "Evicted" and c.get("status") == "True"), None)
    reason = reason if isinstance(reason, str) and reason else "Preempted"
    return Condition("Requeued", "True" if reason == "Preempted" else "False", reason, message)


_RESTARTED = {"ClusterQueueStopped": ("ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped"),
              "LocalQueueStopped": ("LocalQueueRestarted", "The LocalQueue was restarted after being stopped"),
              DEACTIVATED: ("Reactivated", "The workload was reactivated")}


def restarted(manifest: dict[str, Any], waits: Condition | None = None) -> list[Condition]:
    """A drained workload whose queue runs again, or a deactivated one active again (it is admitted,
    or ``waits`` for something other than a queue or its own deactivation): Kueue's workload
    controller turns its ``Requeued`` condition on, naming the restart or the reactivation."""
    if waits is not None and waits.reason in (INADMISSIBLE, DEACTIVATED):
        return []
    for c in _conditions(manifest):
        if c.get("type") == "Requeued" and c.get("status") == "False" and c.get("reason") in _RESTARTED:
            return [Condition("Requeued", "True", *_RESTARTED[c["reason"]])]
    return []


def pending_condition(message: str) -> Condition:
    """The condition that says why a workload waits, as Kueue words it (:func:`kueue_condition`)."""
    reason, text = kueue_condition(message)
    if reason == DEACTIVATED:
        return Condition("Evicted", "True", reason, text)
    return Condition("QuotaReserved", "False", reason, text)


def already_shown(manifest: dict[str, Any], message: str) -> bool:
    """Whether the Workload already says why it waits, so nothing need be written: its condition for
    ``message`` is there as it would be written (a restart), or ``message`` is a deactivation and the
    workload is evicted already (Kueue's workload controller sets Evicted only if it is not on: a
    drain's reason, ``DeactivatedDueTo...``, is not overwritten)."""
    want = pending_condition(message)
    for c in _conditions(manifest):
        if c.get("type") != want.type or c.get("status") != want.status:
            continue
        if want.type == "Evicted" or (c.get("reason"), c.get("message")) == (want.reason, want.message):
            return True
    return False


def _conditions(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    status = manifest.get("status")
    listed = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []


def preemption_message(preemptor: Mapping[str, Any], reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """Kueue's ``preemptionMessage``: the Evicted and Preempted conditions' message of a victim."""
    meta = _metadata(preemptor)
    labels = meta.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    return (f"Preempted to accommodate a workload (UID: {meta.get('uid') or 'UNKNOWN'}, JobUID: "
            f"{labels.get(JOB_UID_LABEL) or 'UNKNOWN'}) due to {HUMAN_PREEMPTION_REASONS.get(reason, 'UNKNOWN')}; "
            f"preemptor path: {preemptor_path or 'UNKNOWN'}; preemptee path: {preemptee_path or 'UNKNOWN'}")


def priorities(preemptor: tuple[int, int], preemptee: tuple[int, int]) -> str:
    """Both workloads' (effective, boost) priorities, as Kueue's preemption Events give them."""
    return (f"preemptor effective priority: {preemptor[0]} (base: {preemptor[0] - preemptor[1]}, boost: "
            f"{preemptor[1]}); preemptee effective priority: {preemptee[0]} (base: {preemptee[0] - preemptee[1]}, "
            f"boost: {preemptee[1]})")


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}
