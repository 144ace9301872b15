"""The Configuration's ``featureGates``, checked as Kueue's ``LoadAndValidateFeatureGates`` checks them.

Kueue hands the map to component-base's ``SetFromMap``, which refuses a locked gate set away
from its default, and stops there.  Only a map that loads is checked for dependencies: a gate
the map turns on needs the gates it builds on to be on too (as set, or by default), and a TAS
profile needs TopologyAwareScheduling.

Two leniencies, on purpose.  Kueue's own binary also refuses a gate name it does not know, and
checks the dependencies of gates that are on by default; but gate names come and go with every
release (``LendingLimit``, ``MultiplePreemptions``... are gone, new ones arrive), so a
Configuration written for another Kueue version, or a scenario ported from a unit test that
turns ``TopologyAwareScheduling`` off alone, would lose *every* setting it carries, fair sharing
included.  kueued reads a handful of these gates and ignores the rest, so it accepts names it
does not know and checks only the dependencies of gates the map itself turns on.

The gate list changes with every Kueue release; :data:`KNOWN_GATES` is one snapshot of
``pkg/features/kube_features.go`` (``defaultVersionedFeatureGates``, v0.20 development) with
each gate's default and maturity, plus component-base's ``AllAlpha``/``AllBeta`` and the
Koordinator gate kueued reads from the same map.  The dependencies are the ones
``pkg/config/validation.go`` checks with ``validateFeatureGateDependency``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kueued.model.koordinator import GATE_PARENT_QUOTA_PODS

from .fields import Errors, boolean, key, mapping

__all__ = ["KNOWN_GATES", "validate_feature_gates", "gates_of"]

_A, _B, _GA = "alpha", "beta", "ga"
KNOWN_GATES: Mapping[str, tuple[bool, str]] = {
    # Source: kubernetes-sigs/kueue pkg/features/kube_features.go (defaultVersionedFeatureGates);
    # name: (default, maturity).  Every gate kueued reads must stay here.
    "PartialAdmission": (True, _B),
    "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp": (False, _A),
    "FlavorFungibility": (True, _B),
    "VisibilityOnDemand": (True, _B),
    "DisableWaitForPodsReady": (False, _A),
    "PrioritySortingWithinCohort": (True, _B),
    "FairSharingPreemptWithinNominal": (True, _B),
    "FairSharingPrioritizeNonBorrowing": (True, _B),
    "MultiKueue": (True, _B),
    "MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster": (True, _B),
    "TopologyAwareScheduling": (True, _B),
    "LocalQueueMetrics": (True, _B),
    "TASProfileMixed": (True, _B),
    "AdmissionFairSharing": (True, _B),
    "TASFailedNodeReplacement": (True, _B),
    "ElasticJobsViaWorkloadSlices": (True, _B),
    "ElasticJobsViaWorkloadSlicesWithTAS": (False, _A),
    "TASFailedNodeReplacementFailFast": (True, _B),
    "TASReplaceNodeOnPodTermination": (True, _B),
    "SkipReassignmentForPodOwnedWorkloads": (True, _B),
    "TASReplaceNodeDueToNotReadyOverFixedTime": (False, "deprecated"),
    "ManagedJobsNamespaceSelectorAlwaysRespected": (True, _GA),
    "TASBalancedPlacement": (False, _A),
    "TASAssignmentsEncodingByHostnamePrefix": (True, _B),
    "KueueDRAIntegration": (True, _B),
    "KueueDRAIntegrationExtendedResource": (True, _B),
    "ReservedResourceNameValidation": (True, _B),
    "KueueDRARejectWorkloadsWhenDRADisabled": (True, _B),
    "KueueDRAIntegrationPartitionableDevices": (True, _B),
    "KueueDRAIntegrationConsumableCapacity": (False, _A),
    "MultiKueueAdaptersForCustomJobs": (True, _B),
    "WorkloadRequestUseMergePatch": (False, _A),
    "MultiKueueKubeConfigPathValidation": (True, _B),
    "ReclaimablePods": (True, _B),
    "MultiKueueClusterProfile": (False, _A),
    "FailureRecoveryPolicy": (False, _A),
    "TLSOptions": (True, _GA),
    "RemoveFinalizersWithStrictPatch": (True, _B),
    "TASReplaceNodeOnNodeTaints": (True, _B),
    "AssignQueueLabelsForPods": (True, _B),
    "TASMultiLayerTopology": (True, _B),
    "SchedulingEquivalenceHashing": (True, _B),
    "SchedulingEquivalenceHashingIgnorePodSetName": (True, _B),
    "CustomMetricLabels": (False, _A),
    "SparkApplicationIntegration": (False, _A),
    "MultiKueueOrchestratedPreemption": (False, _A),
    "PriorityBoost": (False, _A),
    "AdmissionGatedBy": (True, _B),
    "ShortWorkloadNames": (False, _A),
    "FastQuotaReleaseInPodIntegration": (False, _A),
    "RejectUpdatesToCQWithInvalidOnFlavors": (True, _B),
    "FinishOrphanedWorkloads": (True, _B),
    "MultiKueueIncrementalDispatcherConfig": (True, _B),
    "MultiKueueIncrementalDispatcherRespectConfigOrder": (True, _B),
    "ConcurrentAdmission": (False, _A),
    "QuotaCheckStrategy": (True, _B),
    "MetricForWorkloadCreationLatency": (True, _B),
    "TASRespectNodeAffinityPreferred": (False, _A),
    "MultiKueueManagerQuotaAutomation": (False, _A),
    "WorkloadIdentifierAnnotations": (True, _B),
    "WorkloadPriorityClassDefaulting": (True, _B),
    "MetricsForCohorts": (True, _B),
    "CleanupProvisioningRequestsOnEviction": (True, _B),
    "TASHandleOverlappingFlavors": (True, _B),
    "UnadmittedWorkloadsObservability": (True, _B),
    "TASRecomputeAssignmentWithinSchedulingCycle": (True, _B),
    "UnadmittedWorkloadsExplicitStatus": (False, _B),
    "DeferRayServiceFinalizationForRedisCleanup": (True, _B),
    "TASCacheNodeMatchResults": (True, _B),
    "TASCachingRemainingResources": (True, _B),
    "TASCacheTopologyTree": (True, _B),
    "SchedulerLibraryIntegration": (False, _A),
    "VectorizedResourceRequests": (True, _B),
    "WorkloadValidateResourcesAreNonNegative": (True, _B),
    "TASValidateWorkloadSliceSize": (True, _B),
    "WorkloadValidationForPodSetMetadata": (True, _B),
    "PrioritizePreemptorWorkloads": (False, _A),
    "LWSImmutableGroupSize": (True, _B),
    "FlavorFungibilityPreserveScanProgress": (True, _B),
    "SkipAncestorCheckForDeletedWorkloads": (True, _B),
    "MultiKueueRemoteSpecSync": (True, _B),
    "RecomputeAssignmentUponPreemptionTargetsOverlap": (True, _B),
    "PodIntegrationValidateGroupOwner": (True, _B),
    "ValidateRayAndSparkJobUpdates": (True, _B),
    "FairSharingReevaluatePreemptionCandidates": (False, _A),
    "DynamicQuotaOrchestration": (False, _A),
    # component-base's own: turn every alpha (beta) gate not named on or off
    "AllAlpha": (False, _A),
    "AllBeta": (False, _B),
    # Koordinator's (pkg/features), read by kueued from the same map: kueued.model.koordinator
    GATE_PARENT_QUOTA_PODS: (False, _A),
}
_LOCKED = frozenset({"ManagedJobsNamespaceSelectorAlwaysRespected", "TLSOptions"})  # LockToDefault
_TAS = "TopologyAwareScheduling"
_PROFILES = ("TASProfileMixed",)
_DEPENDENCIES: tuple[tuple[str, tuple[str, ...]], ...] = (  # validation.go, in its order
    ("TASHandleOverlappingFlavors", (_TAS,)),
    ("TASFailedNodeReplacement", (_TAS,)),
    ("TASFailedNodeReplacementFailFast", (_TAS, "TASFailedNodeReplacement")),
    ("TASReplaceNodeOnPodTermination", (_TAS, "TASFailedNodeReplacement")),
    ("TASReplaceNodeDueToNotReadyOverFixedTime", (_TAS, "TASFailedNodeReplacement")),
    ("TASBalancedPlacement", (_TAS,)),
    ("TASReplaceNodeOnNodeTaints", (_TAS,)),
    ("TASMultiLayerTopology", (_TAS,)),
    ("TASRespectNodeAffinityPreferred", (_TAS,)),
    ("UnadmittedWorkloadsExplicitStatus", ("UnadmittedWorkloadsObservability",)),
    ("ElasticJobsViaWorkloadSlicesWithTAS", ("ElasticJobsViaWorkloadSlices", _TAS)),
    ("KueueDRAIntegrationExtendedResource", ("KueueDRAIntegration",)),
    ("KueueDRAIntegrationPartitionableDevices", ("KueueDRAIntegration",)),
    ("KueueDRAIntegrationConsumableCapacity", ("KueueDRAIntegration",)),
)


def validate_feature_gates(errs: Errors, value: object) -> None:
    path = "featureGates"
    gates: dict[str, bool] = {}
    loads = True
    for name, raw in mapping(errs, value, path).items():
        enabled = boolean(errs, raw, key(path, str(name)))
        if enabled is None:
            loads = False
        elif name in _LOCKED and enabled != KNOWN_GATES[name][0]:
            errs.invalid(key(path, str(name)), enabled, f"cannot set feature gate {name} to "
                         f"{str(enabled).lower()}, feature is locked to {str(not enabled).lower()}")
            loads = False
        else:
            gates[str(name)] = enabled
    if not loads:
        return  # SetFromMap failed: Kueue checks nothing further
    on = _effective(gates)
    asked = {name for name, enabled in gates.items() if enabled}  # named on, in this map
    if any(p in asked for p in _PROFILES) and not on(_TAS):
        errs.invalid(path, sum(on(p) for p in _PROFILES), "cannot use a TAS profile with TAS disabled")
    for gate, needs in _DEPENDENCIES:
        if gate in asked:
            for dep in needs:
                if not on(dep):
                    errs.invalid(path, gate, f"{gate} requires {dep} to be enabled")


def gates_of(value: object) -> Callable[[str], bool]:
    """Whether a gate is on under a Configuration's ``featureGates`` (its well-formed entries)."""
    listed = value if isinstance(value, dict) else {}
    return _effective({str(k): v for k, v in listed.items() if isinstance(v, bool)})


def _effective(gates: Mapping[str, bool]) -> Callable[[str], bool]:
    """component-base's ``Enabled``: as set, else AllAlpha/AllBeta for that maturity, else the default."""
    def on(gate: str) -> bool:
        if gate in gates:
            return gates[gate]
        default, maturity = KNOWN_GATES.get(gate, (False, _A))
        if maturity == _A and "AllAlpha" in gates:
            return gates["AllAlpha"]
        if maturity == _B and "AllBeta" in gates:
            return gates["AllBeta"]
        return default
    return on
