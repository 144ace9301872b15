"""kueued's own error types.

Errors carry typed fields so callers (and tests) match on types and fields, never on
message text.  :class:`FieldError` is the unit of validation: one field of one object
that is wrong, and why.  A rejected object carries one or more of them.
"""

from __future__ import annotations

import msgspec


class FieldError(msgspec.Struct, frozen=True):
    """One invalid field: ``path`` in Kubernetes' dotted/indexed form, ``reason`` in words."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class KueuedError(Exception):
    """Base of every error kueued raises on purpose."""


class ManifestError(KueuedError):
    """A file or document that cannot be read as manifests at all."""
