"""The annotation writes of :mod:`kueued.kube.in_force`, made on the status publisher's pass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from kueued.kube.errors import ApiError, ApiForbidden, ApiInvalid, ApiNotFound
from kueued.kube.in_force import IN_FORCE_ANNOTATION, Keep, _meta

__all__ = ["InForceWriter"]

log = structlog.get_logger("kueued.kube.in_force")


class InForceWriter:
    """The annotation writes :func:`wanted` asks for, made on the status publisher's next pass (a
    merge patch of the object's annotations; a refused write is tried again on the next pass, a
    newer wish for the same object replaces an older one)."""

    def __init__(self) -> None:
        self._due: dict[tuple[str, str, str], str | None] = {}  # (kind, namespace, name) -> value
        self._warned: set[tuple[str, str, str]] = set()  # failing writes already logged (once each)

    def __len__(self) -> int:
        return len(self._due)

    def note(self, manifest: Mapping[str, Any], value: str | None | Keep) -> None:
        if isinstance(value, Keep):
            return
        meta = _meta(manifest)
        self._due[(str(manifest.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))] = value

    async def flush(self, client: Any) -> int:
        """Write every wish; how many landed (an object gone meanwhile counts as done)."""
        done = 0
        for target, value in list(self._due.items()):
            kind, namespace, name = target
            try:
                await client.patch(kind, namespace or None, name, {"metadata": {"annotations": {
                    IN_FORCE_ANNOTATION: value}}})
            except ApiNotFound:
                pass
            except ApiError as exc:
                permanent = isinstance(exc, ApiForbidden | ApiInvalid)  # tried again, it would fail again
                if permanent or target not in self._warned:
                    self._warned.add(target)
                    log.warning("in_force_write_failed", object=f"{kind}/{namespace}/{name}".replace("//", "/"),
                                error=type(exc).__name__, detail=str(exc)[:200], dropped=permanent)
                if permanent and self._due.get(target) == value:
                    del self._due[target]
                continue
            self._warned.discard(target)
            if self._due.get(target) == value:
                del self._due[target]
            done += 1
        return done
