"""Kueue's manager Configuration (``config.kueue.x-k8s.io/v1beta2``).

Kueue refuses to start on a Configuration that does not decode strictly or that fails
``pkg/config/validation.go``; kueued instead refuses the object and keeps Kueue's
defaults.  Validation runs *after* defaulting (``apis/config/v1beta2/defaults.go``), which
is why some checks cannot fire here: an absent ``usageSamplingInterval`` becomes 5m, an
absent ``managedJobsNamespaceSelector`` becomes the safe default that excludes
``kube-system`` and Kueue's own namespace, absent integrations become ``batch/job``.

Rules kept: strict decoding of the top level and of the fair-sharing sections; the
supported ``preemptionStrategies`` sequences (and, new in v1beta2, that they must be
given); non-negative durations and weights; wait-for-pods-ready requeuing bounds; known
integration frameworks; resource transformations; the namespace selector must not reach
``kube-system`` or Kueue's namespace; internal cert names; MultiKueue durations and
origin, ClusterProfile access providers and the incremental dispatcher's settings; device
class mappings; visibility server address; ``tls`` (:mod:`.configuration_tls`); feature gate
names and dependencies (:mod:`.configuration_gates`).  Kueue decodes the file strictly
(``pkg/config/config.go``: ``serializer.EnableStrict``), so an unknown field is refused in the
sections whose field sets are small and settled (wait-for-pods-ready, internal certs, object
retention, the MultiKueue sub-sections, device class mappings); the larger sections that
gain fields release by release (``integrations``, ``resources``, ``multiKueue`` itself,
``visibilityServer``) are left open rather than risk refusing a field a newer Kueue accepts.

kueued adds one section of its own, ``elasticQuota`` (Koordinator's ElasticQuotaArgs that
it honours): ``delayEvictTime``, the forced recycling delay, a non-negative duration
(default 120s), and ``monitorAllQuotas``, whether forced recycling runs at all (a boolean).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from kueued.errors import FieldError

from .configuration_dra import device_class_mappings
from .configuration_gates import gates_of, validate_feature_gates
from .configuration_multikueue import cluster_profile, incremental_dispatcher
from .configuration_strict import strict
from .configuration_tls import validate_tls
from .fields import Errors, boolean, child, enum, index, integer, key, mapping, sequence, string
from .names import (
    dns1035_label_errors,
    dns_subdomain_errors,
    label_selector,
    label_value_errors,
    quantity,
    selector_matches,
)

__all__ = ["validate_configuration", "parse_duration"]

_TOP_LEVEL = frozenset({
    "apiVersion", "kind", "namespace", "webhook", "leaderElection", "metrics", "health",
    "pprofBindAddress", "controller", "tls", "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector", "internalCertManagement", "waitForPodsReady", "clientConnection",
    "integrations", "multiKueue", "fairSharing", "admissionFairSharing", "resources", "featureGates",
    "objectRetentionPolicies", "visibilityServer",
    "elasticQuota",  # kueued's own: Koordinator's ElasticQuotaArgs it honours
})
_ELASTIC_QUOTA = frozenset({"delayEvictTime", "monitorAllQuotas"})
_FAIR_SHARING = frozenset({"preemptionStrategies"})
_ADMISSION_FAIR_SHARING = frozenset({"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"})
_STRATEGY_SETS = (
    ("LessThanOrEqualToFinalShare",),
    ("LessThanInitialShare",),
    ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
)
_FRAMEWORK_KINDS = {  # each built-in framework's job type as Kind.version.group (jobframework's JobType)
    "batch/job": "Job.v1.batch", "kubeflow.org/mpijob": "MPIJob.v2beta1.kubeflow.org",
    "ray.io/rayjob": "RayJob.v1.ray.io", "ray.io/rayservice": "RayService.v1.ray.io",
    "ray.io/raycluster": "RayCluster.v1.ray.io", "jobset.x-k8s.io/jobset": "JobSet.v1alpha2.jobset.x-k8s.io",
    "kubeflow.org/paddlejob": "PaddleJob.v1.kubeflow.org", "kubeflow.org/pytorchjob": "PyTorchJob.v1.kubeflow.org",
    "kubeflow.org/tfjob": "TFJob.v1.kubeflow.org", "kubeflow.org/xgboostjob": "XGBoostJob.v1.kubeflow.org",
    "kubeflow.org/jaxjob": "JAXJob.v1.kubeflow.org",
    "trainer.kubeflow.org/trainjob": "TrainJob.v1alpha1.trainer.kubeflow.org",
    "workload.codeflare.dev/appwrapper": "AppWrapper.v1beta2.workload.codeflare.dev", "pod": "Pod.v1.",
    "deployment": "Deployment.v1.apps", "statefulset": "StatefulSet.v1.apps",
    "leaderworkerset.x-k8s.io/leaderworkerset": "LeaderWorkerSet.v1.leaderworkerset.x-k8s.io",
    "sparkoperator.k8s.io/sparkapplication": "SparkApplication.v1beta2.sparkoperator.k8s.io",
}
_FRAMEWORKS = tuple(_FRAMEWORK_KINDS)
_WAIT_FOR_PODS_READY = frozenset({"timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"})
_REQUEUING = frozenset({"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"})
_CERTS = frozenset({"enable", "webhookServiceName", "webhookSecretName"})
_DURATION = re.compile(r"^[-+]?(\d*\.?\d*(ns|us|µs|μs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d*\.?\d*)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_NEGATIVE = "must be greater than or equal to 0"


def parse_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` ("1h30m", "500ms", "-2s", "0"), in seconds."""
    if text in ("0", "+0", "-0"):
        return 0.0
    if not _DURATION.match(text) or not any(ch.isdigit() for ch in text):
        raise ValueError(f'time: invalid duration "{text}"')
    sign = -1.0 if text.startswith("-") else 1.0
    total = 0.0
    for number, unit in _DURATION_PART.findall(text.lstrip("+-")):
        if number in ("", "."):
            raise ValueError(f'time: invalid duration "{text}"')
        total += float(number) * _UNIT_SECONDS[unit]
    return sign * total


