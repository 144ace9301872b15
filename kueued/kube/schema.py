"""From msgspec Structs to Kubernetes structural OpenAPI v3 schemas, for kueued's CRDs.

Why generate: the Structs in :mod:`kueued.model.api` are what kueued decodes; a CRD schema
written by hand next to them would drift.  ``msgspec.json.schema_components`` gives
JSON Schema for the Structs; the API server wants a *structural* schema instead, which
is JSON Schema with rules of its own.  :func:`structural` walks the one into the other:

- ``$ref`` is forbidden: every reference is inlined (the Structs form a tree, never a cycle).
- ``anyOf [T, null]`` (an ``X | None`` field) becomes ``T`` with ``nullable: true``; a type
  inside ``anyOf`` is forbidden otherwise.
- A quantity (``str | int | float`` in the Structs) becomes Kueue's shape for
  ``resource.Quantity``: ``x-kubernetes-int-or-string`` with the quantity ``pattern``.  A
  JSON number that is not an integer is refused, as Kueue's CRDs refuse it.
- A dict becomes ``additionalProperties``; ``dict[str, Any]`` (and ``Any``) keeps whatever
  it holds (``x-kubernetes-preserve-unknown-fields``).
- Every object that comes from a Struct *also* preserves unknown fields.  Kueue's types
  have many fields kueued does not model (``admissionChecks``, ``topologyRequest``, the
  rest of a PodSpec); a structural schema would prune them, and ``kubectl apply`` (strict
  field validation by default) would refuse them.  Keeping them means a user's object is
  stored whole and reads back as written; the fields kueued knows are still typed.  (The
  CRDs then close the nodes whose fields Kueue declares: :mod:`kueued.kube.crds`.)
- ``default`` is dropped: msgspec gives every Struct field a default (``cohortName: ""``...),
  most of which Kueue's CRDs do not declare; the ones they do are added by
  :mod:`kueued.kube.crds`.  ``title``/``description`` (docstrings) are dropped too.

Validation rules beyond types (enums, limits, Kueue's CEL and webhook checks) are not
schema here on purpose: kueued reproduces them (:mod:`kueued.model.validation`) and
reports a refusal as a condition instead of failing the user's apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["QUANTITY_PATTERN", "SchemaError", "preserve", "quantity", "structural"]

# resource.Quantity's grammar, as Kueue's and Koordinator's generated CRDs spell it.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_REF_PREFIX = "#/$defs/"
_QUANTITY_TYPES = frozenset({"string", "integer", "number"})
_SCALARS = frozenset({"string", "integer", "number", "boolean"})


class SchemaError(ValueError):
    """A Struct holds a type this converter has no structural form for (a new union, say)."""


def quantity() -> dict[str, Any]:
    """The schema of one ``resource.Quantity``."""
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True}


def preserve() -> dict[str, Any]:
    """An object kept as written: a part of an API kueued reads but does not model."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def structural(model: Any, *, root: bool = True) -> dict[str, Any]:
    """The structural schema of a Struct type (or any type msgspec can describe).

    With ``root``, the object is a whole API object: ``metadata`` is ``{type: object}`` only
    (the API server owns its schema) and unknown top-level fields are not preserved (a
    typo'd ``sepc`` is refused, as Kueue refuses it).
    """
    (top,), defs = msgspec.json.schema_components([model], ref_template=_REF_PREFIX + "{name}")
    schema = _convert(top, defs, path=model.__name__ if hasattr(model, "__name__") else "?")
    if root and schema.get("type") == "object":
        schema.pop("x-kubernetes-preserve-unknown-fields", None)
        if "metadata" in schema.get("properties", {}):
            schema["properties"]["metadata"] = {"type": "object"}
        schema.pop("required", None)  # only `metadata`, which is the API server's to require
    return schema


def _convert(node: Mapping[str, Any], defs: Mapping[str, Any], *, path: str) -> dict[str, Any]:
    if "$ref" in node:
        name = node["$ref"].removeprefix(_REF_PREFIX)
        return _convert(defs[name], defs, path=path)
    if "anyOf" in node:
        return _union(node["anyOf"], defs, path=path)
    kind = node.get("type")
    if kind is None:  # Any: msgspec says nothing, so anything goes
        return {"x-kubernetes-preserve-unknown-fields": True}
    if kind == "object":
        return _object(node, defs, path=path)
    if kind == "array":
        return {"type": "array", "items": _convert(node.get("items", {}), defs, path=f"{path}[]")}
    if kind in _SCALARS:
        return {"type": kind}
    raise SchemaError(f"{path}: no structural form for JSON Schema type {kind!r}")


def _object(node: Mapping[str, Any], defs: Mapping[str, Any], *, path: str) -> dict[str, Any]:
    properties = node.get("properties")
    if properties is not None:  # a Struct
        out: dict[str, Any] = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {name: _convert(sub, defs, path=f"{path}.{name}") for name, sub in properties.items()},
        }
        if node.get("required"):
            out["required"] = list(node["required"])
        return out
    values = node.get("additionalProperties")
    if isinstance(values, Mapping) and values:  # dict[str, T]
        return {"type": "object", "additionalProperties": _convert(values, defs, path=f"{path}{{}}")}
    return preserve()  # dict[str, Any]


def _union(members: list[Mapping[str, Any]], defs: Mapping[str, Any], *, path: str) -> dict[str, Any]:
    nullable = any(m.get("type") == "null" for m in members)
    rest = [m for m in members if m.get("type") != "null"]
    types = {m.get("type") for m in rest}
    if types == _QUANTITY_TYPES and len(rest) == len(types):  # str | int | float
        out = quantity()
    elif len(rest) == 1:
        out = _convert(rest[0], defs, path=path)
    else:
        raise SchemaError(f"{path}: no structural form for the union {sorted(map(str, types))}")
    if nullable:
        out["nullable"] = True
    return out
