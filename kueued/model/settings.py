"""What a Configuration switches on, as the engine reads it (the model layer: no logic).

Kueue's manager Configuration (``config.kueue.x-k8s.io``) and kueued's own ``elasticQuota``
section of it become one :class:`Settings`; :class:`~kueued.world.World` builds it from the
accepted Configuration, and every layer above the model reads it.
"""

from __future__ import annotations

import msgspec

from kueued.model import api

__all__ = ["Settings", "DEFAULT_DELAY_EVICT_TIME"]

DEFAULT_DELAY_EVICT_TIME = 120.0
"""Seconds a group stays over its runtime before forced recycling (ElasticQuotaArgs.delayEvictTime)."""


class Settings(msgspec.Struct, kw_only=True):
    """What Kueue's Configuration switches on (and kueued's ``elasticQuota`` section of it)."""

    fair_sharing: bool = False
    preemption_strategies: list[str] = msgspec.field(
        default_factory=lambda: ["LessThanOrEqualToFinalShare", "LessThanInitialShare"])
    admission_fair_sharing: api.AdmissionFairSharingConfig | None = None
    feature_gates: dict[str, bool] = msgspec.field(default_factory=dict)
    # Koordinator's ElasticQuotaArgs.delayEvictTime (Configuration ``elasticQuota.delayEvictTime``):
    # seconds a group stays above its runtime before forced recycling evicts (default 120).
    delay_evict_time: float = DEFAULT_DELAY_EVICT_TIME
    # ElasticQuotaArgs.monitorAllQuotas (``elasticQuota.monitorAllQuotas``): whether forced recycling
    # runs at all.  None leaves it to the host: off in the daemon (Koordinator's default), on in
    # ``simulate`` (the conformance scenarios that recycle say so in their notes, not in a Configuration)
    monitor_all_quotas: bool | None = None
    # waitForPodsReady.requeuingStrategy.timestamp: a workload evicted for PodsReadyTimeout or by an
    # admission check queues by its eviction time ("Eviction", Kueue's default), or by its creation
    requeue_by_eviction: bool = True
    # resources.excludeResourcePrefixes and resources.transformations: what a pod's requests count as
    excluded_prefixes: tuple[str, ...] = ()
    transformations: tuple[api.ResourceTransformation, ...] = ()
    # objectRetentionPolicies.workloads (kueued.kube.retention): seconds a finished Workload, and the Job
    # of a Workload Kueue deactivated, are kept before they are deleted; None keeps them for good
    retain_finished: float | None = None
    retain_deactivated: float | None = None
