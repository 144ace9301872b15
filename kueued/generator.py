"""Kueue's scheduler-performance generator format, as a :class:`~kueued.timeline.Trace`.

Kueue's ``test/performance/scheduler`` builds its objects from a ``*-generator.yaml``
(``runner/generator/generator.go``); reading it here lets ``kueued simulate --generator``
run the very configurations Kueue publishes figures for:

- ``cohorts[]``: ``count`` Cohorts of ``className``, each with ``queuesSets[]``: ``count``
  ClusterQueues of ``nominalQuota`` cpu, ``borrowingLimit``, ``reclaimWithinCohort`` and
  ``withinClusterQueue``; one LocalQueue per ClusterQueue;
- per ClusterQueue and per ``workloadsSets[]`` entry, ``count`` workloads of each listed
  class (``request`` cpu in one pod, ``priority``, ``runtimeMs``), created one after
  another sleeping ``creationIntervalMs`` before each; the sets (and the queues) run
  concurrently, so the n-th workload of a set (from 1) arrives at n x interval.

Objects carry ``kueued.io/class`` labels so the summary groups ClusterQueues and
workloads as Kueue's checker does.  Names follow the generator's
(``<cohort class>-<i>``, ``<cq class>-<i>-<j>``), all in namespace ``default``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from kueued.errors import ManifestError
from kueued.timeline import CLASS, US, Arrival, Trace

__all__ = ["GeneratorConfig", "load_generator", "parse_generator", "build_trace"]

API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "default"
FLAVOR = "default"


class WorkloadTemplate(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: str
    runtime_ms: int
    priority: int = 0
    request: float = 1


class WorkloadsSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    count: int
    creation_interval_ms: int
    workloads: list[WorkloadTemplate]


class QueuesSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: str
    count: int
    nominal_quota: float
    borrowing_limit: float | None = None
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    workloads_sets: list[WorkloadsSet] = []


class CohortSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: str
    count: int
    queues_sets: list[QueuesSet] = []


class GeneratorConfig(msgspec.Struct, forbid_unknown_fields=True):
    cohorts: list[CohortSet]

    @property
    def workloads(self) -> int:
        return sum(c.count * q.count * s.count * len(s.workloads)
                   for c in self.cohorts for q in c.queues_sets for s in q.workloads_sets)


def parse_generator(data: Any) -> GeneratorConfig:
    try:
        return msgspec.convert(data, GeneratorConfig)
    except msgspec.ValidationError as exc:
        raise ManifestError(f"generator: {exc}") from exc


def load_generator(path: str | Path) -> GeneratorConfig:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc
    return parse_generator(data)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def build_trace(config: GeneratorConfig) -> Trace:
    """The setup objects and the arrivals the generator would create."""
    setup: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
    ]
    arrivals: list[Arrival] = []
    for cs in config.cohorts:
        for i in range(cs.count):
            cohort = f"{cs.class_name}-{i}"
            setup.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": cohort,
                                                                            "labels": {CLASS: cs.class_name}}})
            for qs in cs.queues_sets:
                for j in range(qs.count):
                    cq = f"{qs.class_name}-{i}-{j}"
                    setup.extend(_queue(cq, cohort, qs))
                    for ws in qs.workloads_sets:
                        for tpl in ws.workloads:
                            for n in range(1, ws.count + 1):
                                at = n * ws.creation_interval_ms * 1000
                                arrivals.append(_workload(f"{cq}-{tpl.class_name}-{n}", cq, tpl, at))
    arrivals.sort(key=lambda a: a.at)  # stable: same instant keeps generation order
    return Trace(setup, arrivals)


def _queue(cq: str, cohort: str, qs: QueuesSet) -> list[dict[str, Any]]:
    res: dict[str, Any] = {"name": "cpu", "nominalQuota": _num(qs.nominal_quota)}
    if qs.borrowing_limit is not None:
        res["borrowingLimit"] = _num(qs.borrowing_limit)
    return [
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": cq, "labels": {CLASS: qs.class_name}},
         "spec": {"cohortName": cohort, "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
                  "preemption": {"reclaimWithinCohort": qs.reclaim_within_cohort,
                                 "withinClusterQueue": qs.within_cluster_queue},
                  "resourceGroups": [{"coveredResources": ["cpu"],
                                      "flavors": [{"name": FLAVOR, "resources": [res]}]}]}},
        {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": cq, "namespace": NAMESPACE},
         "spec": {"clusterQueue": cq}},
    ]


def _workload(name: str, lq: str, tpl: WorkloadTemplate, at_us: int) -> Arrival:
    seconds, micro = divmod(at_us, US)
    stamp = f"2026-01-01T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micro:06d}Z"
    manifest = {
        "apiVersion": API, "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {CLASS: tpl.class_name},
                     "creationTimestamp": stamp},
        "spec": {"queueName": lq, "priority": tpl.priority,
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                     {"name": "c", "resources": {"requests": {"cpu": _num(tpl.request)}}}]}}}]},
    }
    return Arrival(f"{NAMESPACE}/{name}", at_us, tpl.runtime_ms * 1000, manifest, tpl.class_name)
