"""What the Job controller reads from the API besides its caches, each read when it is needed.

A Workload created for a Job takes its priority as Kueue resolves it (:func:`priority_of`:
the ``kueue.x-k8s.io/priority-class`` WorkloadPriorityClass, else the pods' PriorityClass,
else the global default PriorityClass, else 0); a Job started takes the node labels and
tolerations of the ResourceFlavors its Workload was assigned (:func:`assigned_flavors`).
Neither kind is watched: these are read once per Workload created or Job started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from kueued.kube import job_workload as jw
from kueued.kube.client import PRIORITY_CLASS
from kueued.kube.errors import ApiForbidden, ApiNotFound
from kueued.kube.job_cache import meta

if TYPE_CHECKING:
    from kueued.kube.jobs import JobClient

__all__ = ["assigned_flavors", "priority_of"]

log = structlog.get_logger("kueued.kube.job_lookups")


async def assigned_flavors(client: JobClient, admission: dict[str, Any]) -> list[dict[str, Any]]:
    """The ResourceFlavors assigned to the pod set ``main``, by name."""
    names: set[str] = set()
    for assignment in admission.get("podSetAssignments") or ():
        if isinstance(assignment, dict) and assignment.get("name", jw.POD_SET) == jw.POD_SET:
            names.update(str(f) for f in (assignment.get("flavors") or {}).values())
    return [await client.get("ResourceFlavor", None, name) for name in sorted(names)]


async def priority_of(client: JobClient, job: dict[str, Any]) -> jw.Priority:
    """Kueue's order: the WorkloadPriorityClass label, the pods' PriorityClass, the global default, 0."""
    labels = meta(job).get("labels") or {}
    if wpc := labels.get(jw.PRIORITY_CLASS_LABEL):
        obj = await client.get("WorkloadPriorityClass", None, wpc)
        return jw.Priority(_int(obj.get("value")),
                           {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": wpc})
    template = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    if pc := template.get("priorityClassName"):
        obj = await client.get(PRIORITY_CLASS, None, pc)
        return jw.Priority(_int(obj.get("value")), {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                    "name": pc})
    try:
        classes, _ = await client.list(PRIORITY_CLASS)
    except (ApiForbidden, ApiNotFound) as exc:
        log.warning("priority_classes_unreadable", error=type(exc).__name__, detail=exc.message[:200])
        return jw.Priority(0)
    default = sorted((c for c in classes if c.get("globalDefault") is True),
                     key=lambda c: str(meta(c).get("name")))
    if default:
        name = str(meta(default[0]).get("name"))
        return jw.Priority(_int(default[0].get("value")),
                           {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name})
    return jw.Priority(0)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
