"""Kueue's own Configuration file as kueued's settings (``kueued run --config kueue-config.yaml``).

A platform team that runs Kueue already has a ``config.kueue.x-k8s.io`` ``Configuration``
(the ``controller_manager_config.yaml`` of Kueue's manifests).  kueued reads the fields the two
share and says which it leaves alone:

==================================================  ====================================================
Kueue's field                                       kueued's setting (``config/kueued.toml``)
==================================================  ====================================================
``metrics.bindAddress`` (``host:port``)             ``[metrics] address, port`` (no host: every address)
``leaderElection.leaderElect``                      ``[leader_election] enabled``
``leaderElection.leaseDuration / renewDeadline /    ``lease_duration / renew_deadline / retry_period``
retryPeriod`` (Go durations)                        (seconds)
``leaderElection.resourceName / resourceNamespace`` ``name / namespace`` (else ``namespace``, the top level)
``fairSharing`` (v1beta1: ``enable``) and           ``[fair_sharing] enabled / preemption_strategies``
its ``preemptionStrategies``
``admissionFairSharing.*``                          ``[admission_fair_sharing]`` (enabled when present)
``featureGates``                                    ``[feature_gates]``
``resources.excludeResourcePrefixes`` and           ``[resources] exclude_resource_prefixes`` and
``resources.transformations``                       ``[[resources.transformations]]``
``objectRetentionPolicies.workloads.afterFinished`` ``[object_retention] workloads_after_finished``
and ``.afterDeactivatedByKueue``                    and ``workloads_after_deactivated_by_kueue`` (seconds)
==================================================  ====================================================

Everything else (``integrations``, ``waitForPodsReady``, ``webhook``, ``health``, ...) is
listed in ``ignored``: kueued has no such setting, or serves it another way (its health
endpoints share the metrics server).  The file is first checked as Kueue's webhook checks
it (``kueued.model.validation.configuration``), so a bad value is refused with its field.
"""

from __future__ import annotations

from typing import Any

from kueued.model.validation.configuration import parse_duration, validate_configuration

__all__ = ["GROUP", "is_kueue_configuration", "settings_from", "yaml_line"]

GROUP = "config.kueue.x-k8s.io/"
_READ = {"apiVersion", "kind", "namespace", "metrics", "leaderElection", "fairSharing", "admissionFairSharing",
         "featureGates", "resources", "objectRetentionPolicies", "elasticQuota"}


def is_kueue_configuration(doc: object) -> bool:
    return (isinstance(doc, dict) and doc.get("kind") == "Configuration"
            and str(doc.get("apiVersion", "")).startswith(GROUP))


def settings_from(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[tuple[str, str]]]:
    """(kueued's settings as the TOML file's tables, the fields left alone, problems: (field, why))."""
    doc = _as_v1beta2(doc)
    problems = [(e.path, e.reason) for e in validate_configuration(doc, None)]
    out: dict[str, Any] = {}
    ignored = sorted(k for k in doc if k not in _READ)
    metrics = doc.get("metrics") or {}
    if isinstance(metrics, dict):
        ignored += [f"metrics.{k}" for k in sorted(metrics) if k != "bindAddress"]
        bind = metrics.get("bindAddress")
        if isinstance(bind, str) and bind:
            host, _, port = bind.rpartition(":")
            if not port.isdigit():
                problems.append(("metrics.bindAddress", f'"{bind}": want host:port'))
            else:
                out["metrics"] = {"address": host.strip("[]") or "0.0.0.0", "port": int(port)}
    election = doc.get("leaderElection") or {}
    if isinstance(election, dict):
        out["leader_election"] = _leader_election(election, doc.get("namespace"), problems, ignored)
    fair = doc.get("fairSharing")
    if isinstance(fair, dict):  # v1beta2: present is on
        out["fair_sharing"] = {"enabled": True}
        if fair.get("preemptionStrategies"):
            out["fair_sharing"]["preemption_strategies"] = list(fair["preemptionStrategies"])
    afs = doc.get("admissionFairSharing")
    if isinstance(afs, dict):
        out["admission_fair_sharing"] = _admission_fair_sharing(afs, problems)
    gates = doc.get("featureGates")
    if isinstance(gates, dict):
        out["feature_gates"] = dict(gates)
    resources = doc.get("resources")
    if isinstance(resources, dict):
        out["resources"] = _resources(resources, ignored)
    elastic = doc.get("elasticQuota")  # kueued's own section of the Configuration (Koordinator's settings)
    if isinstance(elastic, dict):
        out["elastic_quota"] = _elastic_quota(elastic, problems, ignored)
    retention = (doc.get("objectRetentionPolicies") or {}).get("workloads") \
        if isinstance(doc.get("objectRetentionPolicies"), dict) else None
    if isinstance(retention, dict):
        out["object_retention"] = {
            key: seconds for field, key in (("afterFinished", "workloads_after_finished"),
                                            ("afterDeactivatedByKueue", "workloads_after_deactivated_by_kueue"))
            if retention.get(field) is not None
            and (seconds := _seconds(retention[field], f"objectRetentionPolicies.workloads.{field}", problems))
            is not None}
    return out, ignored, problems