def validate_configuration(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errs = Errors()
    strict(errs, obj, "", _TOP_LEVEL)
    namespace = string(errs, obj.get("namespace"), "namespace") or "kueue-system"
    boolean(errs, obj.get("manageJobsWithoutQueueName"), "manageJobsWithoutQueueName")
    _fair_sharing(errs, obj.get("fairSharing"))
    _admission_fair_sharing(errs, obj.get("admissionFairSharing"))
    _wait_for_pods_ready(errs, obj.get("waitForPodsReady"), v1beta1=str(obj.get("apiVersion", "")).endswith("/v1beta1"))
    _integrations(errs, obj.get("integrations"))
    _resources(errs, obj.get("resources"), gates_of(obj.get("featureGates")))
    _namespace_selector(errs, obj.get("managedJobsNamespaceSelector"), namespace)
    _internal_cert_management(errs, obj.get("internalCertManagement"))
    _multi_kueue(errs, obj.get("multiKueue"))
    _object_retention(errs, obj.get("objectRetentionPolicies"))
    _visibility_server(errs, obj.get("visibilityServer"))
    _elastic_quota(errs, obj.get("elasticQuota"))
    validate_tls(errs, obj.get("tls"))
    validate_feature_gates(errs, obj.get("featureGates"))
    return errs.items


def _duration(errs: Errors, value: object, path: str, *, positive: bool = False) -> float | None:
    text = string(errs, value, path)
    if text is None:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        errs.invalid(path, text, str(exc))
        return None
    if seconds < 0 or (positive and seconds == 0):
        errs.invalid(path, text, "must be greater than 0" if positive else _NEGATIVE)
    return seconds


def _fair_sharing(errs: Errors, value: object) -> None:
    if value is None:
        return
    fs = mapping(errs, value, "fairSharing")
    strict(errs, fs, "fairSharing", _FAIR_SHARING)
    path = "fairSharing.preemptionStrategies"
    strategies = sequence(errs, fs.get("preemptionStrategies"), path)
    # No default to fall back on: v1beta2's SetDefaults_Configuration leaves FairSharing alone
    # (v1beta1 filled both strategies, and only with ``enable: true``).  Kueue's Go tests that
    # use ``&config.FairSharing{}`` skip defaulting and validation altogether.
    if not strategies:
        errs.required(path, "must be specified")
    elif tuple(strategies) not in _STRATEGY_SETS:
        shown = "[" + " ".join(f'"{s}"' for s in strategies) + "]"
        options = ", ".join(f'"{",".join(s)}"' for s in _STRATEGY_SETS)
        errs.add(path, f"Unsupported value: {shown}: supported values: {options}")


def _admission_fair_sharing(errs: Errors, value: object) -> None:
    if value is None:
        return
    afs = mapping(errs, value, "admissionFairSharing")
    strict(errs, afs, "admissionFairSharing", _ADMISSION_FAIR_SHARING)
    _duration(errs, afs.get("usageHalfLifeTime"), "admissionFairSharing.usageHalfLifeTime")
    # Zero or absent is defaulted to 5m before validation; only a negative interval fails.
    _duration(errs, afs.get("usageSamplingInterval"), "admissionFairSharing.usageSamplingInterval")
    weights_path = "admissionFairSharing.resourceWeights"
    for resource, weight in mapping(errs, afs.get("resourceWeights"), weights_path).items():
        p = key(weights_path, str(resource))
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            errs.wrong_type(p, weight, "number")
        elif weight < 0:
            errs.invalid(p, weight, _NEGATIVE)


def _wait_for_pods_ready(errs: Errors, value: object, *, v1beta1: bool = False) -> None:
    if value is None:
        return
    path = "waitForPodsReady"
    wfpr = mapping(errs, value, path)
    # v1beta1's ``enable`` is gone in v1beta2 (present there means on), so strict decoding refuses it.
    strict(errs, wfpr, path, _WAIT_FOR_PODS_READY | ({"enable"} if v1beta1 else set()))
    _duration(errs, wfpr.get("timeout"), child(path, "timeout"))
    _duration(errs, wfpr.get("recoveryTimeout"), child(path, "recoveryTimeout"))
    boolean(errs, wfpr.get("blockAdmission"), child(path, "blockAdmission"))
    rs_path = child(path, "requeuingStrategy")
    strategy = mapping(errs, wfpr.get("requeuingStrategy"), rs_path)
    strict(errs, strategy, rs_path, _REQUEUING)
    enum(errs, strategy.get("timestamp"), child(rs_path, "timestamp"), ("Creation", "Eviction"))
    for field in ("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"):
        count = integer(errs, strategy.get(field), child(rs_path, field))
        if count is not None and count < 0:
            errs.invalid(child(rs_path, field), count, _NEGATIVE)


def _integrations(errs: Errors, value: object) -> None:
    if value is None:
        return
    integrations = mapping(errs, value, "integrations")
    path = "integrations.frameworks"
    # Compared as the API types they manage (Kueue keeps GVKs): an external ``Job.v1.batch`` is
    # the built-in ``batch/job``.
    seen: set[str] = set()
    for i, raw in enumerate(sequence(errs, integrations.get("frameworks"), path)):
        name = string(errs, raw, index(path, i))
        if name is None:
            continue
        if name not in _FRAMEWORK_KINDS:
            errs.not_supported(index(path, i), name, _FRAMEWORKS)
        elif _FRAMEWORK_KINDS[name] in seen:
            errs.duplicate(index(path, i), name)
        else:
            seen.add(_FRAMEWORK_KINDS[name])
    ext_path = "integrations.externalFrameworks"
    for i, raw in enumerate(sequence(errs, integrations.get("externalFrameworks"), ext_path)):
        name = string(errs, raw, index(ext_path, i))
        if name is None:
            continue
        if name.count(".") < 2:  # schema.ParseKindArg: Kind, version, then the group (dots and all)
            errs.invalid(index(ext_path, i), name, "must be format, 'Kind.version.group.com'")
        elif name in seen:
            errs.duplicate(index(ext_path, i), name)
        else:
            seen.add(name)


def _resources(errs: Errors, value: object, gate: Callable[[str], bool]) -> None:
    if value is None:
        return
    resources = mapping(errs, value, "resources")
    if gate("QuotaCheckStrategy"):  # BlockUndeclared (the default) or IgnoreUndeclared
        strategy = enum(errs, resources.get("quotaCheckStrategy"), "resources.quotaCheckStrategy",
                        ("BlockUndeclared", "IgnoreUndeclared"))
        if strategy == "IgnoreUndeclared" and resources.get("excludeResourcePrefixes"):
            errs.invalid("resources.excludeResourcePrefixes", resources["excludeResourcePrefixes"],
                         "is not allowed when quotaCheckStrategy is IgnoreUndeclared")
    path = "resources.transformations"
    inputs: set[str] = set()
    for i, raw in enumerate(sequence(errs, resources.get("transformations"), path)):
        p = index(path, i)
        transform = mapping(errs, raw, p)
        enum(errs, transform.get("strategy"), child(p, "strategy"), ("Retain", "Replace"))
        for output, amount in mapping(errs, transform.get("outputs"), child(p, "outputs")).items():
            quantity(errs, amount, key(child(p, "outputs"), str(output)))
        name = string(errs, transform.get("input"), child(p, "input"))
        if name is not None:
            if name in inputs:
                errs.duplicate(child(p, "input"), name)
            inputs.add(name)
    device_class_mappings(errs, resources.get("deviceClassMappings"), gate)


def _namespace_selector(errs: Errors, value: object, namespace: str) -> None:
    if value is None:
        return  # the default selector excludes kube-system and Kueue's namespace
    path = "managedJobsNamespaceSelector"
    before = len(errs.items)
    label_selector(errs, value, path)
    if len(errs.items) != before or not isinstance(value, dict):
        return
    for prohibited in dict.fromkeys(("kube-system", namespace)):
        if selector_matches(value, {"kubernetes.io/metadata.name": prohibited}):
            errs.invalid(path, value, f'should not match the "{prohibited}" namespace')


def _internal_cert_management(errs: Errors, value: object) -> None:
    if value is None:
        return
    path = "internalCertManagement"
    icm = mapping(errs, value, path)
    strict(errs, icm, path, _CERTS)
    if boolean(errs, icm.get("enable"), child(path, "enable")) is False:
        return
    service = string(errs, icm.get("webhookServiceName"), child(path, "webhookServiceName"))
    if service is not None and (msgs := dns1035_label_errors(service)):
        errs.invalid(child(path, "webhookServiceName"), service, ",".join(msgs))
    secret = string(errs, icm.get("webhookSecretName"), child(path, "webhookSecretName"))
    if secret is not None and (msgs := dns_subdomain_errors(secret)):
        errs.invalid(child(path, "webhookSecretName"), secret, ",".join(msgs))


def _multi_kueue(errs: Errors, value: object) -> None:
    if value is None:
        return
    path = "multiKueue"
    mk = mapping(errs, value, path)
    _duration(errs, mk.get("gcInterval"), child(path, "gcInterval"))
    _duration(errs, mk.get("workerLostTimeout"), child(path, "workerLostTimeout"))
    origin = string(errs, mk.get("origin"), child(path, "origin"))
    if origin is not None and (msgs := label_value_errors(origin)):
        errs.invalid(child(path, "origin"), origin, ",".join(msgs))
    for i, raw in enumerate(sequence(errs, mk.get("externalFrameworks"), child(path, "externalFrameworks"))):
        p = child(index(child(path, "externalFrameworks"), i), "name")
        name = string(errs, mapping(errs, raw, p).get("name"), p)
        if name is not None and name.count(".") < 2:
            errs.invalid(p, name, "must be in 'kind.version.group' format")
    cluster_profile(errs, mk.get("clusterProfile"))
    incremental_dispatcher(errs, mk)


def _object_retention(errs: Errors, value: object) -> None:
    if value is None:
        return
    path = "objectRetentionPolicies.workloads"
    policies = mapping(errs, value, "objectRetentionPolicies")
    strict(errs, policies, "objectRetentionPolicies", frozenset({"workloads"}))
    workloads = mapping(errs, policies.get("workloads"), path)
    strict(errs, workloads, path, frozenset({"afterFinished", "afterDeactivatedByKueue"}))
    for field in ("afterFinished", "afterDeactivatedByKueue"):
        _duration(errs, workloads.get(field), child(path, field))


def _visibility_server(errs: Errors, value: object) -> None:
    if value is None:
        return
    path = "visibilityServer"
    server = mapping(errs, value, path)
    address = string(errs, server.get("bindAddress"), child(path, "bindAddress"))
    if address is not None:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            errs.invalid(child(path, "bindAddress"), address, "must be a valid IP address")
    port = integer(errs, server.get("bindPort"), child(path, "bindPort"))
    if port is not None and not 1 <= port <= 65535:
        errs.invalid(child(path, "bindPort"), port, "must be a valid port number (1-65535)")


def _elastic_quota(errs: Errors, value: object) -> None:
    """kueued's ``elasticQuota`` section: ``delayEvictTime``, a non-negative Go duration, and
    ``monitorAllQuotas``, a boolean."""
    if value is None:
        return
    eq = mapping(errs, value, "elasticQuota")
    strict(errs, eq, "elasticQuota", _ELASTIC_QUOTA)
    _duration(errs, eq.get("delayEvictTime"), "elasticQuota.delayEvictTime")
    monitor = eq.get("monitorAllQuotas")
    if monitor is not None and not isinstance(monitor, bool):
        errs.invalid("elasticQuota.monitorAllQuotas", monitor, "must be a boolean")
