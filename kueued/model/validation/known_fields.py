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
from typing import Any, NamedTuple

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


class _Node(NamedTuple):
    """One object node, compiled from :data:`FIELDS`: each declared field and the node it opens
    (``into``, for a mapping) or the node each item of it opens (``items``, for a list), else None."""
    into: dict[str, str | None]
    items: dict[str, str | None]


def _compile(nodes: Mapping[str, tuple[str, ...]]) -> dict[str, _Node]:
    return {node: _Node({key: f"{node}.{key}" if f"{node}.{key}" in nodes else None for key in known},
                        {key: f"{node}.{key}[]" if f"{node}.{key}[]" in nodes else None for key in known})
            for node, known in nodes.items()}


_COMPILED = {kind: _compile(nodes) for kind, nodes in FIELDS.items()}  # every Workload is walked: no strings built


def unknown_fields(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every field of ``obj`` below its ``spec`` that Kueue's schema does not declare, as kubectl names it."""
    nodes = _COMPILED.get(str(obj.get("kind")))
    if not nodes or not isinstance(obj.get("spec"), Mapping):
        return []
    return [FieldError(path, f'unknown field "{path}"') for path in _walk(nodes, obj["spec"], "spec", "spec")]


def _walk(nodes: Mapping[str, _Node], value: Mapping[str, Any], node: str, path: str) -> Iterator[str]:
    into, items = nodes[node]
    for key, sub in value.items():
        if key not in into:
            yield f"{path}.{key}"
            continue
        child = into[key]
        if child is not None and isinstance(sub, Mapping):
            yield from _walk(nodes, sub, child, f"{path}.{key}")
            continue
        child = items[key]
        if child is not None and isinstance(sub, list):
            for i, item in enumerate(sub):
                if isinstance(item, Mapping):
                    yield from _walk(nodes, item, child, f"{path}.{key}[{i}]")