def _resources(resources: dict[str, Any], ignored: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(resources.get("excludeResourcePrefixes"), list):
        out["exclude_resource_prefixes"] = list(resources["excludeResourcePrefixes"])
    listed = resources.get("transformations")
    if isinstance(listed, list):
        out["transformations"] = [
            {k: v for k, v in (("input", t.get("input")), ("strategy", t.get("strategy")),
                               ("outputs", t.get("outputs")), ("multiply_by", t.get("multiplyBy"))) if v is not None}
            for t in listed if isinstance(t, dict)]
    ignored += [f"resources.{k}" for k in sorted(resources) if k not in ("excludeResourcePrefixes", "transformations")]
    return out


_V1BETA1_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]


def _as_v1beta2(doc: dict[str, Any]) -> dict[str, Any]:
    """v1beta1's ``fairSharing.enable`` as v1beta2 says it: the section present (with v1beta1's
    default strategies) when enabled, absent when not."""
    if not str(doc.get("apiVersion", "")).endswith("/v1beta1") or not isinstance(doc.get("fairSharing"), dict):
        return doc
    doc = dict(doc)
    fair = dict(doc.pop("fairSharing"))
    if fair.pop("enable", False):
        fair.setdefault("preemptionStrategies", list(_V1BETA1_STRATEGIES))
        doc["fairSharing"] = fair
    return doc


def _leader_election(election: dict[str, Any], namespace: object, problems: list[tuple[str, str]],
                     ignored: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "leaderElect" in election:
        out["enabled"] = election["leaderElect"]
    for field, key in (("leaseDuration", "lease_duration"), ("renewDeadline", "renew_deadline"),
                       ("retryPeriod", "retry_period")):
        if field in election:
            seconds = _seconds(election[field], f"leaderElection.{field}", problems)
            if seconds is not None:
                out[key] = seconds
    if election.get("resourceName"):
        out["name"] = election["resourceName"]
    if election.get("resourceNamespace") or namespace:
        out["namespace"] = election.get("resourceNamespace") or namespace
    known = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceName", "resourceNamespace"}
    ignored += [f"leaderElection.{k}" for k in sorted(election) if k not in known]
    return out


def _admission_fair_sharing(afs: dict[str, Any], problems: list[tuple[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"enabled": True}
    for field, key in (("usageHalfLifeTime", "usage_half_life_time"),
                       ("usageSamplingInterval", "usage_sampling_interval")):
        if field in afs:
            seconds = _seconds(afs[field], f"admissionFairSharing.{field}", problems)
            if seconds is not None:
                out[key] = seconds
    if isinstance(afs.get("resourceWeights"), dict):
        out["resource_weights"] = dict(afs["resourceWeights"])
    return out


def _elastic_quota(elastic: dict[str, Any], problems: list[tuple[str, str]], ignored: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if elastic.get("delayEvictTime") is not None:
        seconds = _seconds(elastic["delayEvictTime"], "elasticQuota.delayEvictTime", problems)
        if seconds is not None:
            out["delay_evict_time"] = seconds
    if elastic.get("monitorAllQuotas") is not None:
        out["monitor_all_quotas"] = elastic["monitorAllQuotas"]
    ignored += [f"elasticQuota.{k}" for k in sorted(elastic) if k not in ("delayEvictTime", "monitorAllQuotas")]
    return out


def _seconds(value: object, field: str, problems: list[tuple[str, str]]) -> float | None:
    try:
        return parse_duration(str(value))
    except ValueError as exc:
        problems.append((field, str(exc)))
        return None


def yaml_line(text: str, field: str) -> int | None:
    """The line of ``field`` (``leaderElection.leaseDuration``) in a block-style YAML ``text``."""
    start, line = 0, None
    lines = text.splitlines()
    for part in (p for p in field.replace("[", ".").split(".") if p and not p.rstrip("]").isdigit()):
        for number in range(start, len(lines)):
            if lines[number].strip().startswith((f"{part}:", f'"{part}":')):
                start, line = number + 1, number + 1
                break
        else:
            return line
    return line
