"""What a Workload's status says, read defensively from its manifest: the pure predicates the Job
integration decides on (``kueued.kube.job_workload``) and the API port reads its own writes back
with (``kueued.kube.commits``).  A malformed field reads as absent, never as an exception."""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = ["condition_true", "has_reservation", "is_admitted", "is_evicted", "owner_uid", "admitted_to", "evicted_for",
           "released", "accumulated", "evictions_counted", "condition", "transitioned_at", "deactivation_cause",
           "DEACTIVATED_DUE_TO"]

DEACTIVATED_DUE_TO = "DeactivatedDueTo"
"""How Kueue's Evicted reason names why a workload was deactivated: ``DeactivatedDueTo<cause>``."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return _dict(obj.get("metadata"))


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    return any(_dict(c).get("type") == kind and _dict(c).get("status") == "True"
               for c in _list(_dict(obj.get("status")).get("conditions")))


def has_reservation(workload: dict[str, Any]) -> bool:
    return bool(_dict(workload.get("status")).get("admission")) and condition_true(workload, "QuotaReserved")


def is_admitted(workload: dict[str, Any]) -> bool:
    return bool(_dict(workload.get("status")).get("admission")) and condition_true(workload, "Admitted")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of type ``kind``, if there is one."""
    return next((c for c in map(_dict, _list(_dict(obj.get("status")).get("conditions"))) if c.get("type") == kind),
                None)



def transitioned_at(obj: dict[str, Any], kind: str, *, status: str | None = "True") -> float | None:
    """When the ``kind`` condition last changed (epoch seconds), if it is there (with ``status``, unless
    None) and says so readably."""
    found = condition(obj, kind)
    if found is None or (status is not None and found.get("status") != status):
        return None
    at = _time(found.get("lastTransitionTime"))
    return None if at is None else at.timestamp()


def deactivation_cause(reason: str) -> tuple[str, str]:
    """(reason, underlying cause) of an Evicted reason, as Kueue counts them: ``DeactivatedDueToX`` is
    ``Deactivated`` caused by ``X``; any other reason has no cause."""
    if reason.startswith(DEACTIVATED_DUE_TO):
        return "Deactivated", reason[len(DEACTIVATED_DUE_TO):]
    return reason, ""


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def is_evicted(workload: dict[str, Any]) -> bool:
    """``Evicted=True`` and not since reserved again.

    Kueue resets ``Evicted`` to False when it reserves quota again; a writer that does not
    leaves a stale True beside a fresh reservation, so a reservation made after the eviction
    (``QuotaReserved`` changed later) wins.  On a tie (the same second) the reservation wins
    too: an eviction's second phase clears the admission at once, which stops the Job anyway.
    """
    evicted = condition(workload, "Evicted")
    if evicted is None or evicted.get("status") != "True":
        return False
    if not has_reservation(workload):
        return True
    reserved = condition(workload, "QuotaReserved") or {}
    evicted_at, reserved_at = _time(evicted.get("lastTransitionTime")), _time(reserved.get("lastTransitionTime"))
    if evicted_at is None or reserved_at is None:
        return True
    return evicted_at > reserved_at


def owner_uid(workload: dict[str, Any]) -> tuple[str, str] | None:
    """(Job name, Job uid) of the batch/v1 Job that controls ``workload``, if one does."""
    for ref in _list(_meta(workload).get("ownerReferences")):
        ref = _dict(ref)
        if ref.get("controller") is True and ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1":
            return str(ref.get("name", "")), str(ref.get("uid", ""))
    return None


def admitted_to(cluster_queue: str, current: dict[str, Any]) -> bool:
    """The admission kueued wrote is there (a commit in doubt, read back)."""
    return _dict(_dict(current.get("status")).get("admission")).get("clusterQueue") == cluster_queue


def evicted_for(message: str, current: dict[str, Any]) -> bool:
    """``Evicted=True`` with this message: the eviction kueued wrote is there."""
    evicted = condition(current, "Evicted")
    return evicted is not None and evicted.get("status") == "True" and evicted.get("message") == message


def released(current: dict[str, Any]) -> bool:
    """No admission held: an eviction's second phase is there."""
    return not _dict(current.get("status")).get("admission")


def accumulated(workload: dict[str, Any], now: float) -> int | None:
    """Kueue's ``accumulatedPastExecutionTimeSeconds`` once an admission ends: what it held plus the
    whole seconds since the Admitted condition turned on; None when the workload was not admitted."""
    began = transitioned_at(workload, "Admitted")
    if began is None:
        return None
    held = _dict(workload.get("status")).get("accumulatedPastExecutionTimeSeconds")
    return (held if isinstance(held, int) else 0) + int(max(0.0, now - began))


def evictions_counted(workload: dict[str, Any], reason: str) -> tuple[list[dict[str, Any]], bool]:
    """``status.schedulingStats.evictions`` with one more eviction for ``reason`` (Kueue's
    ``workloadEvictionStateInc``): entries by (reason, underlyingCause); a deactivation with a cause
    (``DeactivatedDueToX``) counts under reason ``Deactivated``, cause ``X``.  Also whether this is
    the first such eviction (the count was 0: Kueue then reports ``evicted_workloads_once_total``)."""
    base, cause = deactivation_cause(reason)
    stats = _dict(_dict(workload.get("status")).get("schedulingStats"))
    entries = [dict(e) for e in map(_dict, _list(stats.get("evictions"))) if e.get("reason")]
    for entry in entries:
        if (entry.get("reason"), entry.get("underlyingCause", "")) == (base, cause):
            count = entry.get("count")
            before = count if isinstance(count, int) else 0
            entry["count"] = before + 1
            return entries, before == 0
    entries.append({"reason": base, "count": 1, **({"underlyingCause": cause} if cause else {})})
    return entries, True
