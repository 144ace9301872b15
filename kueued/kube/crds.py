"""The CustomResourceDefinitions of every kind kueued reads, with schemas generated from its Structs.

Names are Kueue's and Koordinator's own (group, version, plural, singular, shortNames,
scope, as in Kueue's ``config/components/crd/bases`` and Koordinator's
``scheduling.sigs.k8s.io_elasticquotas.yaml``), so kueued works on a cluster that runs
their CRDs, and a cluster that installs these can run their tools.  What differs is the
schema: one version (``v1beta2``; Koordinator's ``v1alpha1``), served and stored, whose
OpenAPI schema is generated (:mod:`kueued.kube.schema`) from the Structs kueued decodes
(:mod:`kueued.model.api`) and writes (:mod:`kueued.kube.shapes`).  It types what kueued
knows, keeps whole what Kueue declares and kueued does not type, and below ``spec`` declares
Kueue's fields and no others (``kubectl`` refuses a typo, as on a Kueue cluster), and it carries
Kueue's own field defaults (:data:`KUEUE_DEFAULTS`) and Kueue's CEL rules with the list limits
they need (:mod:`kueued.kube.crd_rules`), so the API server refuses what it refuses on a Kueue
cluster; Kueue's webhook rules stay in :mod:`kueued.model.validation`, which reports a refusal
as a condition.

Every CRD has the status subresource, so a status write (``workloads/status``) is its own
permission and a user's ``kubectl apply`` cannot overwrite what kueued reported.  Kueue's
ResourceFlavor and WorkloadPriorityClass have none; here they have one with no status
schema, which costs nothing and keeps every kind alike for the API layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kueued.kube import shapes
from kueued.kube.crd_rules import ENUMS, LIMITS, LIST_MAPS, RULES
from kueued.kube.schema import structural
from kueued.model import api
from kueued.model.validation.known_fields import FIELDS

__all__ = ["CrdKind", "KINDS", "KUEUE_DEFAULTS", "KUEUE_GROUP", "KOORDINATOR_GROUP", "crd", "crds"]

KUEUE_GROUP = "kueue.x-k8s.io"
KOORDINATOR_GROUP = "scheduling.sigs.k8s.io"


@dataclass(frozen=True)
class CrdKind:
    kind: str
    plural: str
    group: str
    version: str
    namespaced: bool
    model: type                          # the root Struct: spec (or top-level fields) and metadata
    status: type | None = None           # the status Struct, when kueued writes one
    short_names: tuple[str, ...] = ()
    columns: tuple[dict[str, Any], ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def _column(name: str, json_path: str, kind: str = "string", *, priority: int = 0, what: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": kind, "jsonPath": json_path}
    if priority:
        out["priority"] = priority
    if what:
        out["description"] = what
    return out


_PENDING = _column("Pending Workloads", ".status.pendingWorkloads", "integer", what="Number of pending workloads")
_ADMITTED = "Number of admitted workloads that haven't finished yet"

KINDS: tuple[CrdKind, ...] = (
    CrdKind("ResourceFlavor", "resourceflavors", KUEUE_GROUP, "v1beta2", False, api.ResourceFlavor,
            short_names=("flavor", "flavors", "rf")),
    CrdKind("Cohort", "cohorts", KUEUE_GROUP, "v1beta2", False, api.Cohort, shapes.CohortStatus,
            columns=(_column("Parent", ".spec.parentName", what="Parent of this Cohort in the tree"),)),
    CrdKind("ClusterQueue", "clusterqueues", KUEUE_GROUP, "v1beta2", False, api.ClusterQueue,
            shapes.ClusterQueueStatus, short_names=("cq",), columns=(
                _column("Cohort", ".spec.cohortName", what="Cohort that this ClusterQueue belongs to"),
                _column("Strategy", ".spec.queueingStrategy", priority=1,
                        what="The queueing strategy used to prioritize workloads"),
                _PENDING,
                _column("Admitted Workloads", ".status.admittedWorkloads", "integer", priority=1, what=_ADMITTED),
            )),
    CrdKind("LocalQueue", "localqueues", KUEUE_GROUP, "v1beta2", True, api.LocalQueue, shapes.LocalQueueStatus,
            short_names=("queue", "queues", "lq"), columns=(
                _column("ClusterQueue", ".spec.clusterQueue", what="Backing ClusterQueue"),
                _PENDING,
                _column("Admitted Workloads", ".status.admittedWorkloads", "integer", what=_ADMITTED),
            )),
    CrdKind("Workload", "workloads", KUEUE_GROUP, "v1beta2", True, api.Workload, shapes.WorkloadStatus,
            short_names=("wl",), columns=(
                _column("Queue", ".spec.queueName", what="Name of the queue this workload was submitted to"),
                _column("Reserved in", ".status.admission.clusterQueue",
                        what="Name of the ClusterQueue where the workload is reserving quota"),
                _column("Admitted", ".status.conditions[?(@.type=='Admitted')].status", what="Admission status"),
                _column("Finished", ".status.conditions[?(@.type=='Finished')].status", what="Workload finished"),
                _column("Age", ".metadata.creationTimestamp", "date", what="Time this workload was created"),
            )),
    CrdKind("WorkloadPriorityClass", "workloadpriorityclasses", KUEUE_GROUP, "v1beta2", False,
            api.WorkloadPriorityClass,
            columns=(_column("Value", ".value", "integer", what="Value of workloadPriorityClass's Priority"),)),
    CrdKind("ElasticQuota", "elasticquotas", KOORDINATOR_GROUP, "v1alpha1", True, shapes.ElasticQuota,
            shapes.ElasticQuotaStatus),
)


KUEUE_DEFAULTS: dict[str, dict[str, Any]] = {
    "ClusterQueue": {
        "spec.queueingStrategy": "BestEffortFIFO",
        "spec.stopPolicy": "None",
        "spec.flavorFungibility": {},
        "spec.flavorFungibility.whenCanBorrow": "MayStopSearch",
        "spec.flavorFungibility.whenCanPreempt": "TryNextFlavor",
        "spec.preemption": {},
        "spec.preemption.reclaimWithinCohort": "Never",
        "spec.preemption.withinClusterQueue": "Never",
        "spec.preemption.borrowWithinCohort": {},
        "spec.preemption.borrowWithinCohort.policy": "Never",
    },
    "LocalQueue": {"spec.stopPolicy": "None"},
    "Workload": {"spec.active": True, "spec.podSets[].name": "main", "spec.podSets[].count": 1},
}
"""The defaults Kueue's CRDs declare (``+kubebuilder:default`` in ``apis/kueue/v1beta2``), by field
path (``[]``: every item of a list).  The API server writes them into the objects it stores, so
``kubectl get cq -o wide`` shows a queue's strategy and ``-o yaml`` its policies, as on a Kueue
cluster.  They are the values kueued decodes a missing field as (``kueued.model.api``; a test
checks the two agree), so a defaulted object schedules exactly as the object written."""


def schema(kind: CrdKind) -> dict[str, Any]:
    """The openAPIV3Schema of one kind: its Struct, its status Struct, apiVersion and kind, with
    Kueue's defaults (:data:`KUEUE_DEFAULTS`)."""
    out = structural(kind.model)
    properties = out.setdefault("properties", {})
    properties.pop("status", None)  # the model's status is what scheduling reads; the CRD's is what kueued writes
    if kind.status is not None:
        properties["status"] = structural(kind.status, root=False)
    out["properties"] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, **properties}
    for path, value in KUEUE_DEFAULTS.get(kind.kind, {}).items():
        _node(out, path)["default"] = value
    for path, limits in LIMITS.get(kind.kind, {}).items():
        _node(out, path).update(limits)
    for path, values in ENUMS.get(kind.kind, {}).items():
        _node(out, path)["enum"] = list(values)
    for path, keys in LIST_MAPS.get(kind.kind, {}).items():
        node = _node(out, path)
        node["x-kubernetes-list-type"] = "map"
        node["x-kubernetes-list-map-keys"] = list(keys)
        item = node["items"]  # a map key must be required (the API server refuses the CRD otherwise)
        item["required"] = [*item.get("required", []), *(k for k in keys if k not in item.get("required", []))]
    for path, rule, message in RULES.get(kind.kind, []):
        _node(out, path).setdefault("x-kubernetes-validations", []).append({"rule": rule, "message": message})
    _declared_only(out, FIELDS.get(kind.kind, {}))
    return out


