"""The accepted API objects, as a validating webhook plus informer cache would hold them.

``World.apply(manifest)`` is the single door for every object, from a file
(``simulate``) or from a watch (the daemon): it validates (Kueue's rules in
``kueued.model.validation``, Koordinator's in ``kueued.model.elastic_validation``),
decodes into ``kueued.model.api`` Structs and stores the object, or records why it was
refused.  A refused update leaves the earlier accepted version in force; one bad
object never stops the others.  The result says what changed, so the engine knows
whether the quota forest must be rebuilt or only a workload queued.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import msgspec

from kueued.echoes import older, same_to_the_scheduler
from kueued.errors import FieldError
from kueued.model import api
from kueued.model.clock import rfc3339
from kueued.model.settings import Settings
from kueued.model.validation import KUEUE_GROUP, validate_object
from kueued.model.validation.configuration import parse_duration
from kueued.model.validation.kinds import decode_error, kind_error, node_errors
from kueued.model.validation.workload_gates import GATE_PRIORITY_BOOST, PRIORITY_BOOST, boost_of, enabled
from kueued.scheduling.fairsharing import gates
from kueued.scheduling.limitrange import Summary, summarize
from kueued.scheduling.workload import Placement, WorkloadInfo, WorkloadSpec, spec_of

__all__ = ["World", "Change", "Settings"]


class Change(enum.Enum):
    NONE = "none"
    REJECTED = "rejected"
    TOPOLOGY = "topology"      # flavors, cohorts, cluster queues, configuration
    ROUTING = "routing"        # local queues, namespaces, priority classes
    WORKLOAD = "workload"
    ELASTIC = "elastic"        # ElasticQuota groups, Nodes


def _names_class(spec: WorkloadSpec, name: str) -> bool:
    ref = spec.obj.spec.priority_class_ref
    return ref is not None and ref.kind == "WorkloadPriorityClass" and ref.name == name


def _finished(wl: api.Workload) -> bool:
    return any(c.type == "Finished" and c.status == "True" for c in wl.status.conditions)


def _seconds(duration: str | None) -> float | None:
    return None if duration is None else parse_duration(duration)


class World:
    def __init__(self) -> None:
        self.raw: dict[str, dict[str, Any]] = {}
        self.rejected: dict[str, str] = {}
        self.settings = Settings()
        self.flavors: dict[str, api.ResourceFlavor] = {}
        self.cohorts: dict[str, api.Cohort] = {}
        self.cluster_queues: dict[str, api.ClusterQueue] = {}
        self.local_queues: dict[str, api.LocalQueue] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.limit_ranges: dict[str, dict[str, api.LimitRange]] = {}  # namespace -> name -> LimitRange
        self._limit_summaries: dict[str, Summary | None] = {}
        self.priority_classes: dict[str, int] = {}
        self.workloads: dict[str, WorkloadSpec] = {}  # the current version of each, immutable
        # Where each workload holds quota now: the scheduler's index of its queues' replies, written
        # by the coordinator alone (a Workload's status says where it was admitted: ``spec.observed``)
        self.placed: dict[str, Placement] = {}
        self.terminating: set[str] = set()  # ClusterQueues deleted while workloads are admitted in them
        self.elastic_quotas: dict[str, dict[str, Any]] = {}
        # the latest refused version of an ElasticQuota, while it is not the one in force: Koordinator's
        # webhook reads the other quotas (a parent that is not there yet, their mins), so it may pass
        # once they change (``retry_elastic``)
        self.refused_elastic: dict[str, dict[str, Any]] = {}
        # ElasticQuotas deleted from the API server whose deletion Koordinator's webhook would have
        # refused (child quotas, bound workloads): still in force, and deleted once it would pass
        # (``retry_elastic_deletes``); a new object of the same name ends the wait
        self.deleting_elastic: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}

    # --- the door ----------------------------------------------------------------------------
    def apply(self, manifest: dict[str, Any]) -> tuple[Change, str]:
        """Validate and store one manifest; returns what changed and the object's key."""
        if not isinstance(manifest, dict):
            self.rejected["?"] = "must be a mapping"
            return Change.REJECTED, "?"
        key = api.object_key(manifest)
        kind = manifest.get("kind")
        if kind == "ElasticQuota":
            self.deleting_elastic.pop(key, None)  # the API server has an object of that name again
        if key in self.raw and kind == "Workload" and older(manifest, self.raw[key]):
            return Change.NONE, key  # the late echo of a write kueued has since written over (eviction phase one)
        if key in self.raw and same_to_the_scheduler(self.raw[key], manifest):
            self.raw[key] = manifest  # the echo of kueued's own status write: nothing the scheduler reads moved
            self.refused_elastic.pop(key, None)  # (or the version in force again: a refused one is not tried)
            return Change.NONE, key
        refused = kind_error(kind, manifest.get("apiVersion"))
        if refused is not None or not isinstance(manifest.get("metadata", {}), dict):
            key = self._distinct(key, manifest)
            self.rejected[key] = str(refused or FieldError("metadata", "must be a mapping"))
            return Change.REJECTED, key
        old = self.raw.get(key)
        try:
            if kind == "ElasticQuota":
                errors = self._validate_elastic(manifest, old)
            elif kind == "Node":
                errors = node_errors(manifest)
            else:
                errors = validate_object(manifest, old=old, feature_gates=self.settings.feature_gates)
                if not errors and kind == "Workload":
                    errors = self._validate_elastic_pod(manifest, old)
            obj = None
            if not errors and kind in api.KINDS:
                obj = api.decode(manifest)
            if not errors:
                assert isinstance(kind, str)  # kind_error refused every other
                change = self._store(kind, key, manifest, obj)
                self.raw[key] = manifest
                self.refused_elastic.pop(key, None)
                return change, key
        except msgspec.ValidationError as exc:
            errors = [decode_error(exc)]
        except Exception as exc:  # noqa: BLE001 - whatever it is, it is this object's, not the daemon's
            # A rule we did not anticipate (a RecursionError from a deep value once took the daemon
            # down, and down again on every restart while the object existed): refuse the object.
            errors = [FieldError("", f"cannot be read ({type(exc).__name__}: {exc})")]
        key = self._distinct(key, manifest)
        self.rejected[key] = "; ".join(str(e) for e in errors)
        if kind == "ElasticQuota":
            self.refused_elastic[key] = manifest
        return Change.REJECTED, key

    def retry_elastic(self) -> list[dict[str, Any]]:
        """The refused ElasticQuota versions to try again now that the quotas in force changed, in the
        order the daemon's first list takes quotas (``parents_first``: oldest first, each parent before
        its children): as a user would apply them again once their parent exists."""
        from kueued.model.koordinator import parents_first
        return [dict(q) for q in parents_first(self.refused_elastic.values())]

    def retry_elastic_deletes(self) -> list[dict[str, Any]]:
        """The ElasticQuotas whose deletion was refused, to delete again now that quotas or workloads
        went: children first, as a user would delete a tree (a child gone lets its parent go)."""
        from kueued.model.koordinator import parents_first
        return [dict(q) for q in reversed(parents_first(self.deleting_elastic.values()))]

    def _distinct(self, key: str, manifest: dict[str, Any]) -> str:
        """A refused object without a usable name gets a key of its own (``ResourceFlavor/#2``), so
        one such refusal never hides another under the same ``Kind/`` key."""
        meta = manifest.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str) and name or key not in self.rejected or key == "Configuration":
            return key  # (the Configuration is one, named by its kind: a later one replaces it)
        n = 2
        while f"{key}#{n}" in self.rejected:
            n += 1
        return f"{key}#{n}"

    def delete(self, manifest: dict[str, Any]) -> tuple[Change, str]:
        key = api.object_key(manifest)
        kind = manifest.get("kind")
        meta = manifest.get("metadata")
        name = meta.get("name", "") if isinstance(meta, dict) else ""
        if not isinstance(kind, str) or not isinstance(name, str):  # never applied: only its refusal goes
            return Change.NONE, key
        if kind == "ElasticQuota":
            self.refused_elastic.pop(key, None)  # gone: no version of it is tried again
        if kind == "ElasticQuota" and key in self.elastic_quotas:
            errors = self._validate_elastic_delete(self.elastic_quotas[key])
            if errors:  # Koordinator's webhook refuses it: the object stays in force until it would pass
                self.rejected[key] = "; ".join(str(e) for e in errors)
                self.deleting_elastic[key] = self.elastic_quotas[key]
                return Change.REJECTED, key
            self.deleting_elastic.pop(key, None)
            self.elastic_quotas.pop(key)
            self.raw.pop(key, None)
            return Change.ELASTIC, key
        if kind == "ClusterQueue" and self.holds_admitted(name):
            return self._terminate(name, key, manifest), key
        self.raw.pop(key, None)
        if kind == "Node":
            return (Change.ELASTIC if self.nodes.pop(key, None) is not None else Change.NONE), key
        table: dict[str, Any] = {"ResourceFlavor": self.flavors, "Cohort": self.cohorts,
                                 "ClusterQueue": self.cluster_queues}
        if kind in table:
            table[kind].pop(name, None)
            if kind == "ClusterQueue":
                self.terminating.discard(name)
            return Change.TOPOLOGY, key
        if kind == "Workload":
            self.workloads.pop(key.split("/", 1)[1], None)
            return Change.WORKLOAD, key
        if kind == "LocalQueue":
            self.local_queues.pop(key.split("/", 1)[1], None)
            return Change.ROUTING, key
        if kind == "Namespace":  # its labels no longer match any selector
            return (Change.ROUTING if self.namespaces.pop(name, None) is not None else Change.NONE), key
        if kind == "LimitRange":
            namespace = key.split("/")[1]
            if self.limit_ranges.get(namespace, {}).pop(name, None) is None:
                return Change.NONE, key
            return self._limits_changed(namespace), key
        if kind == "WorkloadPriorityClass":  # new workloads no longer find it; admitted ones keep theirs, as in Kueue
            # Kueue's controller wrote the last value into spec.priority: the specs held keep it
            return (Change.ROUTING if self.priority_classes.pop(name, None) is not None else Change.NONE), key
        if kind == "Configuration":  # Kueue's defaults again
            self.settings = Settings()
            return Change.TOPOLOGY, key
        return Change.NONE, key

    # --- ClusterQueues deleted while in use ------------------------------------------------------
    def take_observed(self) -> None:
        """For a World no scheduler runs on (a read of a cluster): each Workload holds quota where
        its status says it was admitted."""
        self.placed = {key: spec.observed for key, spec in self.workloads.items() if spec.observed is not None}

    def holds_admitted(self, cluster_queue: str) -> bool:
        return cluster_queue in self.cluster_queues and any(
            p.cluster_queue == cluster_queue for p in self.placed.values())

    def _terminate(self, name: str, key: str, manifest: dict[str, Any]) -> Change:
        """A ClusterQueue deleted while workloads are admitted in it stays, terminating, as Kueue's
        finalizer keeps it: inactive (nothing new is admitted), its quota still in its Cohort and its
        admitted workloads still charged there (their pods run), until the last of them leaves
        (:meth:`forget_terminated`).  Removing it at once would let its Cohort lend quota those
        workloads still use."""
        obj = self.cluster_queues[name]
        stamp = obj.metadata.deletion_timestamp or rfc3339()
        if not obj.metadata.deletion_timestamp:
            self.cluster_queues[name] = msgspec.structs.replace(
                obj, metadata=msgspec.structs.replace(obj.metadata, deletion_timestamp=stamp))
        last = manifest if isinstance(manifest.get("metadata"), dict) else (self.raw.get(key) or {})
        meta = {**(last.get("metadata") or {"name": name}), "deletionTimestamp": stamp}
        meta.pop("finalizers", None)  # gone from its source: nothing but kueued holds it now
        self.raw[key] = {"apiVersion": KUEUE_GROUP, "kind": "ClusterQueue", **last, "metadata": meta}
        self.terminating.add(name)
        return Change.TOPOLOGY

    def forget_terminated(self, name: str) -> bool:
        """Remove a terminating ClusterQueue once nothing is admitted in it; whether it went.  One
        the API server holds by Kueue's finalizer stays until its deletion is seen (the status
        publisher takes the finalizer off: ``kueued.kube.finalizers``)."""
        if name not in self.terminating or self.held_by_finalizer(name) or self.holds_admitted(name):
            return False
        self.terminating.discard(name)
        self.cluster_queues.pop(name, None)
        self.raw.pop(f"ClusterQueue/{name}", None)
        return True

    def held_by_finalizer(self, name: str) -> bool:
        meta = (self.raw.get(f"ClusterQueue/{name}") or {}).get("metadata")
        finalizers = meta.get("finalizers") if isinstance(meta, dict) else None
        return isinstance(finalizers, list) and api.IN_USE_FINALIZER in finalizers

    def _validate_elastic(self, manifest: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        from kueued.model.elastic_validation import validate_elastic_quota
        quotas = {((q.get("metadata") or {}).get("name", "")): q for q in self.elastic_quotas.values()}
        workloads = [self.raw[k] for k in self.raw if k.startswith("Workload/")]
        return validate_elastic_quota(manifest, old=old, quotas=quotas, workloads=workloads)

    def _validate_elastic_pod(self, manifest: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
        """Koordinator's pod webhook, for a Workload that stands for a pod (``koordinator.is_elastic_pod``)."""
        from kueued.model import koordinator as k
        from kueued.model.elastic_pod_validation import validate_elastic_pod
        if not k.is_elastic_pod(manifest):
            return []
        quotas = {k.name_of(q): q for q in self.elastic_quotas.values()}
        return validate_elastic_pod(manifest, old=old, quotas=quotas,
                                    parent_quota_pods=self.settings.feature_gates.get(k.GATE_PARENT_QUOTA_PODS, False))

    def _validate_elastic_delete(self, manifest: dict[str, Any]) -> list[FieldError]:
        from kueued.model.elastic_validation import validate_elastic_quota_delete
        quotas = {((q.get("metadata") or {}).get("name", "")): q for q in self.elastic_quotas.values()}
        workloads = [self.raw[k] for k in self.raw if k.startswith("Workload/")]
        return validate_elastic_quota_delete(manifest, quotas=quotas, workloads=workloads)

    def _store(self, kind: str, key: str, manifest: dict[str, Any], obj: Any) -> Change:
        if kind == "ElasticQuota":
            self.elastic_quotas[key] = manifest
            return Change.ELASTIC
        if kind == "Node":
            self.nodes[key] = manifest
            return Change.ELASTIC
        name = obj.metadata.name
        if kind == "ResourceFlavor":
            self.flavors[name] = obj
            return Change.TOPOLOGY
        if kind == "Cohort":
            self.cohorts[name] = obj
            return Change.TOPOLOGY
        if kind == "ClusterQueue":
            self.cluster_queues[name] = obj
            if obj.metadata.deletion_timestamp:  # deleted, held by a finalizer (Kueue's resource-in-use)
                self.terminating.add(name)
            else:
                self.terminating.discard(name)
            return Change.TOPOLOGY
        if kind == "Configuration":
            self._configure(obj)
            return Change.TOPOLOGY
        if kind == "LocalQueue":
            self.local_queues[f"{obj.metadata.namespace}/{name}"] = obj
            return Change.ROUTING
        if kind == "Namespace":
            self.namespaces[name] = dict(obj.metadata.labels)
            return Change.ROUTING
        if kind == "WorkloadPriorityClass":
            self.priority_classes[name] = obj.value
            self._respec(lambda spec: _names_class(spec, name))  # the class's value reaches its Workloads
            return Change.ROUTING
        if kind == "LimitRange":
            self.limit_ranges.setdefault(obj.metadata.namespace, {})[name] = obj
            return self._limits_changed(obj.metadata.namespace)
        if kind == "Workload":
            if _finished(obj):  # Kueue's Finished condition: its quota is free, it never queues again
                self.workloads.pop(f"{obj.metadata.namespace}/{name}", None)
                return Change.WORKLOAD
            spec = self._spec(obj)
            self.workloads[spec.key] = spec
            return Change.WORKLOAD
        return Change.NONE

    def _configure(self, cfg: api.Configuration) -> None:
        s = Settings()
        if cfg.fair_sharing is not None and cfg.fair_sharing.enable:
            s.fair_sharing = True
            if cfg.fair_sharing.preemption_strategies:
                s.preemption_strategies = list(cfg.fair_sharing.preemption_strategies)
        s.admission_fair_sharing = cfg.admission_fair_sharing
        s.feature_gates = dict(cfg.feature_gates)
        strategy = cfg.wait_for_pods_ready.requeuing_strategy if cfg.wait_for_pods_ready is not None else None
        s.requeue_by_eviction = strategy is None or strategy.timestamp != "Creation"
        if cfg.resources is not None:
            s.excluded_prefixes = tuple(cfg.resources.exclude_resource_prefixes)
            s.transformations = tuple(cfg.resources.transformations)
        retention = cfg.object_retention_policies.workloads if cfg.object_retention_policies else None
        if retention is not None:
            s.retain_finished = _seconds(retention.after_finished)
            s.retain_deactivated = _seconds(retention.after_deactivated_by_kueue)
        if cfg.elastic_quota is not None and cfg.elastic_quota.delay_evict_time:
            s.delay_evict_time = parse_duration(cfg.elastic_quota.delay_evict_time)
        if cfg.elastic_quota is not None:
            s.monitor_all_quotas = cfg.elastic_quota.monitor_all_quotas
        self.settings = s
        self._respec(lambda spec: True)  # gates and resource rules change how pending Workloads read

    def _limits_changed(self, namespace: str) -> Change:
        """A namespace's LimitRanges changed: its pending Workloads are read again with them (Kueue
        adjusts a Workload when its queue takes it in; admitted ones keep what they were admitted with)."""
        self._limit_summaries.pop(namespace, None)
        self._respec(lambda spec: spec.namespace == namespace)
        return Change.ROUTING

    def _respec(self, which: Callable[[WorkloadSpec], bool]) -> None:
        """Read the pending Workloads ``which`` picks again (their priority and LimitRanges may have
        changed); an admitted one keeps the version its queue holds until its next event."""
        for key, spec in list(self.workloads.items()):
            if key not in self.placed and which(spec):
                self.workloads[key] = self._spec(spec.obj)

    def _spec(self, obj: api.Workload) -> WorkloadSpec:
        """A Workload version as the scheduler reads it, with what the World knows around it."""
        s = self.settings
        return spec_of(obj, priority=self.priority_of(obj), limit_ranges=self.limits_in(obj.metadata.namespace),
                       requeue_by_eviction=s.requeue_by_eviction,
                       priority_sorting=gates.enabled(s, "PrioritySortingWithinCohort"),
                       reclaimable_pods=gates.enabled(s, "ReclaimablePods"),
                       excluded=s.excluded_prefixes, transformations=s.transformations)

    def limits_in(self, namespace: str) -> Summary | None:
        """The summary of a namespace's LimitRanges (:mod:`kueued.scheduling.limitrange`), or None."""
        if namespace not in self._limit_summaries:
            ranges = self.limit_ranges.get(namespace)
            self._limit_summaries[namespace] = summarize(ranges.values()) if ranges else None
        return self._limit_summaries[namespace]

    # --- derived ----------------------------------------------------------------------------
    def priority_of(self, wl: api.Workload) -> int:
        """A WorkloadPriorityClass's value, as Kueue's WorkloadPriorityClass controller keeps it in
        the ``spec.priority`` of every Workload naming the class; else ``spec.priority``.  With the
        PriorityBoost gate on, plus the ``kueue.x-k8s.io/priority-boost`` annotation (Kueue's
        effective priority, read by queue order and preemption alike; a value that is not an
        integer adds nothing)."""
        return self.priority_parts(wl)[0]

    def priority_parts(self, wl: api.Workload) -> tuple[int, int]:
        """(effective priority, the boost in it): :meth:`priority_of`, as Kueue's Events give it."""
        ref = wl.spec.priority_class_ref
        if ref is not None and ref.kind == "WorkloadPriorityClass" and ref.name in self.priority_classes:
            base = self.priority_classes[ref.name]
        else:
            base = wl.spec.priority if wl.spec.priority is not None else 0
        boost = boost_of(wl.metadata.annotations.get(PRIORITY_BOOST))
        if boost is not None and enabled(self.settings.feature_gates, GATE_PRIORITY_BOOST):
            return base + boost, boost
        return base, 0

    def queued(self, wl: WorkloadSpec) -> bool:
        """Whether a workload waits in Kueue's queues, so counts as pending in a queue's status: not
        admitted, active, not a Koordinator pod, and its LocalQueue not stopped (whose workloads are
        out of Kueue's queues: counted nowhere)."""
        if wl.key in self.placed or not wl.obj.spec.active or self.route(wl)[1] == "elastic":
            return False
        lq = self.local_queues.get(wl.local_queue)
        return lq is None or lq.spec.stop_policy in ("", "None")

    def elastic_quota_of(self, key: str) -> str | None:
        """The ElasticQuota group the Workload ``namespace/name`` joins when it stands for a Koordinator
        pod (``route`` says "elastic"), by Koordinator's GetQuotaName: a name no quota has is the
        default quota's.  None for a Kueue workload."""
        from kueued.model import koordinator as k
        wl, manifest = self.workloads.get(key), self.raw.get(f"Workload/{key}")
        if wl is None or manifest is None or self.route(wl) != (None, "elastic"):
            return None
        name = k.pod_quota_name(manifest, self.elastic_quotas.values())
        return name if any(k.name_of(q) == name for q in self.elastic_quotas.values()) else k.DEFAULT_QUOTA

    def route(self, wl: WorkloadSpec | WorkloadInfo) -> tuple[str | None, str]:
        """The ClusterQueue a pending workload queues in, or why it has none."""
        labels = wl.obj.metadata.labels
        if self.elastic_quotas and (not wl.queue_name or labels.get("quota.scheduling.koordinator.sh/name")
                                    or labels.get("quota.scheduling.koordinator.sh/quota-name")):
            return None, "elastic"  # a Koordinator pod: it names a quota, or no LocalQueue (its namespace's quota)
        if not wl.queue_name:
            return None, "workload has no spec.queueName"
        lq = self.local_queues.get(wl.local_queue)
        if lq is None:
            return None, f"LocalQueue {wl.queue_name} doesn't exist in namespace {wl.namespace}"
        if lq.spec.cluster_queue not in self.cluster_queues:
            return None, f"ClusterQueue {lq.spec.cluster_queue} doesn't exist"
        return lq.spec.cluster_queue, ""
