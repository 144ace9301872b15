"""API objects as msgspec Structs: Kueue ``kueue.x-k8s.io/v1beta2``, core v1, Kueue's Configuration.

These mirror the wire shape (camelCase on the wire, snake_case here) so a user's
manifests decode as they are and encode back unchanged in the fields we know.
Unknown fields are ignored on decode; validation (``kueued.model.validation``) runs on
the raw manifest first, so by the time a Struct is built the object is known good.

The Structs are not tracked by the garbage collector (``gc=False``): they are built only
by :func:`decode`, as trees of fresh values that cannot refer back to them, so they are
never part of a reference cycle, and a scheduler holding 50,000 Workloads would otherwise
have the collector walk some ten Structs per Workload on every pass.  Whoever builds one
by hand must keep it acyclic too (a cycle through an untracked Struct is never freed).

Quantities stay as their wire strings here; ``kueued.model.quantity.parse`` turns them
into exact milli-units where quota code needs numbers (``kueued.scheduling.workload``
and ``kueued.quota.build``).  Defaults are Kueue's API defaults (see
``apis/kueue/v1beta2/clusterqueue_types.go``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from kueued.model.api_base import ObjectMeta, Quantity, _Base
from kueued.model.api_config import (
    AdmissionFairSharingConfig,
    Configuration,
    ElasticQuotaConfig,
    FairSharingConfig,
    RequeuingStrategy,
    ResourcesConfig,
    ResourceTransformation,
    WaitForPodsReady,
)

# the Configuration's Structs live in api_config; they are read here too, as api.Configuration and the like
__all__ = ["ObjectMeta", "Quantity", "AdmissionFairSharingConfig", "Configuration", "ElasticQuotaConfig",
           "FairSharingConfig", "RequeuingStrategy", "ResourcesConfig", "ResourceTransformation", "WaitForPodsReady"]


class Taint(_Base):
    key: str
    value: str = ""
    effect: str = ""


class Toleration(_Base):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None  # NoExecute only; placement does not read it


# --- ResourceFlavor -----------------------------------------------------------------------------

class ResourceFlavorSpec(_Base):
    node_labels: dict[str, str] = {}
    node_taints: list[Taint] = []
    tolerations: list[Toleration] = []


class ResourceFlavor(_Base):
    metadata: ObjectMeta
    spec: ResourceFlavorSpec = msgspec.field(default_factory=ResourceFlavorSpec)


# --- quotas shared by ClusterQueue and Cohort ----------------------------------------------------

class ResourceQuota(_Base):
    name: str
    nominal_quota: Quantity = "0"
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(_Base):
    name: str
    resources: list[ResourceQuota] = []


class ResourceGroup(_Base):
    covered_resources: list[str] = []
    flavors: list[FlavorQuotas] = []


class FairSharing(_Base):
    weight: Quantity | None = None


# --- Cohort --------------------------------------------------------------------------------------

class CohortSpec(_Base):
    parent_name: str = ""
    resource_groups: list[ResourceGroup] = []
    fair_sharing: FairSharing | None = None


class Cohort(_Base):
    metadata: ObjectMeta
    spec: CohortSpec = msgspec.field(default_factory=CohortSpec)


# --- ClusterQueue --------------------------------------------------------------------------------

class LabelSelectorRequirement(_Base):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(_Base):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class BorrowWithinCohort(_Base):
    policy: str = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(_Base):
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class FlavorFungibility(_Base):
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


class AdmissionScope(_Base):
    admission_mode: str = ""


class AdmissionCheckStrategyRule(_Base):
    name: str = ""
    on_flavors: list[str] = []


class AdmissionChecksStrategy(_Base):
    admission_checks: list[AdmissionCheckStrategyRule] = []


class ClusterQueueSpec(_Base):
    cohort_name: str = ""
    resource_groups: list[ResourceGroup] = []
    queueing_strategy: str = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility = msgspec.field(default_factory=FlavorFungibility)
    preemption: ClusterQueuePreemption = msgspec.field(default_factory=ClusterQueuePreemption)
    fair_sharing: FairSharing | None = None
    admission_scope: AdmissionScope | None = None
    stop_policy: str = "None"
    admission_checks: list[str] = []  # v1beta1's list; v1beta2 names them in the strategy
    admission_checks_strategy: AdmissionChecksStrategy | None = None

    def admission_check_names(self) -> list[str]:
        rules = self.admission_checks_strategy.admission_checks if self.admission_checks_strategy else []
        return sorted({*self.admission_checks, *(r.name for r in rules)})


class ClusterQueue(_Base):
    metadata: ObjectMeta
    spec: ClusterQueueSpec = msgspec.field(default_factory=ClusterQueueSpec)


# --- LocalQueue ----------------------------------------------------------------------------------

class AdmissionFairSharingStatus(_Base):
    consumed_resources: dict[str, Quantity] = {}
    last_update: str | None = None


class LocalQueueFairSharingStatus(_Base):
    weighted_share: int = 0
    admission_fair_sharing_status: AdmissionFairSharingStatus | None = None


class LocalQueueStatus(_Base):
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueueSpec(_Base):
    cluster_queue: str = ""
    fair_sharing: FairSharing | None = None
    stop_policy: str = "None"


class LocalQueue(_Base):
    metadata: ObjectMeta
    spec: LocalQueueSpec = msgspec.field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus = msgspec.field(default_factory=LocalQueueStatus)


# --- WorkloadPriorityClass -------------------------------------------------------------------------

class WorkloadPriorityClass(_Base):
    metadata: ObjectMeta
    value: int = 0
    description: str = ""


# --- Workload ------------------------------------------------------------------------------------

class ResourceRequirements(_Base):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class Container(_Base):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)


class PodSpec(_Base):
    containers: list[Container] = []
    init_containers: list[Container] = []
    node_selector: dict[str, str] = {}
    affinity: dict[str, Any] | None = None
    tolerations: list[Toleration] = []
    overhead: dict[str, Quantity] = {}
    restart_policy: str = ""
    resources: ResourceRequirements | None = None  # pod-level resources (Kubernetes' PodLevelResources)


class PodTemplate(_Base):
    metadata: ObjectMeta | None = None
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class PodSet(_Base):
    name: str = "main"
    count: int = 1
    min_count: int | None = None
    template: PodTemplate = msgspec.field(default_factory=PodTemplate)


class PriorityClassRef(_Base):
    group: str = ""
    kind: str = ""
    name: str = ""


class WorkloadSpec(_Base):
    queue_name: str = ""
    pod_sets: list[PodSet] = []
    priority: int | None = None
    priority_class_ref: PriorityClassRef | None = None
    active: bool = True
    maximum_execution_time_seconds: int | None = None


class PodSetAssignment(_Base):
    name: str = "main"
    flavors: dict[str, str] = {}
    resource_usage: dict[str, Quantity] = {}
    count: int | None = None


class Admission(_Base):
    cluster_queue: str = ""
    pod_set_assignments: list[PodSetAssignment] = []


class Condition(_Base):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class ReclaimablePod(_Base):
    name: str = ""
    count: int = 0


class WorkloadStatus(_Base):
    admission: Admission | None = None
    conditions: list[Condition] = []
    reclaimable_pods: list[ReclaimablePod] = []
    accumulated_past_execution_time_seconds: int | None = None


class Workload(_Base):
    metadata: ObjectMeta
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)
    status: WorkloadStatus = msgspec.field(default_factory=WorkloadStatus)


# --- core v1 -------------------------------------------------------------------------------------

class Namespace(_Base):
    metadata: ObjectMeta


class NodeStatus(_Base):
    allocatable: dict[str, Quantity] = {}
    capacity: dict[str, Quantity] = {}


class Node(_Base):
    metadata: ObjectMeta
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class LimitRangeItem(_Base):
    type: str = ""
    max: dict[str, Quantity] = {}
    min: dict[str, Quantity] = {}
    default: dict[str, Quantity] = {}
    default_request: dict[str, Quantity] = {}
    max_limit_request_ratio: dict[str, Quantity] = {}


class LimitRangeSpec(_Base):
    limits: list[LimitRangeItem] = []


class LimitRange(_Base):
    """A namespace's LimitRange: Kueue defaults and checks Workloads' pod templates with it."""

    metadata: ObjectMeta
    spec: LimitRangeSpec = msgspec.field(default_factory=LimitRangeSpec)


KINDS: dict[str, type[_Base]] = {
    "ResourceFlavor": ResourceFlavor,
    "Cohort": Cohort,
    "ClusterQueue": ClusterQueue,
    "LocalQueue": LocalQueue,
    "WorkloadPriorityClass": WorkloadPriorityClass,
    "Workload": Workload,
    "Namespace": Namespace,
    "LimitRange": LimitRange,
    "Node": Node,
    "Configuration": Configuration,
}


IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
"""Kueue's finalizer on a ClusterQueue in use: deleted, it stays (terminating) until nothing is admitted in it."""


def decode(manifest: dict[str, Any]) -> _Base:
    """Build the Struct for a manifest of a known kind (raises msgspec.ValidationError)."""
    return msgspec.convert(manifest, KINDS[manifest["kind"]], strict=False)


def object_key(manifest: dict[str, Any]) -> str:
    """``Kind/name`` or ``Kind/namespace/name``: how scenarios and logs name an object."""
    kind = _text(manifest.get("kind", "?"))
    if kind == "Configuration":
        return "Configuration"
    meta = manifest.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    ns, name = meta.get("namespace"), _text(meta.get("name", ""))
    return f"{kind}/{_text(ns)}/{name}" if ns else f"{kind}/{name}"


def _text(value: Any) -> str:
    """A name as written, or a short stand-in for what is not a string (a key must never fail)."""
    if isinstance(value, str):
        return value
    return "?" if value is None else f"?{type(value).__name__}"
