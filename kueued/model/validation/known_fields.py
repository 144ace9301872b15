"""The fields Kueue's v1beta2 CRDs declare: anything else is refused, as ``kubectl apply`` refuses it.

``kubectl`` validates fields strictly by default: against Kueue's CRDs a field their schema does
not declare (a v1beta1 ``spec.cohort`` in a v1beta2 ClusterQueue, a typo'd ``spec.queuename``)
is an error, ``unknown field "spec.cohort"``.  kueued read such an object without the field, so
the ClusterQueue quietly had no cohort and the Workload no queue: a scheduling decision the user
never asked for.  kueued's CRDs declare these same fields (:mod:`kueued.kube.crds`), so on a
cluster ``kubectl apply`` refuses such an object as it would against Kueue's; the daemon still
checks every object it reads (stored before, or written by a client without strict validation,
whose undeclared fields the API server drops), as ``simulate`` does.

:data:`FIELDS` lists, per kind and per object node (``a.b[]``: every item of list ``b``), the
fields Kueue's schema declares there, read from its v1beta2 CRDs (``config/components/crd/bases``)
plus the newer fields kueued knows Kueue has (``spec.concurrentAdmissionPolicy``,
``spec.preemptionGates``) and v1beta1's ``spec.admissionChecks`` of a ClusterQueue, which kueued
still reads.  A Workload's pod ``template`` is closed down to what quota is computed from: the
template, its PodSpec, each container and init container, their ``resources`` and the pod's, and
tolerations (Kubernetes' own fields, as ``kubernetes_asyncio``'s models list them: a test keeps
the lists in step).  A typo there (``resources.request``) otherwise made a workload that asks for
nothing, admitted without quota; against Kueue's CRDs, which carry the whole PodTemplateSpec
schema, kubectl refuses it.  Nodes not listed (``metadata``, ``status``, the rest of a pod
template, label maps, a TAS ``topologyRequest``) are open: checked by the kind's own rules, or not
kueued's to judge.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kueued.errors import FieldError

__all__ = ["FIELDS", "unknown_fields"]

_RESOURCE_GROUPS = {
    "spec.resourceGroups[]": ("coveredResources", "flavors"),
    "spec.resourceGroups[].flavors[]": ("name", "resources"),
    "spec.resourceGroups[].flavors[].resources[]": ("borrowingLimit", "lendingLimit", "name", "nominalQuota"),
}
_SELECTOR = ("matchExpressions", "matchLabels")
_TOLERATION = ("effect", "key", "operator", "tolerationSeconds", "value")
_RESOURCES = ("claims", "limits", "requests")
# Kubernetes' core/v1 PodSpec and Container (kubernetes_asyncio's V1PodSpec and V1Container attribute maps)
_POD_SPEC = (
    "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig", "dnsPolicy",
    "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork", "hostPID", "hostUsers",
    "hostname", "hostnameOverride", "imagePullSecrets", "initContainers", "nodeName", "nodeSelector", "os",
    "overhead", "preemptionPolicy", "priority", "priorityClassName", "readinessGates", "resourceClaims",
    "resources", "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates", "schedulingGroup",
    "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN", "shareProcessNamespace",
    "subdomain", "terminationGracePeriodSeconds", "tolerations", "topologySpreadConstraints", "volumes")
_CONTAINER = (
    "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "name", "ports",
    "readinessProbe", "resizePolicy", "resources", "restartPolicy", "restartPolicyRules", "securityContext",
    "startupProbe", "stdin", "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty",
    "volumeDevices", "volumeMounts", "workingDir")
_TEMPLATE = "spec.podSets[].template"
_SELECTOR_TERM = ("key", "operator", "values")

FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "ClusterQueue": {
        # admissionChecks: v1beta1's list, still read (kueued.model.validation.clusterqueue: not beside the strategy)
        "spec": ("admissionChecks", "admissionChecksStrategy", "admissionScope", "cohortName",
                 "concurrentAdmissionPolicy", "fairSharing", "flavorFungibility", "namespaceSelector", "preemption",
                 "queueingStrategy", "resourceGroups", "stopPolicy"),
        "spec.admissionChecksStrategy": ("admissionChecks",),
        "spec.admissionChecksStrategy.admissionChecks[]": ("name", "onFlavors"),
        "spec.admissionScope": ("admissionMode",),
        "spec.fairSharing": ("weight",),
        "spec.flavorFungibility": ("preference", "whenCanBorrow", "whenCanPreempt"),
        "spec.namespaceSelector": _SELECTOR,
        "spec.namespaceSelector.matchExpressions[]": _SELECTOR_TERM,
        "spec.preemption": ("borrowWithinCohort", "reclaimWithinCohort", "withinClusterQueue"),
        "spec.preemption.borrowWithinCohort": ("maxPriorityThreshold", "policy"),
        **_RESOURCE_GROUPS,
    },
    "Cohort": {
        "spec": ("fairSharing", "parentName", "resourceGroups"),
        "spec.fairSharing": ("weight",),
        **_RESOURCE_GROUPS,
    },
    "LocalQueue": {
        "spec": ("clusterQueue", "fairSharing", "stopPolicy"),
        "spec.fairSharing": ("weight",),
    },
    "ResourceFlavor": {
        "spec": ("nodeLabels", "nodeTaints", "resourceWeights", "tolerations", "topologyName"),
        "spec.nodeTaints[]": ("effect", "key", "timeAdded", "value"),
        "spec.tolerations[]": _TOLERATION,
    },
    "Workload": {
        "spec": ("active", "maximumExecutionTimeSeconds", "podSets", "preemptionGates", "priority",
                 "priorityClassRef", "queueName"),
        "spec.podSets[]": ("count", "minCount", "name", "template", "topologyRequest"),
        "spec.priorityClassRef": ("group", "kind", "name"),
        _TEMPLATE: ("metadata", "spec"),
        f"{_TEMPLATE}.spec": _POD_SPEC,
        f"{_TEMPLATE}.spec.containers[]": _CONTAINER,
        f"{_TEMPLATE}.spec.initContainers[]": _CONTAINER,
        f"{_TEMPLATE}.spec.containers[].resources": _RESOURCES,
        f"{_TEMPLATE}.spec.initContainers[].resources": _RESOURCES,
        f"{_TEMPLATE}.spec.resources": _RESOURCES,
        f"{_TEMPLATE}.spec.tolerations[]": _TOLERATION,
    },
}


def unknown_fields(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every field of ``obj`` below its ``spec`` that Kueue's schema does not declare, as kubectl names it."""
    nodes = FIELDS.get(str(obj.get("kind")))
    if not nodes or not isinstance(obj.get("spec"), Mapping):
        return []
    return [FieldError(path, f'unknown field "{path}"') for path in _walk(nodes, obj["spec"], "spec", "spec")]


def _walk(nodes: Mapping[str, tuple[str, ...]], value: Mapping[str, Any], node: str, path: str) -> Iterator[str]:
    known = nodes[node]
    for key, sub in value.items():
        if key not in known:
            yield f"{path}.{key}"
            continue
        child = f"{node}.{key}"
        if child in nodes and isinstance(sub, Mapping):
            yield from _walk(nodes, sub, child, f"{path}.{key}")
        elif f"{child}[]" in nodes and isinstance(sub, list):
            for i, item in enumerate(sub):
                if isinstance(item, Mapping):
                    yield from _walk(nodes, item, f"{child}[]", f"{path}.{key}[{i}]")
