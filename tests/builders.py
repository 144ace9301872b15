"""Builders that read like the setup they make (Kueue's MakeClusterQueue style)."""

from __future__ import annotations

from typing import Any


def flavor(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": spec}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def quotas(flavor_name: str, **resources: Any) -> dict[str, Any]:
    """quotas("default", cpu="4") or cpu=("4", borrowingLimit, lendingLimit)."""
    out = []
    for res, q in resources.items():
        nominal, bl, ll = (q, None, None) if not isinstance(q, tuple) else (q + (None, None))[:3]
        item: dict[str, Any] = {"name": res, "nominalQuota": nominal}
        if bl is not None:
            item["borrowingLimit"] = bl
        if ll is not None:
            item["lendingLimit"] = ll
        out.append(item)
    return {"name": flavor_name, "resources": out}


def cluster_queue(name: str, *flavors: dict[str, Any], cohort: str = "", strategy: str = "BestEffortFIFO",
                  preemption: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    covered = sorted({r["name"] for f in flavors for r in f["resources"]})
    spec: dict[str, Any] = {"namespaceSelector": {}, "queueingStrategy": strategy,
                            "resourceGroups": [{"coveredResources": covered, "flavors": list(flavors)}]}
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    spec.update(extra)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec}


def cohort(name: str, *flavors: dict[str, Any], parent: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if flavors:
        covered = sorted({r["name"] for f in flavors for r in f["resources"]})
        spec["resourceGroups"] = [{"coveredResources": covered, "flavors": list(flavors)}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace_name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace_name}, "spec": {"clusterQueue": cq}}


def workload(name: str, namespace_name: str, queue: str, *, created: int = 0, priority: int | None = None,
             count: int = 1, **requests: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": queue, "podSets": [{
        "name": "main", "count": count,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace_name,
                         "creationTimestamp": f"2026-01-01T00:{created // 60:02d}:{created % 60:02d}Z"},
            "spec": spec}
