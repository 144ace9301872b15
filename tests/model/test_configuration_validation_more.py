"""Configuration rules ported from Kueue's ``pkg/config/validation.go`` and its tests
(TestValidate, TestLoadAndValidateFeatureGates, TestValidateDeviceClassMappings): ``tls``,
MultiKueue's ClusterProfile and incremental dispatcher, device class mappings, feature gate
names and dependencies, external frameworks that are built-ins, and unknown nested fields.

Each case asserts the exact field paths refused, in order; the reasons are read where the
wording is the point.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueued.errors import FieldError
from kueued.model.koordinator import GATE_PARENT_QUOTA_PODS
from kueued.model.validation.configuration import validate_configuration
from kueued.model.validation.configuration_gates import KNOWN_GATES
from kueued.scheduling.fairsharing.gates import DEFAULTS as FAIR_SHARING_GATES
from kueued.world import World

Obj = dict[str, Any]

TAS_OFF = {"TopologyAwareScheduling": False, "TASHandleOverlappingFlavors": False, "TASFailedNodeReplacement": False,
           "TASFailedNodeReplacementFailFast": False, "TASReplaceNodeOnPodTermination": False,
           "TASReplaceNodeOnNodeTaints": False, "TASMultiLayerTopology": False, "TASProfileMixed": False}
PROVIDER: Obj = {"name": "test-provider", "execConfig": {"command": "test-command",
                                                         "apiVersion": "client.authentication.k8s.io/v1",
                                                         "interactiveMode": "Never"}}
ACCESS = "multiKueue.clusterProfile.accessProviders"
DCM = "resources.deviceClassMappings"
IDC = "multiKueue.incrementalDispatcherConfig"


def configuration(**fields: Any) -> Obj:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", **fields}


def errors(**fields: Any) -> list[FieldError]:
    return validate_configuration(configuration(**fields), None)


def paths(**fields: Any) -> list[str]:
    return [e.path for e in errors(**fields)]


def provider(**exec_config: Any) -> Obj:
    return {"name": "test-provider", "execConfig": {**PROVIDER["execConfig"], **exec_config}}


def mapping(name: str, *classes: str) -> Obj:
    return {"name": name, "deviceClassNames": list(classes)}


# ---- tls -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("tls", "expected"), [
    pytest.param({"minVersion": "VersionTLS12", "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]}, [],
                 id="tls12-with-suites"),
    pytest.param({"minVersion": "VersionTLS13"}, [], id="tls13"),
    pytest.param({}, [], id="empty-is-tls12"),
    pytest.param({"cipherSuites": ["TLS_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"]}, [],
                 id="insecure-and-legacy-names-parse"),
    pytest.param({"minVersion": "VersionTLS12", "curvePreferences": [29, 23, 4588]}, [], id="curves"),
    pytest.param({"minVersion": "VersionTLS13", "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]},
                 ["tls.cipherSuites"], id="tls13-with-suites"),
    pytest.param({"minVersion": "DUMMY", "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]}, ["tls"],
                 id="bad-version"),
    pytest.param({"minVersion": "VersionTLS11"}, ["tls"], id="tls11"),
    pytest.param({"minVersion": "DUMMY", "cipherSuites": ["DUMMY"]}, ["tls"], id="bad-version-and-suite"),
    pytest.param({"minVersion": "VersionTLS12", "cipherSuites": ["TLS_NOPE"]}, ["tls"], id="bad-suite"),
    pytest.param({"minVersion": "VersionTLS12", "curvePreferences": [0]}, ["tls"], id="curve-zero"),
    pytest.param({"curvePreferences": [23, 23]}, ["tls"], id="curve-twice"),
    pytest.param({"curvePreferences": [99]}, ["tls"], id="curve-unknown-to-go"),
    pytest.param({"minVersion": "VersionTLS13", "cipherSuites": ["DUMMY"]}, ["tls"], id="parse-error-first"),
    pytest.param({"minVersion": 12}, ["tls.minVersion"], id="version-not-a-string"),
    pytest.param({"minVersion": "VersionTLS12", "curves": [23]}, ["tls.curves"], id="unknown-field"),
])
def test_tls(tls: Obj, expected: list[str]) -> None:
    assert paths(tls=tls) == expected


def test_a_tls_parse_error_names_each_bad_part() -> None:
    [error] = errors(tls={"minVersion": "DUMMY", "cipherSuites": ["DUMMY"]})
    assert 'unknown tls version "DUMMY"' in error.reason
    assert "Cipher suite DUMMY not supported or doesn't exist" in error.reason


# ---- MultiKueue ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("multi_kueue", "expected"), [
    pytest.param({"clusterProfile": {"accessProviders": [provider(env=[{"name": "V", "value": "v"}])]}}, [],
                 id="valid-access-provider"),
    pytest.param({"clusterProfile": {"credentialsProviders": [PROVIDER]}}, [], id="valid-deprecated-provider"),
    pytest.param({"clusterProfile": {"accessProviders": [{**PROVIDER, "name": ""}]}}, [f"{ACCESS}.name"],
                 id="empty-name"),
    pytest.param({"clusterProfile": {"accessProviders": [provider(command="")]}}, [f"{ACCESS}.execConfig.command"],
                 id="empty-command"),
    pytest.param({"clusterProfile": {"accessProviders": [{"name": "p", "execConfig": {
        "command": "c", "apiVersion": "client.authentication.k8s.io/v1"}}]}},
                 [f"{ACCESS}.execConfig.interactiveMode"], id="interactive-mode-missing"),
    pytest.param({"clusterProfile": {"accessProviders": [provider(apiVersion="")]}},
                 [f"{ACCESS}.execConfig.apiVersion"], id="empty-api-version"),
    pytest.param({"clusterProfile": {"accessProviders": [provider(env=[{"value": "v"}])]}},
                 [f"{ACCESS}.execConfig.env.name"], id="env-without-name"),
    pytest.param({"clusterProfile": {"accessProviders": [provider(interactiveMode="Invalid")]}},
                 [f"{ACCESS}.execConfig.interactiveMode"], id="bad-interactive-mode"),
    pytest.param({"clusterProfile": {"accessProviders": [PROVIDER], "credentialsProviders": [provider(command="")]}},
                 ["multiKueue.clusterProfile.credentialsProviders"], id="both-kinds-of-provider"),
    pytest.param({"clusterProfile": {"credentialsProviders": [provider(command="")]}},
                 ["multiKueue.clusterProfile.credentialsProviders.execConfig.command"], id="deprecated-checked-too"),
    pytest.param({"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                  "incrementalDispatcherConfig": {"stepSize": 2}}, [], id="incremental-step"),
    pytest.param({"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
                  "incrementalDispatcherConfig": {"stepSize": 2}}, [IDC], id="config-without-incremental"),
    pytest.param({"incrementalDispatcherConfig": {}}, [IDC], id="config-with-default-dispatcher"),
    pytest.param({"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                  "incrementalDispatcherConfig": {"stepSize": 0}}, [f"{IDC}.stepSize"], id="step-zero"),
    pytest.param({"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                  "incrementalDispatcherConfig": {"step": 2}}, [f"{IDC}.step"], id="idc-unknown-field"),
])
def test_multi_kueue(multi_kueue: Obj, expected: list[str]) -> None:
    assert paths(multiKueue=multi_kueue) == expected


def test_both_provider_lists_are_forbidden_and_only_the_access_providers_are_checked() -> None:
    [error] = errors(multiKueue={"clusterProfile": {"accessProviders": [PROVIDER],
                                                    "credentialsProviders": [provider(command="")]}})
    assert error.reason == "Forbidden: must not be specified when accessProviders is specified"


# ---- device class mappings -----------------------------------------------------------------------

@pytest.mark.parametrize(("mappings", "expected"), [
    pytest.param([mapping("whole-foo", "foo.com/device"), mapping("shared-bar", "bar.com/a", "bar.com/b")], [],
                 id="valid"),
    pytest.param([mapping("duplicate-name", "foo.com/device"), mapping("duplicate-name", "bar.com/device")],
                 [f"{DCM}[1].name"], id="duplicate-resource-name"),
    pytest.param([mapping("first-resource", "foo.com/device"), mapping("second-resource", "foo.com/device")],
                 [f"{DCM}[1].deviceClassNames[0]"], id="class-mapped-twice"),
    pytest.param([mapping("empty-devices")], [f"{DCM}[0].deviceClassNames"], id="no-classes"),
    pytest.param([mapping("r", "a.com/x", "a.com/x")], [f"{DCM}[0].deviceClassNames[1]"], id="class-twice-in-one"),
    pytest.param([mapping("Bad Name!", "a.com/x")], [f"{DCM}[0].name"], id="bad-resource-name"),
    pytest.param([mapping("r", "bad/class/name")], [f"{DCM}[0].deviceClassNames[0]"], id="bad-class-name"),
    pytest.param([mapping("r", *(f"c{i}.com/d" for i in range(9)))], [f"{DCM}[0].deviceClassNames"],
                 id="nine-classes"),
    pytest.param([mapping(f"r{i}", f"c{i}.com/d") for i in range(17)], [DCM], id="seventeen-mappings"),
    pytest.param([{**mapping("r", "a.com/x"), "classes": []}], [f"{DCM}[0].classes"], id="unknown-field"),
])
def test_device_class_mappings(mappings: list[Obj], expected: list[str]) -> None:
    assert paths(resources={"deviceClassMappings": mappings}) == expected


def counted(name: str, counter: str) -> Obj:
    return {**mapping(name, "mig.nvidia.com"), "sources": [{"counter": {
        "name": counter, "driver": "gpu.nvidia.com",
        "deviceSelector": {"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}}}]}


def test_a_device_class_may_back_two_resources_that_count_different_counters() -> None:
    assert paths(resources={"deviceClassMappings": [counted("gpu.memory", "memory"),
                                                    counted("gpu.compute", "compute")]}) == []
    assert paths(resources={"deviceClassMappings": [counted("gpu.memory", "memory"),
                                                    counted("gpu.memory2", "memory")]}) == [
        f"{DCM}[1].deviceClassNames[0]"]


def test_the_conflict_names_the_first_resource() -> None:
    [error] = errors(resources={"deviceClassMappings": [mapping("first-resource", "foo.com/device"),
                                                        mapping("second-resource", "foo.com/device")]})
    assert error.reason.endswith("device class already mapped to resource first-resource")


# ---- feature gates -------------------------------------------------------------------------------

@pytest.mark.parametrize(("gates", "expected"), [
    pytest.param({"ElasticJobsViaWorkloadSlicesWithTAS": True, "TopologyAwareScheduling": True,
                  "ElasticJobsViaWorkloadSlices": True, "TASProfileMixed": False}, [], id="elastic-tas-valid"),
    pytest.param({"NoSuchKueueGate": True, "LendingLimit": False}, [], id="unknown-accepted"),  # module notes
    pytest.param({"PartialAdmission": "yes"}, ["featureGates[PartialAdmission]"], id="not-a-bool"),
    pytest.param({"TLSOptions": False}, ["featureGates[TLSOptions]"], id="locked"),
    pytest.param({"TLSOptions": True}, [], id="locked-to-its-default"),
    pytest.param({**TAS_OFF, "TASProfileMixed": True}, ["featureGates"], id="tas-profile-without-tas"),
    pytest.param({**TAS_OFF, "TASFailedNodeReplacement": True}, ["featureGates"],
                 id="failed-node-replacement-without-tas"),
    pytest.param({"ElasticJobsViaWorkloadSlicesWithTAS": True, "ElasticJobsViaWorkloadSlices": False},
                 ["featureGates"], id="elastic-tas-without-elastic"),
    pytest.param({"KueueDRAIntegrationExtendedResource": True, "KueueDRAIntegration": False,
                  "KueueDRAIntegrationPartitionableDevices": False}, ["featureGates"], id="dra-extended-without-dra"),
    pytest.param({"TopologyAwareScheduling": False}, [], id="tas-off-alone-is-accepted"),  # module notes
    pytest.param({"AllAlpha": True}, [], id="all-alpha"),
    pytest.param({"TLSOptions": False, "TASProfileMixed": True, "TopologyAwareScheduling": False},
                 ["featureGates[TLSOptions]"], id="a-map-that-does-not-load-is-not-checked-further"),
])
def test_feature_gates(gates: Obj, expected: list[str]) -> None:
    assert paths(featureGates=gates) == expected


def test_dependency_errors_name_the_gate_and_what_it_needs() -> None:
    reasons = [e.reason for e in errors(featureGates={**TAS_OFF, "TASProfileMixed": True,
                                                      "TASHandleOverlappingFlavors": True,
                                                      "ElasticJobsViaWorkloadSlicesWithTAS": True,
                                                      "ElasticJobsViaWorkloadSlices": False})]
    assert reasons == [
        "Invalid value: 1: cannot use a TAS profile with TAS disabled",
        'Invalid value: "TASHandleOverlappingFlavors": TASHandleOverlappingFlavors requires '
        "TopologyAwareScheduling to be enabled",
        'Invalid value: "ElasticJobsViaWorkloadSlicesWithTAS": ElasticJobsViaWorkloadSlicesWithTAS requires '
        "ElasticJobsViaWorkloadSlices to be enabled",
        'Invalid value: "ElasticJobsViaWorkloadSlicesWithTAS": ElasticJobsViaWorkloadSlicesWithTAS requires '
        "TopologyAwareScheduling to be enabled",
    ]


def test_every_gate_kueued_reads_is_accepted() -> None:
    read = {*FAIR_SHARING_GATES, GATE_PARENT_QUOTA_PODS, "TASValidateWorkloadSliceSize", "PartialAdmission",
            "WorkloadValidationForPodSetMetadata"}
    assert read <= set(KNOWN_GATES)
    assert paths(featureGates={gate: True for gate in read}) == []


# ---- integrations, unknown nested fields ---------------------------------------------------------

@pytest.mark.parametrize(("integrations", "expected"), [
    pytest.param({"frameworks": ["batch/job"], "externalFrameworks": ["Job.v1.batch"]},
                 ["integrations.externalFrameworks[0]"], id="external-is-the-built-in-job"),
    pytest.param({"frameworks": ["deployment"], "externalFrameworks": ["Deployment.v1.apps"]},
                 ["integrations.externalFrameworks[0]"], id="external-is-the-built-in-deployment"),
    pytest.param({"frameworks": ["pod"], "externalFrameworks": ["Job.v1.batch"]}, [],
                 id="built-in-not-enabled"),
    pytest.param({"externalFrameworks": ["Foo.v1.example.com", "Foo.v1.example.com"]},
                 ["integrations.externalFrameworks[1]"], id="external-twice"),
])
def test_external_frameworks(integrations: Obj, expected: list[str]) -> None:
    assert paths(integrations=integrations) == expected


@pytest.mark.parametrize(("fields", "expected"), [
    pytest.param({"waitForPodsReady": {"enable": True, "timeout": "5m"}}, ["waitForPodsReady.enable"],
                 id="v1beta1-enable"),
    pytest.param({"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffLimit": 1}}},
                 ["waitForPodsReady.requeuingStrategy.backoffLimit"], id="requeuing"),
    pytest.param({"internalCertManagement": {"enable": False, "webhookServiceName": "0-invalid"}}, [],
                 id="disabled-certs-not-checked"),
    pytest.param({"internalCertManagement": {"enabled": True}}, ["internalCertManagement.enabled"],
                 id="certs"),
    pytest.param({"objectRetentionPolicies": {"workloads": {"afterFinish": "1h"}}},
                 ["objectRetentionPolicies.workloads.afterFinish"], id="retention"),
    pytest.param({"multiKueue": {"clusterProfile": {"accessProviders": [{**PROVIDER, "exec": {}}]}}},
                 [f"{ACCESS}[0].exec"], id="provider"),
])
def test_unknown_nested_fields(fields: Obj, expected: list[str]) -> None:
    assert paths(**fields) == expected


def test_v1beta1_keeps_wait_for_pods_ready_enable() -> None:
    doc = {**configuration(waitForPodsReady={"enable": True, "timeout": "5m"}),
           "apiVersion": "config.kueue.x-k8s.io/v1beta1"}
    assert validate_configuration(doc, None) == []


def test_a_refused_configuration_leaves_kueue_s_defaults_in_force() -> None:
    world = World()
    world.apply(configuration(fairSharing={"preemptionStrategies": ["LessThanInitialShare"]},
                              tls={"minVersion": "VersionTLS13", "cipherSuites": ["TLS_AES_128_GCM_SHA256"]}))
    assert list(world.rejected) == ["Configuration"]
    assert not world.settings.fair_sharing
