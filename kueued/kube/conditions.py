"""Status conditions merged as ``metav1``'s ``SetStatusCondition`` merges them, for every status kueued writes."""

from __future__ import annotations

from typing import Any

from kueued.kube.port import Condition

__all__ = ["merge_conditions"]


def merge_conditions(current: list[dict[str, Any]], new: list[Condition], *, generation: int | None,
                     now: str) -> list[dict[str, Any]]:
    """``current`` with each of ``new`` set by type (metav1's SetStatusCondition)."""
    out = [dict(c) for c in current if isinstance(c, dict)]
    for cond in new:
        entry: dict[str, Any] = {"type": cond.type, "status": cond.status, "reason": cond.reason,
                                 "message": cond.message, "lastTransitionTime": now}
        if generation is not None:
            entry["observedGeneration"] = generation
        for i, old in enumerate(out):
            if old.get("type") == cond.type:
                if old.get("status") == cond.status and old.get("lastTransitionTime"):
                    entry["lastTransitionTime"] = old["lastTransitionTime"]
                out[i] = entry
                break
        else:
            out.append(entry)
    return out
