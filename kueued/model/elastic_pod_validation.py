"""Koordinator's pod webhook rules for elastic quota, applied to the Workloads that stand for pods.

Why: in kueued one Workload is one Koordinator pod when it names a quota (the
``quota.scheduling.koordinator.sh/name`` label) or names no LocalQueue
(``koordinator.is_elastic_pod``).  Koordinator's validating pod webhook
(``pkg/webhook/elasticquota/pod_check.go``: quotaTopology.ValidateAddPod,
ValidateUpdatePod) refuses two things about such a pod, and a refused pod never reaches
the scheduler; a refused update leaves the earlier version in force:

1. On update, the ``preemptible`` *label* may not change (the annotation is not
   compared): "Preemptible label is forbidden modify now."
2. On create and update, unless the feature gate ``SupportParentQuotaSubmitPod`` (alpha,
   off by default) is on, the pod's quota may not be a parent quota.  The quota is
   GetQuotaName's (label, else the namespace's quota, else a quota whose ``namespaces``
   annotation lists the namespace, else the default quota); a name the webhook does not
   know means the default quota, which is always allowed.  Whether a quota is a parent is
   its ``is-parent`` label, as the webhook's quotaInfoMap holds it.

Errors are :class:`FieldError` values on the label that carries the fault (the namespace
when the quota comes from it), with Koordinator's own sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueued.errors import FieldError
from kueued.model import koordinator as k

__all__ = ["validate_elastic_pod"]


def validate_elastic_pod(
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None,
    quotas: Mapping[str, Mapping[str, Any]],
    parent_quota_pods: bool = False,
) -> list[FieldError]:
    """Why the pod ``obj`` must be refused, or [] when Koordinator's webhook admits it.

    ``old`` is the version in force when ``obj`` is an update; ``quotas`` are the accepted
    ElasticQuota manifests by name; ``parent_quota_pods`` is the SupportParentQuotaSubmitPod gate.
    """
    if old is not None and k.labels(old).get(k.LABEL_PREEMPTIBLE) != k.labels(obj).get(k.LABEL_PREEMPTIBLE):
        return [FieldError(f"metadata.labels[{k.LABEL_PREEMPTIBLE}]",
                           "Preemptible label is forbidden modify now.")]
    if parent_quota_pods:
        return []
    name = k.pod_quota_name(obj, quotas.values())
    quota = quotas.get(name)
    if name == k.DEFAULT_QUOTA or quota is None or not k.is_parent(quota):
        return []
    path = f"metadata.labels[{k.LABEL_QUOTA_NAME}]" if k.workload_quota_label(obj) else "metadata.namespace"
    return [FieldError(path, f"pod can not be linked to a parentQuotaGroup,quota:{name}, pod:{k.name_of(obj)}")]
