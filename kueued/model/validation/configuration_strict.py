"""Unknown fields in a Configuration section, refused as Kueue's strict decoding refuses them.

Kueue reads its Configuration file with ``serializer.NewCodecFactory(scheme,
serializer.EnableStrict)`` (``pkg/config/config.go``): a field its Go types do not declare
stops the manager before any validation runs.  The sections share this one check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .fields import Errors, child

__all__ = ["strict"]


def strict(errs: Errors, section: Mapping[str, Any], path: str, known: Iterable[str]) -> None:
    allowed = set(known)
    for name in section:
        if name not in allowed:
            errs.add(child(path, str(name)), f'unknown field "{child(path, str(name))}"')
