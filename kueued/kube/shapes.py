"""Wire shapes the CRDs need that :mod:`kueued.model.api` does not hold, as msgspec Structs.

The model holds what kueued *reads* to schedule.  Two more shapes reach the API server:

- the **status** kueued writes back, as Kueue spells it (``apis/kueue/v1beta2``): a
  Workload's admission and conditions, a ClusterQueue's counts and per-flavor usage, a
  Cohort's fair share; and Koordinator's ElasticQuota ``status.used``.  The model keeps
  only the parts scheduling reads (a Workload's admission, a LocalQueue's fair-sharing
  usage), and these Structs reuse them.
- Koordinator's **ElasticQuota**, which the model reads as a plain manifest
  (:mod:`kueued.model.koordinator`) so its webhook rules see exactly what was applied.

:mod:`kueued.kube.crds` generates the CRD schemas from these as from the model; the
status writer encodes the same Structs, so what kueued writes is what its schema admits.
Each status also preserves fields it does not name (Kueue's ``requeueState``,
``admissionChecks``, ...): a cluster where Kueue ran before keeps them.
"""

from __future__ import annotations

import msgspec

from kueued.model import api

__all__ = [
    "Condition", "ResourceUsage", "FlavorUsage", "FairSharingStatus", "PodSetRequest", "SchedulingStats",
    "SchedulingStatsEviction", "WorkloadStatus",
    "ClusterQueueStatus", "CohortStatus", "LocalQueueStatus", "ElasticQuotaSpec",
    "ElasticQuotaStatus", "ElasticQuota",
]


class _Shape(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    pass


class Condition(_Shape):
    """metav1.Condition, whole: ``observedGeneration`` says which spec a condition judged."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class ResourceUsage(_Shape):
    name: str
    total: api.Quantity = "0"
    borrowed: api.Quantity | None = None


class FlavorUsage(_Shape):
    name: str
    resources: list[ResourceUsage] = []


class FairSharingStatus(_Shape):
    weighted_share: int = 0


class PodSetRequest(_Shape):
    name: str
    resources: dict[str, api.Quantity] = {}


class SchedulingStatsEviction(_Shape):
    reason: str
    underlying_cause: str = ""
    count: int = 0


class SchedulingStats(_Shape):
    evictions: list[SchedulingStatsEviction] = []


class WorkloadStatus(_Shape):
    admission: api.Admission | None = None
    conditions: list[Condition] = []
    reclaimable_pods: list[api.ReclaimablePod] = []  # written by a job integration, read by the scheduler
    accumulated_past_execution_time_seconds: int | None = None  # what earlier admissions ran (KEP-3125)
    resource_requests: list[PodSetRequest] = []  # a pending workload's requests, per pod set
    scheduling_stats: SchedulingStats | None = None  # evictions counted by reason


class ClusterQueueStatus(_Shape):
    conditions: list[Condition] = []
    pending_workloads: int | None = None
    reserving_workloads: int | None = None
    admitted_workloads: int | None = None
    flavors_reservation: list[FlavorUsage] = []
    flavors_usage: list[FlavorUsage] = []
    fair_sharing: FairSharingStatus | None = None


class CohortStatus(_Shape):
    conditions: list[Condition] = []
    fair_sharing: FairSharingStatus | None = None


class LocalQueueStatus(_Shape):
    conditions: list[Condition] = []
    pending_workloads: int | None = None
    reserving_workloads: int | None = None
    admitted_workloads: int | None = None
    flavors_reservation: list[FlavorUsage] = []
    flavors_usage: list[FlavorUsage] = []
    fair_sharing: api.LocalQueueFairSharingStatus | None = None


# --- Koordinator's ElasticQuota (scheduling.sigs.k8s.io/v1alpha1) ---------------------------------

class ElasticQuotaSpec(_Shape):
    min: dict[str, api.Quantity] = {}
    max: dict[str, api.Quantity] = {}


class ElasticQuotaStatus(_Shape):
    used: dict[str, api.Quantity] = {}
    conditions: list[Condition] = []  # kueued's word on an ElasticQuota its webhook rules refused


class ElasticQuota(_Shape):
    metadata: api.ObjectMeta
    spec: ElasticQuotaSpec = msgspec.field(default_factory=ElasticQuotaSpec)
    status: ElasticQuotaStatus = msgspec.field(default_factory=ElasticQuotaStatus)
