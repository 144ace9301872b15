"""What the elastic engines read from manifests: groups, a workload's request, its group.

Split from ``scheduling/elastic.py`` so that a workload arriving alone (a timeline's
arrival, a daemon's watch event) is read exactly as :func:`~kueued.scheduling.elastic.prepare`
reads a whole batch:

* :func:`group_of_manifest`: an accepted ElasticQuota as an :class:`ElasticGroup`
  (``model.koordinator`` reads the labels; the mutating webhook's shared-weight fixes apply);
* :func:`workload_requests`: the Kubernetes pod rule (PodRequests) times ``count``;
* :func:`quota_of`: GetQuotaName + getPodAssociateQuotaName, the group a workload joins.

Pure functions of their arguments; nothing here keeps state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kueued.model import koordinator as k
from kueued.model.quantity import QuantityError, parse
from kueued.quota.elastic import ElasticGroup, Resources

__all__ = ["workload_requests", "created_at", "group_of_manifest", "quota_of"]


def workload_requests(obj: Mapping[str, Any]) -> Resources:
    """PodRequests per pod set times count, summed; zero entries are kept.

    Per pod: containers' requests (a limit stands in for a missing request) summed, init
    containers taken at their max, overhead added.  Keeping zeros matters: forced
    recycling masks its running total to the names a workload requests.
    """
    total: Resources = {}
    for pod_set in (obj.get("spec") or {}).get("podSets") or []:
        spec = ((pod_set.get("template") or {}).get("spec")) or {}
        pod: Resources = {}
        for c in spec.get("containers") or []:
            for r, v in _container_requests(c).items():
                pod[r] = pod.get(r, 0) + v
        for c in spec.get("initContainers") or []:
            for r, v in _container_requests(c).items():
                pod[r] = max(pod.get(r, 0), v)
        for r, q in (spec.get("overhead") or {}).items():
            pod[r] = pod.get(r, 0) + parse(q)
        count = pod_set.get("count")
        count = 1 if count is None else int(count)
        for r, v in pod.items():
            total[r] = total.get(r, 0) + v * count
    return total


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    out = {r: parse(q) for r, q in (resources.get("limits") or {}).items()}
    out.update({r: parse(q) for r, q in (resources.get("requests") or {}).items()})
    return out


def created_at(text: object) -> float:
    """RFC 3339 to epoch seconds; a missing or unreadable stamp sorts first."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else 0.0
    except ValueError:
        return 0.0


def group_of_manifest(obj: Mapping[str, Any]) -> ElasticGroup | None:
    spec = obj.get("spec") or {}
    try:
        max_ = k.resource_list(spec.get("max"))
        min_ = k.resource_list(spec.get("min"))
    except (QuantityError, TypeError):
        return None  # never accepted by validation; ignore rather than guess
    return ElasticGroup(
        name=k.name_of(obj), parent=k.parent_name(obj), is_parent=k.is_parent(obj),
        min=min_, max=max_, shared_weight=k.effective_shared_weight(obj, max_),
        allow_lent_resource=k.allow_lent_resource(obj),
    )


def quota_of(
    obj: Mapping[str, Any], groups: Mapping[str, ElasticGroup], quotas: Sequence[Mapping[str, Any]]
) -> str:
    """getPodAssociateQuotaName: GetQuotaName (``model.koordinator.pod_quota_name``), then the
    default group for a name that is no known group (or the root's)."""
    name = k.pod_quota_name(obj, quotas)
    return name if name in groups and name != k.ROOT_QUOTA else k.DEFAULT_QUOTA
