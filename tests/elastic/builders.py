"""Builders for ElasticQuota, Workload and Node manifests and for ElasticGroup values.

They read like the setup they make: ``EQ("team-a").parent("cluster").min(cpu="5").max(cpu="10")``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from kueued.model import koordinator as k
from kueued.model.quantity import parse
from kueued.quota.elastic import ElasticGroup

_MIDNIGHT = datetime(2026, 1, 1)


def milli(**amounts: str) -> dict[str, int]:
    """Quantities by resource (``nvidia_com_gpu`` spells ``nvidia.com/gpu``) in milli-units."""
    return {_resource(r): parse(q) for r, q in amounts.items()}


def _resource(name: str) -> str:
    return "nvidia.com/gpu" if name == "gpu" else name


class EQ:
    """An ElasticQuota manifest."""

    def __init__(self, name: str, namespace: str = "kube-system") -> None:
        self.obj: dict[str, Any] = {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": {}},
            "spec": {},
        }

    def _labels(self) -> dict[str, str]:
        return self.obj["metadata"]["labels"]

    def parent(self, name: str) -> EQ:
        self._labels()[k.LABEL_PARENT] = name
        return self

    def is_parent(self, value: bool = True) -> EQ:
        self._labels()[k.LABEL_IS_PARENT] = "true" if value else "false"
        return self

    def no_lend(self) -> EQ:
        self._labels()[k.LABEL_ALLOW_LENT] = "false"
        return self

    def force(self) -> EQ:
        self._labels()[k.LABEL_ALLOW_FORCE_UPDATE] = "true"
        return self

    def label(self, key: str, value: str) -> EQ:
        self._labels()[key] = value
        return self

    def annotate(self, key: str, value: str) -> EQ:
        self.obj["metadata"]["annotations"][key] = value
        return self

    def weight(self, **amounts: str) -> EQ:
        weights = {_resource(r): q for r, q in amounts.items()}
        return self.annotate(k.ANNOTATION_SHARED_WEIGHT, json.dumps(weights))

    def namespaces(self, *names: str) -> EQ:
        return self.annotate(k.ANNOTATION_NAMESPACES, json.dumps(list(names)))

    def min(self, **amounts: Any) -> EQ:
        self.obj["spec"]["min"] = {_resource(r): q for r, q in amounts.items()}
        return self

    def max(self, **amounts: Any) -> EQ:
        self.obj["spec"]["max"] = {_resource(r): q for r, q in amounts.items()}
        return self

    def cluster(self, **amounts: str) -> EQ:
        """The conformance scenarios' cluster: top-level parent, min = max, does not lend."""
        return self.is_parent().no_lend().min(**amounts).max(**amounts)

    def build(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.obj))


class WL:
    """A Workload manifest with one pod set."""

    _clock = 0

    def __init__(self, name: str, quota: str | None = None, namespace: str = "default") -> None:
        WL._clock += 1
        self.obj: dict[str, Any] = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": name, "namespace": namespace, "labels": {},
                # one second apart, from midnight (a valid time however many are built in one run)
                "creationTimestamp": (_MIDNIGHT + timedelta(seconds=WL._clock)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "main", "resources": {"requests": {}}}]}}}]},
        }
        if quota is not None:
            self.obj["metadata"]["labels"][k.LABEL_QUOTA_NAME] = quota

    def at(self, second: int) -> WL:
        self.obj["metadata"]["creationTimestamp"] = f"2026-01-01T01:{second // 60:02d}:{second % 60:02d}Z"
        return self

    def req(self, **amounts: str) -> WL:
        containers = self.obj["spec"]["podSets"][0]["template"]["spec"]["containers"]
        containers[0]["resources"]["requests"] = {_resource(r): q for r, q in amounts.items()}
        return self

    def count(self, n: int) -> WL:
        self.obj["spec"]["podSets"][0]["count"] = n
        return self

    def priority(self, p: int) -> WL:
        self.obj["spec"]["priority"] = p
        return self

    def queue(self, name: str) -> WL:
        """A Kueue workload: submitted through a LocalQueue (it then stands for no Koordinator pod)."""
        self.obj["spec"]["queueName"] = name
        return self

    def non_preemptible(self) -> WL:
        self.obj["metadata"]["labels"][k.LABEL_PREEMPTIBLE] = "false"
        return self

    def admitted(self) -> WL:
        quota = self.obj["metadata"]["labels"].get(k.LABEL_QUOTA_NAME, k.DEFAULT_QUOTA)
        self.obj["status"] = {"admission": {"clusterQueue": quota, "podSetAssignments": []}}
        return self

    def build(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.obj))


def node(name: str, **allocatable: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {_resource(r): q for r, q in allocatable.items()}}}


def group(
    name: str,
    *,
    parent: str = k.ROOT_QUOTA,
    min: dict[str, int] | None = None,  # noqa: A002 - mirrors the field name
    max: dict[str, int] | None = None,  # noqa: A002
    weight: dict[str, int] | None = None,
    lend: bool = True,
    is_parent: bool = False,
) -> ElasticGroup:
    return ElasticGroup(name=name, parent=parent, is_parent=is_parent, min=min or {}, max=max or {},
                        shared_weight=weight, allow_lent_resource=lend)


def configuration(*, delay_evict_time: str | None = None, monitor_all_quotas: bool | None = None) -> dict[str, Any]:
    """Kueue's Configuration with kueued's ``elasticQuota`` section."""
    cfg: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    section: dict[str, Any] = {}
    if delay_evict_time is not None:
        section["delayEvictTime"] = delay_evict_time
    if monitor_all_quotas is not None:
        section["monitorAllQuotas"] = monitor_all_quotas
    if section:
        cfg["elasticQuota"] = section
    return cfg
