"""Kueue's admission rules, applied to raw manifests before anything else sees them.

Why this exists
---------------
In a real cluster three gates stand between ``kubectl apply`` and Kueue's controllers:
the API server's generic checks (object names, labels), the CRD's OpenAPI schema with its
kubebuilder markers and CEL rules (enums, ``MaxItems``, patterns, transition rules such as
"``spec.clusterQueue`` is immutable"), and Kueue's validating webhooks
(``pkg/webhooks/*_webhook.go``).  Kueue's manager Configuration has a fourth,
``pkg/config/validation.go``, run once at start-up.  kueued has none of that machinery, so
this package reproduces the rules: an object refused here takes no part in scheduling, and
a refused update leaves the previously accepted version in force.

How data flows
--------------
:func:`validate_object` receives one manifest exactly as ``yaml.safe_load`` produced it,
plus ``old``, the last *accepted* version of the same object when this is an update.  It
dispatches on (apiVersion, kind) to one module per kind; each returns a list of
:class:`~kueued.errors.FieldError` with Kubernetes-style paths
(``spec.resourceGroups[0].flavors[1].resources[0].lendingLimit``) and the reason a user of
Kueue would read.  ``[]`` means accepted.  Kinds that Kueue does not validate (Nodes,
Koordinator's ElasticQuota, anything unknown) yield ``[]``: someone else owns them.

The walk is over raw dicts, not decoded Structs, on purpose: a schema error (``count:
"three"``, ``nominalQuota: ten``) must be *reported* with its path, not crash a decoder,
and defaults matter to the rules (CEL runs after defaulting), so each rule reads fields
with their Kueue defaults in mind.  References to other objects (a missing cohort, flavor
or LocalQueue) are never errors here: Kueue resolves them later, at scheduling time.

Every rule runs for every object, but not always afresh: a batch system sends the same few
Workload specs thousands of times, so the Workload spec and pod templates are checked once
per content and replayed from a bounded memo (:mod:`.memo`), and the string grammars
remember their verdict per string.  Anything whose errors name the object (its metadata)
or depend on another version (``old``) is checked every time.

Modules: :mod:`.fields` (error wording, typed reads), :mod:`.names` (name, label,
selector and quantity grammars), :mod:`.meta` (metadata, Namespace), :mod:`.memo`
(verdicts remembered by content), then one module per
kind: :mod:`.clusterqueue` (ClusterQueue and Cohort), :mod:`.localqueue`,
:mod:`.resourceflavor`, :mod:`.workload`, :mod:`.priorityclass`, :mod:`.configuration`;
and :mod:`.policy`, kueued's own ``kueued.io/admission-policy`` annotation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kueued.errors import FieldError
from kueued.model.validation.known_fields import unknown_fields

from .clusterqueue import validate_cluster_queue, validate_cohort
from .configuration import validate_configuration
from .limitrange import validate_limit_range
from .localqueue import validate_local_queue
from .meta import validate_namespace
from .policy import check_admission_policy
from .priorityclass import validate_workload_priority_class
from .resourceflavor import validate_resource_flavor
from .workload import validate_workload

__all__ = ["validate_object", "KUEUE_GROUP", "CONFIG_GROUP"]

KUEUE_GROUP = "kueue.x-k8s.io/v1beta2"
CONFIG_GROUP = "config.kueue.x-k8s.io/v1beta2"

Validator = Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]

_VALIDATORS: dict[tuple[str, str], Validator] = {
    (KUEUE_GROUP, "ResourceFlavor"): validate_resource_flavor,
    (KUEUE_GROUP, "Cohort"): validate_cohort,
    (KUEUE_GROUP, "ClusterQueue"): validate_cluster_queue,
    (KUEUE_GROUP, "LocalQueue"): validate_local_queue,
    (KUEUE_GROUP, "Workload"): validate_workload,
    (KUEUE_GROUP, "WorkloadPriorityClass"): validate_workload_priority_class,
    (CONFIG_GROUP, "Configuration"): validate_configuration,
    ("v1", "Namespace"): validate_namespace,
    ("v1", "LimitRange"): validate_limit_range,
}


_TOP_LEVEL = {"WorkloadPriorityClass": frozenset({"apiVersion", "kind", "metadata", "value", "description"})}
_OBJECT = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})


def _unknown_top_level(obj: dict[str, Any]) -> list[FieldError]:
    """A top-level field the kind does not have (``sepc:``): ``kubectl apply`` refuses it (strict
    field validation), so ``simulate`` does not quietly read the object without it.  The
    Configuration's own check covers its fields."""
    kind = obj.get("kind")
    if kind == "Configuration":
        return []
    allowed = _TOP_LEVEL.get(str(kind), _OBJECT)
    return [FieldError(str(k), f'unknown field "{k}"') for k in obj if k not in allowed]


def validate_object(obj: dict[str, Any], *, old: dict[str, Any] | None = None,
                    feature_gates: Mapping[str, bool] | None = None) -> list[FieldError]:
    """Every reason Kueue (or the API server in front of it) would refuse ``obj``; [] if none.

    ``old`` is the previously accepted version of the same object for an update, else None.
    ``feature_gates`` are the gates the running Configuration spelled out (``Settings.feature_gates``);
    a gate it leaves out, or all of them when None, takes Kueue's default.  Only the Workload's
    rules read gates so far.
    """
    if not isinstance(obj, dict):
        return [FieldError(path="", reason="Invalid value: a manifest must be a mapping")]
    validator = _VALIDATORS.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if validator is None:
        return []
    previous = old if isinstance(old, dict) else None
    found = (validate_workload(obj, previous, feature_gates=feature_gates) if validator is validate_workload
             else validator(obj, previous))
    said = {e.path for e in found}  # a field the kind's rules name with their own reason is not "unknown" too
    errors = [*_unknown_top_level(obj), *(e for e in unknown_fields(obj) if e.path not in said), *found]
    if obj.get("kind") in ("Cohort", "ClusterQueue"):
        errors += check_admission_policy(obj)  # kueued's own annotation (KEP-1093 policies)
    return errors
