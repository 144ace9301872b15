"""How long a workload waited before it was admitted, as Kueue's ``QueuedWaitTime`` counts it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from actors.events import queued_since
from kueued.model.clock import rfc3339


def _manifest(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"conditions": list(conditions)}}


def test_a_workload_never_requeued_waited_since_it_was_created() -> None:
    wl: Any = SimpleNamespace(created=1_000.0)
    assert queued_since(_manifest(), wl) == 1_000.0
    assert queued_since({"status": "bad"}, wl) == 1_000.0


def test_a_requeued_workload_waited_since_its_requeue() -> None:
    """Evicted, then admitted again: the QuotaReserved Event and the admission wait metric count from the
    Requeued condition's transition, not from the workload's creation long before."""
    wl: Any = SimpleNamespace(created=1_000.0)
    requeued = {"type": "Requeued", "status": "True", "reason": "Preempted", "lastTransitionTime": rfc3339(5_000.0)}
    assert queued_since(_manifest({"type": "Admitted", "status": "False"}, requeued), wl) == 5_000.0
