"""How Kueue words a waiting Workload's ``QuotaReserved=False`` condition.

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

__all__ = ["PENDING", "INADMISSIBLE", "ADMISSION_GATED", "DEACTIVATED", "kueue_condition"]

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