def _declared_only(root: dict[str, Any], nodes: Mapping[str, tuple[str, ...]]) -> None:
    """Kueue's declared fields and no others at every node :data:`~kueued.model.validation.known_fields.FIELDS`
    lists, as Kueue's structural CRDs have them: ``kubectl apply`` (strict field validation by
    default) refuses a typo'd ``spec.queuename`` or a v1beta1 ``spec.cohort`` with ``unknown
    field``, naming it, instead of storing an object kueued then refuses.  A declared field the
    Structs do not type is kept whole (it is checked by kueued's validation or not kueued's to
    judge); a node not listed (a pod ``template``, ``status``) keeps whatever it holds."""
    for path, names in nodes.items():
        try:
            node = _node(root, path)
        except KeyError:
            continue  # below a field kept whole
        node.pop("x-kubernetes-preserve-unknown-fields", None)
        properties = node.setdefault("properties", {})
        for name in names:
            properties.setdefault(name, {"x-kubernetes-preserve-unknown-fields": True})


def _node(root: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema of the field at ``path`` (a KeyError names a path the Structs do not have)."""
    node = root
    for part in path.split(".") if path else ():
        node = node["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = node["items"]
    return node


def crd(kind: CrdKind) -> dict[str, Any]:
    names: dict[str, Any] = {"kind": kind.kind, "listKind": f"{kind.kind}List", "plural": kind.plural,
                             "singular": kind.kind.lower()}
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    version: dict[str, Any] = {"name": kind.version, "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema(kind)}, "subresources": {"status": {}}}
    if kind.columns:
        version["additionalPrinterColumns"] = [dict(c) for c in kind.columns]
    spec: dict[str, Any] = {"group": kind.group, "names": names,
                            "scope": "Namespaced" if kind.namespaced else "Cluster", "versions": [version]}
    metadata: dict[str, Any] = {"name": kind.name, "labels": {"app.kubernetes.io/managed-by": "kueued"}}
    if kind.group == KOORDINATOR_GROUP:
        # A *.k8s.io group is reserved for reviewed APIs: without a link to its review the API
        # server marks the CRD KubernetesAPIApprovalPolicyConformant=False.  This is the link
        # Koordinator's (and scheduler-plugins') CRD carries.
        metadata["annotations"] = {
            "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": metadata,
            "spec": spec}


def crds() -> list[dict[str, Any]]:
    return [crd(kind) for kind in KINDS]
