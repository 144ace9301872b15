"""Kueue's scheduler-performance generator format, as a :class:`~kueued.trace.Trace`.

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

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import msgspec
import yaml

from kueued.errors import ManifestError
from kueued.manifests import decode_text, yaml_reason
from kueued.trace import CLASS, Arrival, Trace

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

__all__ = ["GeneratorConfig", "load_generator", "parse_generator", "build_trace"]

API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "default"
FLAVOR = "default"
MAX_WORKLOADS = 2_000_000
"""Workloads one generator may create (Kueue's large-scale config has 26,000)."""
MAX_QUEUES = 100_000
"""ClusterQueues, and Cohorts, one generator may create (Kueue's large-scale config has 1,000)."""

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_WORKLOADS)]
Millis = Annotated[int, msgspec.Meta(ge=0, le=10**12)]         # about 31 years
Cpu = Annotated[float, msgspec.Meta(ge=0, le=10**9)]           # finite: NaN and inf fail the bounds
Name = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")]


class WorkloadTemplate(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: Name
    runtime_ms: Millis
    priority: Annotated[int, msgspec.Meta(ge=-(2**31), lt=2**31)] = 0
    request: Annotated[float, msgspec.Meta(gt=0, le=10**9)] = 1


class WorkloadsSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    count: Count
    creation_interval_ms: Millis
    workloads: list[WorkloadTemplate]


class QueuesSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: Name
    count: Count
    nominal_quota: Cpu
    borrowing_limit: Cpu | None = None
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    workloads_sets: list[WorkloadsSet] = []


class CohortSet(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    class_name: Name
    count: Count
    queues_sets: list[QueuesSet] = []


class GeneratorConfig(msgspec.Struct, forbid_unknown_fields=True):
    cohorts: list[CohortSet]

    @property
    def workloads(self) -> int:
        return sum(c.count * q.count * s.count * len(s.workloads)
                   for c in self.cohorts for q in c.queues_sets for s in q.workloads_sets)


def parse_generator(data: Any, *, source: str = "generator") -> GeneratorConfig:
    """The config, its fields checked (counts, times and quantities bounded, names DNS labels)."""
    try:
        config = msgspec.convert(data, GeneratorConfig)
    except msgspec.ValidationError as exc:
        raise ManifestError(f"{source}: {exc}") from exc
    workloads = queues = cohorts = 0
    for c in config.cohorts:  # summed with early exits: the product of counts can be vast
        cohorts += c.count
        for q in c.queues_sets:
            queues += c.count * q.count
            workloads += c.count * q.count * sum(s.count * len(s.workloads) for s in q.workloads_sets)
            if queues > MAX_QUEUES or cohorts > MAX_QUEUES:
                raise ManifestError(f"{source}: creates more than {MAX_QUEUES:,} ClusterQueues or Cohorts")
            if workloads > MAX_WORKLOADS:
                raise ManifestError(f"{source}: creates more than {MAX_WORKLOADS:,} workloads")
    if cohorts > MAX_QUEUES:
        raise ManifestError(f"{source}: creates more than {MAX_QUEUES:,} ClusterQueues or Cohorts")
    return config


def load_generator(path: str | Path) -> GeneratorConfig:
    try:
        data = yaml.load(decode_text(Path(path).read_bytes(), source=str(path)), Loader=_LOADER)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: {yaml_reason(exc)}") from exc
    return parse_generator(data, source=str(path))


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
    stamp = (_EPOCH + timedelta(microseconds=at_us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    manifest = {
        "apiVersion": API, "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {CLASS: tpl.class_name},
                     "creationTimestamp": stamp},
        "spec": {"queueName": lq, "priority": tpl.priority,
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                     {"name": "c", "resources": {"requests": {"cpu": _num(tpl.request)}}}]}}}]},
    }
    return Arrival(f"{NAMESPACE}/{name}", at_us, tpl.runtime_ms * 1000, manifest, tpl.class_name)
