"""Kueue's manager Configuration (``config.kueue.x-k8s.io``) as msgspec Structs: the fields kueued reads,
decoded as :mod:`kueued.model.api` decodes every kind (validation,
``kueued.model.validation.configuration``, runs on the raw manifest first)."""

from __future__ import annotations

import msgspec

from kueued.model.api_base import ObjectMeta, Quantity, _Base

__all__ = ["AdmissionFairSharingConfig", "Configuration", "ElasticQuotaConfig", "FairSharingConfig",
           "ObjectRetentionPolicies", "RequeuingStrategy", "ResourcesConfig", "ResourceTransformation",
           "WaitForPodsReady", "WorkloadRetention"]


class FairSharingConfig(_Base):
    enable: bool = True
    preemption_strategies: list[str] = []


class AdmissionFairSharingConfig(_Base):
    usage_half_life_time: str = ""
    usage_sampling_interval: str = ""
    resource_weights: dict[str, float] = {}


class ElasticQuotaConfig(_Base):
    """kueued's own section: Koordinator's ElasticQuotaArgs that kueued honours."""

    delay_evict_time: str = ""  # a Go duration; "" keeps Koordinator's 120s
    monitor_all_quotas: bool | None = None  # forced recycling on or off; None: the host's default


class RequeuingStrategy(_Base):
    timestamp: str = "Eviction"


class WaitForPodsReady(_Base):
    requeuing_strategy: RequeuingStrategy | None = None


class ResourceTransformation(_Base):
    """Kueue's ``resources.transformations[]``: each unit of ``input`` counts as ``outputs``."""

    input: str = ""
    strategy: str = "Retain"  # Retain: the input counts too; Replace: only the outputs do
    outputs: dict[str, Quantity] = {}
    multiply_by: str = ""  # the input's amount is first multiplied by this resource's (newer Kueue)


class ResourcesConfig(_Base):
    exclude_resource_prefixes: list[str] = []
    transformations: list[ResourceTransformation] = []


class WorkloadRetention(_Base):
    """Kueue's ``objectRetentionPolicies.workloads`` (Go durations; absent: kept for good)."""

    after_finished: str | None = None
    after_deactivated_by_kueue: str | None = None


class ObjectRetentionPolicies(_Base):
    workloads: WorkloadRetention | None = None


class Configuration(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    resources: ResourcesConfig | None = None
    wait_for_pods_ready: WaitForPodsReady | None = None
    fair_sharing: FairSharingConfig | None = None
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    elastic_quota: ElasticQuotaConfig | None = None
    object_retention_policies: ObjectRetentionPolicies | None = None
    feature_gates: dict[str, bool] = {}
