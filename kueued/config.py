"""kueued's own settings: one TOML file (``config/kueued.toml``), its defaults, and their reload.

Where a setting comes from, strongest first: a command-line flag, the file given with
``kueued run --config FILE``, the defaults of the Structs below (the only place they are
written; the flags' help and ``config/kueued.toml`` quote them).  Keys are snake_case, as
the Structs' fields, in the tables ``[kube] [metrics] [leader_election] [fair_sharing]
[admission_fair_sharing] [elastic_quota] [feature_gates] [resources] [object_retention] [log]
[daemon]``; durations are
seconds (a number), as the flags take them.

The file is decoded strictly (msgspec, ``forbid_unknown_fields``): an unknown key or a bad
value is a :class:`ConfigError` naming the key and ``FILE:LINE``.  msgspec says where in the
document (``$.metrics.port``); :func:`line_of` finds that key in the text.

The scheduling sections (fair sharing, admission fair sharing, elastic quota, feature gates,
the resources quota counts, object retention)
stand for a Kueue ``Configuration`` (:func:`configuration_manifest`): the daemon applies it
through the World's door as any Configuration object, so a reload takes the same path, and a
Configuration among the watched objects (the manifest directory, the cluster) wins over it as a
whole, as it always did.  :class:`kueued.config_live.Live` is what the daemon holds: the settings
in force, re-read on SIGHUP, where the safe ones change in place and the others wait for a restart.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import structlog
import yaml

from kueued.errors import KueuedError
from kueued.kueue_config import is_kueue_configuration, settings_from, yaml_line
from kueued.model.settings import DEFAULT_DELAY_EVICT_TIME, Settings
from kueued.model.validation import CONFIG_GROUP
from kueued.model.validation.configuration import validate_configuration
from kueued.scheduling.fairsharing.admission import DEFAULT_HALF_LIFE, DEFAULT_SAMPLING_INTERVAL

__all__ = ["Config", "ConfigError", "Problem", "DEFAULTS", "FLAGS", "RESTART_SECTIONS", "load",
           "line_of", "with_flags", "configuration_manifest", "summary"]

log = structlog.get_logger("kueued.config")

Seconds = Annotated[float, msgspec.Meta(ge=0)]
Interval = Annotated[float, msgspec.Meta(ge=0.01, le=3600)]  # 0 would poll in a busy loop
Positive = Annotated[float, msgspec.Meta(gt=0)]


class Kube(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    kubeconfig: str = ""  # "": $KUBECONFIG, then ~/.kube/config, then in-cluster
    context: str = ""  # "": the kubeconfig's current context
    insecure_skip_tls_verify: bool = False
    job_integration: bool = True


class Metrics(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """One HTTP server: /metrics, /healthz and /readyz (kueued.health)."""

    address: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 0  # 0: off


class LeaderElection(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    enabled: bool = False
    namespace: str = "kueued-system"
    name: str = "kueued"
    identity: str = ""  # "": the host name and a random suffix
    lease_duration: Positive = 15.0  # Kueue's (controller-runtime's) 15s, 10s, 2s
    renew_deadline: Positive = 10.0
    retry_period: Positive = 2.0


_STRATEGIES: list[str] = Settings().preemption_strategies


class FairSharing(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    enabled: bool = False
    preemption_strategies: list[str] = msgspec.field(default_factory=lambda: list(_STRATEGIES))


class AdmissionFairSharing(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    enabled: bool = False
    usage_half_life_time: Seconds = DEFAULT_HALF_LIFE
    usage_sampling_interval: Seconds = DEFAULT_SAMPLING_INTERVAL
    resource_weights: dict[str, Annotated[float, msgspec.Meta(ge=0)]] = {}


class ElasticQuota(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    delay_evict_time: Seconds = DEFAULT_DELAY_EVICT_TIME
    monitor_all_quotas: bool = False  # Koordinator's default: no forced recycling


class Transformation(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Kueue's ``resources.transformations[]``: each whole unit of ``input`` counts as ``outputs``."""

    input: str
    strategy: Literal["Retain", "Replace"] = "Retain"  # Retain: the input counts too
    outputs: dict[str, str | int | float] = {}  # resource -> quantity per unit of the input
    multiply_by: str = ""


