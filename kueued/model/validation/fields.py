"""Field errors worded the way Kubernetes words them, and typed reads of raw manifests.

The validators walk plain dicts as ``yaml.safe_load`` returns them, so every read can
meet the wrong type.  The helpers here make that case one line: ``string(errs, v, path)``
returns the string or ``None`` after recording a schema error, the way the API server
refuses ``count: "three"`` before any webhook runs.

:class:`Errors` mirrors ``k8s.io/apimachinery/pkg/util/validation/field``: one method per
error type (``Invalid``, ``Required``, ``NotSupported``, ``Duplicate``, ``TooMany`` ...)
producing the reason text a user of ``kubectl`` would see, so a refused object reads
``spec.podSets: Too many: 19: must have at most 18 items``.  Paths are plain strings
built with :func:`child`, :func:`index` and :func:`key`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from kueued.errors import FieldError

__all__ = [
    "Errors", "child", "index", "key", "render",
    "mapping", "sequence", "string", "integer", "boolean", "enum", "list_map_name",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    return f"{path}[{k}]"


_SHOWN = 256
"""Characters of a bad string value quoted in an error; the rest is counted, not shown."""


def render(value: object) -> str:
    """Render a bad value as Go's ``field.Error`` does: strings quoted, objects by kind."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, str):
        if len(value) > _SHOWN:  # a hostile megabyte name must not become a megabyte of log
            return json.dumps(value[:_SHOWN])[:-1] + f'..." ({len(value):,} characters)'
        return json.dumps(value)
    if isinstance(value, Mapping):
        return '"object"'
    if isinstance(value, list | tuple):
        return '"array"'
    return json.dumps(str(value))


def type_name(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, bytes | bytearray):
        return "binary"  # YAML's !!binary: no JSON type (kubectl would send it base64-encoded)
    return "null" if value is None else type(value).__name__  # a YAML !!set, say: no JSON type either


class Errors:
    """An ordered collection of :class:`FieldError`, one method per Kubernetes error type."""

    def __init__(self) -> None:
        self.items: list[FieldError] = []

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, path: str, reason: str) -> None:
        self.items.append(FieldError(path=path, reason=reason))

    def invalid(self, path: str, value: object, detail: str) -> None:
        self.add(path, f"Invalid value: {render(value)}: {detail}")

    def required(self, path: str, detail: str = "") -> None:
        self.add(path, f"Required value: {detail}" if detail else "Required value")

    def forbidden(self, path: str, detail: str) -> None:
        self.add(path, f"Forbidden: {detail}")

    def not_found(self, path: str, value: object) -> None:
        self.add(path, f"Not found: {render(value)}")

    def duplicate(self, path: str, value: object, detail: str = "") -> None:
        # A list-map key (``{"name": "main"}``) is shown whole, as the API server does.
        shown = json.dumps(value, separators=(",", ":")) if isinstance(value, Mapping) else render(value)
        reason = f"Duplicate value: {shown}"
        self.add(path, f"{reason}: {detail}" if detail else reason)

    def not_supported(self, path: str, value: object, supported: Iterable[str]) -> None:
        options = ", ".join(json.dumps(s) for s in supported)
        self.add(path, f"Unsupported value: {render(value)}: supported values: {options}")

    def too_many(self, path: str, count: int, limit: int) -> None:
        self.add(path, f"Too many: {count}: must have at most {limit} items")

    def too_few(self, path: str, count: int, limit: int) -> None:
        self.add(path, f"Invalid value: {count}: {path} in body should have at least {limit} items")

    def too_long(self, path: str, value: str, limit: int) -> None:
        self.add(path, f"Too long: may not be more than {limit} bytes")

    def wrong_type(self, path: str, value: object, expected: str) -> None:
        self.invalid(path, type_name(value), f"{path} in body must be of type {expected}: "
                     f"{json.dumps(type_name(value))}")

    def extend(self, other: Errors) -> None:
        self.items.extend(other.items)


# ---- typed reads -------------------------------------------------------------------------------

def mapping(errs: Errors, value: object, path: str) -> dict[str, Any]:
    """The value as a dict; absent (None) reads as empty, anything else is a type error.

    A dict comes back as itself, not a copy: validators read what they are given, never
    write to it."""
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    errs.wrong_type(path, value, "object")
    return {}


def sequence(errs: Errors, value: object, path: str, *, max_items: int | None = None,
             min_items: int | None = None) -> list[Any]:
    """The value as a list with the CRD's MinItems/MaxItems; absent reads as empty."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        errs.wrong_type(path, value, "array")
        return []
    items = list(value)
    if max_items is not None and len(items) > max_items:
        errs.too_many(path, len(items), max_items)
    if min_items is not None and len(items) < min_items:
        errs.too_few(path, len(items), min_items)
    return items


def string(errs: Errors, value: object, path: str, *, max_length: int | None = None,
           min_length: int | None = None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        errs.wrong_type(path, value, "string")
        return None
    if max_length is not None and len(value) > max_length:
        errs.too_long(path, value, max_length)
    if min_length is not None and len(value) < min_length:
        errs.invalid(path, value, f"{path} in body should be at least {min_length} chars long")
    return value


def list_map_name(errs: Errors, item: dict[str, Any], path: str, seen: set[str], *, field: str = "name",
                  max_length: int | None = 316, min_length: int | None = 1) -> str | None:
    """The key (``field``) of an entry of a list keyed by it (``x-kubernetes-list-type: map``):
    required, a string, and unique in its list (``seen``, the keys before it)."""
    name = string(errs, item.get(field), child(path, field), max_length=max_length, min_length=min_length)
    if item.get(field) is None:
        errs.required(child(path, field))
    elif name is not None:
        if name in seen:
            errs.duplicate(path, {field: name})
        seen.add(name)
    return name


def integer(errs: Errors, value: object, path: str, *, minimum: int | None = None,
            int32: bool = True) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        errs.wrong_type(path, value, "integer")
        return None
    if int32 and not INT32_MIN <= value <= INT32_MAX:
        errs.invalid(path, value, "must be a 32-bit integer")
        return None
    if minimum is not None and value < minimum:
        errs.invalid(path, value, f"{path} in body should be greater than or equal to {minimum}")
    return value


def boolean(errs: Errors, value: object, path: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        errs.wrong_type(path, value, "boolean")
        return None
    return value


def enum(errs: Errors, value: object, path: str, allowed: tuple[str, ...]) -> str | None:
    """A string restricted to ``allowed`` (kubebuilder Enum); returns it only when valid."""
    text = string(errs, value, path)
    if text is None:
        return None
    if text not in allowed:
        errs.not_supported(path, text, allowed)
        return None
    return text
