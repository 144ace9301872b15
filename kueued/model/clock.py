"""Kubernetes timestamps: RFC 3339 in UTC, to the second (``metav1.Time``'s wire form)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["rfc3339"]


def rfc3339(epoch: float | None = None) -> str:
    """``epoch`` (seconds; now when None) as ``2026-01-01T00:00:00Z``."""
    moment = datetime.now(UTC) if epoch is None else datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