class Resources(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """What quota counts of a pod's requests (Kueue's Configuration ``resources``)."""

    exclude_resource_prefixes: list[str] = []
    transformations: list[Transformation] = []


class ObjectRetention(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Kueue's ``objectRetentionPolicies.workloads`` (seconds; absent: kept for good)."""

    workloads_after_finished: Seconds | None = None
    workloads_after_deactivated_by_kueue: Seconds | None = None


class Log(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING"
    format: Literal["auto", "json", "console"] = "auto"  # auto: JSON lines for `run` off a terminal


class Daemon(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    interval: Interval = 2.0
    # ClusterQueue, LocalQueue and Cohort status writes a second, on average, under load
    # (kueued.kube.status_publisher, module notes 4)
    status_writes_per_second: Annotated[float, msgspec.Meta(ge=0.1, le=10_000)] = 20.0


class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    kube: Kube = msgspec.field(default_factory=Kube)
    metrics: Metrics = msgspec.field(default_factory=Metrics)
    leader_election: LeaderElection = msgspec.field(default_factory=LeaderElection)
    fair_sharing: FairSharing = msgspec.field(default_factory=FairSharing)
    admission_fair_sharing: AdmissionFairSharing = msgspec.field(default_factory=AdmissionFairSharing)
    elastic_quota: ElasticQuota = msgspec.field(default_factory=ElasticQuota)
    feature_gates: dict[str, bool] = {}
    resources: Resources = msgspec.field(default_factory=Resources)
    object_retention: ObjectRetention = msgspec.field(default_factory=ObjectRetention)
    log: Log = msgspec.field(default_factory=Log)
    daemon: Daemon = msgspec.field(default_factory=Daemon)


DEFAULTS = Config()

FLAGS: dict[str, str] = {
    "kube.kubeconfig": "kubeconfig", "kube.context": "context",
    "kube.insecure_skip_tls_verify": "insecure_skip_tls_verify", "kube.job_integration": "job_integration",
    "metrics.address": "metrics_address", "metrics.port": "metrics_port",
    "leader_election.enabled": "leader_elect", "leader_election.namespace": "leader_elect_namespace",
    "leader_election.name": "leader_elect_name", "leader_election.identity": "leader_elect_identity",
    "leader_election.lease_duration": "leader_elect_lease_duration",
    "leader_election.renew_deadline": "leader_elect_renew_deadline",
    "leader_election.retry_period": "leader_elect_retry_period",
    "log.level": "log_level", "log.format": "log_format", "daemon.interval": "interval",
}
"""Setting -> the ``argparse`` dest of the flag that overrides it (None when not given)."""

RESTART_SECTIONS = ("kube", "metrics", "leader_election")
"""What a running daemon cannot change in place: the connection, the listening socket, the lease."""


class Problem(msgspec.Struct, frozen=True):
    """One thing wrong in a config file: where (``line`` 0 when unknown), which key, why."""

    file: str
    line: int
    key: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: {self.reason}" if self.key else f"{where}: {self.reason}"


class ConfigError(KueuedError):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


# --- reading -------------------------------------------------------------------------------------

_AT = re.compile(r"^(?P<why>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]+)`$")
_TOML_AT = re.compile(r"\(at line (?P<line>\d+), column \d+\)")
# Kueue Configuration fields -> our keys, for the errors its validation finds in the scheduling sections
_KUEUE_KEYS = {"fairSharing.preemptionStrategies": "fair_sharing.preemption_strategies",
               "admissionFairSharing.usageHalfLifeTime": "admission_fair_sharing.usage_half_life_time",
               "admissionFairSharing.usageSamplingInterval": "admission_fair_sharing.usage_sampling_interval",
               "admissionFairSharing.resourceWeights": "admission_fair_sharing.resource_weights",
               "elasticQuota.delayEvictTime": "elastic_quota.delay_evict_time",
               "elasticQuota.monitorAllQuotas": "elastic_quota.monitor_all_quotas", "featureGates": "feature_gates",
               "resources.excludeResourcePrefixes": "resources.exclude_resource_prefixes",
               "resources.transformations": "resources.transformations",
               "objectRetentionPolicies.workloads.afterFinished": "object_retention.workloads_after_finished",
               "objectRetentionPolicies.workloads.afterDeactivatedByKueue":
                   "object_retention.workloads_after_deactivated_by_kueue"}


def load(path: Path) -> Config:
    """The file's settings over the defaults; :class:`ConfigError` names each bad key and its line."""
    name = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError([Problem(name, 0, "", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise ConfigError([Problem(name, 0, "", "not UTF-8")]) from None
    if path.suffix in (".yaml", ".yml", ".json") or text.lstrip().startswith("apiVersion"):
        return _load_kueue(name, text)
    try:
        config = msgspec.toml.decode(data, type=Config)
    except msgspec.ValidationError as exc:
        raise ConfigError([_problem(name, text, str(exc))]) from None
    except (msgspec.DecodeError, tomllib.TOMLDecodeError) as exc:
        at = _TOML_AT.search(str(exc))
        raise ConfigError([Problem(name, int(at["line"]) if at else 0, "", f"not valid TOML: {exc}")]) from None
    problems = [Problem(name, line_of(text, key) or 0, key, reason) for key, reason in _check(config)]
    if problems:
        raise ConfigError(problems)
    return config


def _load_kueue(name: str, text: str) -> Config:
    """Kueue's own Configuration file (:mod:`kueued.kueue_config`): the fields kueued shares."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError([Problem(name, mark.line + 1 if mark else 0, "", "not valid YAML")]) from None
    if not is_kueue_configuration(doc):
        raise ConfigError([Problem(name, 1, "kind", "a YAML config must be Kueue's Configuration "
                                   "(apiVersion config.kueue.x-k8s.io/v1beta1 or v1beta2, kind Configuration); "
                                   "kueued's own settings are TOML")])
    settings, ignored, problems = settings_from(doc)
    if problems:
        raise ConfigError([Problem(name, yaml_line(text, field) or 0, field, why) for field, why in problems])
    if ignored:
        log.info("config_fields_ignored", file=name, fields=ignored)
    try:
        config = msgspec.convert(settings, type=Config)
    except msgspec.ValidationError as exc:
        problem = _problem(name, "", str(exc))
        raise ConfigError([Problem(name, 0, problem.key, problem.reason)]) from None
    problems_ = [Problem(name, 0, key, reason) for key, reason in _check(config)]
    if problems_:
        raise ConfigError(problems_)
    return config


def _problem(name: str, text: str, message: str) -> Problem:
    match = _AT.match(message)
    assert match is not None  # the pattern matches any text
    why, path = match["why"], (match["path"] or "").lstrip(".")
    unknown = _UNKNOWN.match(why)
    if unknown:
        path = f"{path}.{unknown['name']}" if path else unknown["name"]
        why = "unknown key (a typo? see config/kueued.toml for every key)"
    key = re.sub(r"\[[^\]]*\]", "", path)  # a list index or msgspec's [...] for a map's value
    return Problem(name, line_of(text, key) or 0, key, why)


def _check(config: Config) -> list[tuple[str, str]]:
    """What the types cannot say: the scheduling sections pass Kueue's Configuration validation."""
    manifest = configuration_manifest(config)
    if manifest is None:
        return []
    out = []
    for error in validate_configuration(manifest, None):
        key = next((ours for theirs, ours in _KUEUE_KEYS.items() if error.path.startswith(theirs)), error.path)
        out.append((key, error.reason))
    return out


def line_of(text: str, key: str) -> int | None:
    """The line of ``key`` (``metrics.port``) in TOML ``text``: its ``key =`` line, else its table's header."""
    want = [p for p in key.split(".") if p]
    table: list[str] = []
    near = None  # the first line below the key (a dotted key, a sub-table), if it has no line of its own
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        header = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", line)
        assign = None if header else re.match(r"^([A-Za-z0-9_.\-\"' ]+?)\s*=", line)
        if header:
            table = _dotted(header[1])
            full = table
        elif assign:
            full = table + _dotted(assign[1])
        else:
            continue
        if full == want:
            return number
        if near is None and want and full[:len(want)] == want:
            near = number
    if near is not None:
        return near
    return line_of(text, ".".join(want[:-1])) if len(want) > 1 else None


def _dotted(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in text.split(".")]


def with_flags(config: Config, flags: Mapping[str, Any]) -> Config:
    """``config`` with each flag that was given (not None) in place of the setting it names."""
    sections: dict[str, dict[str, Any]] = {}
    for key, dest in FLAGS.items():
        value = flags.get(dest)
        if value is None:
            continue
        section, field = key.split(".")
        sections.setdefault(section, {})[field] = str(value) if isinstance(value, Path) else value
    changes = {s: msgspec.structs.replace(getattr(config, s), **fields) for s, fields in sections.items()}
    return msgspec.structs.replace(config, **changes)


# --- what the settings mean ----------------------------------------------------------------------

def configuration_manifest(config: Config) -> dict[str, Any] | None:
    """The Kueue Configuration the scheduling sections stand for; None when they are all defaults."""
    if (config.fair_sharing.enabled, config.admission_fair_sharing.enabled, config.elastic_quota,
            config.feature_gates, config.resources, config.object_retention) == (
                False, False, DEFAULTS.elastic_quota, {}, DEFAULTS.resources, DEFAULTS.object_retention):
        return None
    out: dict[str, Any] = {"apiVersion": CONFIG_GROUP, "kind": "Configuration"}
    if config.fair_sharing.enabled:
        out["fairSharing"] = {"preemptionStrategies": list(config.fair_sharing.preemption_strategies)}
    afs = config.admission_fair_sharing
    if afs.enabled:
        out["admissionFairSharing"] = {"usageHalfLifeTime": f"{afs.usage_half_life_time:g}s",
                                       "usageSamplingInterval": f"{afs.usage_sampling_interval:g}s",
                                       "resourceWeights": dict(afs.resource_weights)}
    out["elasticQuota"] = {"delayEvictTime": f"{config.elastic_quota.delay_evict_time:g}s",
                           "monitorAllQuotas": config.elastic_quota.monitor_all_quotas}
    if config.feature_gates:
        out["featureGates"] = dict(config.feature_gates)
    if config.resources != DEFAULTS.resources:
        out["resources"] = {"excludeResourcePrefixes": list(config.resources.exclude_resource_prefixes),
                            "transformations": [{"input": t.input, "strategy": t.strategy, "outputs": dict(t.outputs),
                                                 **({"multiplyBy": t.multiply_by} if t.multiply_by else {})}
                                                for t in config.resources.transformations]}
    retention = config.object_retention
    if retention != DEFAULTS.object_retention:
        out["objectRetentionPolicies"] = {"workloads": {k: f"{v:g}s" for k, v in (
            ("afterFinished", retention.workloads_after_finished),
            ("afterDeactivatedByKueue", retention.workloads_after_deactivated_by_kueue)) if v is not None}}
    return out


def summary(config: Config) -> str:
    """One line: what this config makes the daemon do."""
    kube = config.kube.kubeconfig or "$KUBECONFIG/~/.kube/config/in-cluster"
    metrics = f"{config.metrics.address}:{config.metrics.port}" if config.metrics.port else "off"
    le = config.leader_election
    lease = f"{le.namespace}/{le.name}" if le.enabled else "off"
    on = {True: "on", False: "off"}
    return (f"kubeconfig {kube}, metrics {metrics}, leader election {lease}, "
            f"fair sharing {on[config.fair_sharing.enabled]}, "
            f"admission fair sharing {on[config.admission_fair_sharing.enabled]}, "
            f"elastic recycling {on[config.elastic_quota.monitor_all_quotas]} "
            f"(delay {config.elastic_quota.delay_evict_time:g}s), interval {config.daemon.interval:g}s, "
            f"log {config.log.level} {config.log.format}")
