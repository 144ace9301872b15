"""What ``World.apply`` checks before any kind's own rules: that it reads the kind at all (and at the
apiVersion it reads it as), a Node's allocatable, and a decode failure the rules let through, each
as the field it is about."""

from __future__ import annotations

import difflib
import re
from typing import Any

import msgspec

from kueued.errors import FieldError
from kueued.model import api
from kueued.model.quantity import QuantityError, parse
from kueued.model.validation import CONFIG_GROUP, KUEUE_GROUP

__all__ = ["API_VERSIONS", "kind_error", "node_errors", "decode_error"]


API_VERSIONS = {**{kind: KUEUE_GROUP for kind in api.KINDS}, "Configuration": CONFIG_GROUP,
                "Namespace": "v1", "LimitRange": "v1", "Node": "v1", "ElasticQuota": "scheduling.sigs.k8s.io/v1alpha1"}
"""Every kind World.apply takes, with its apiVersion; anything else is refused, never dropped silently
(a typo such as ``ClusterQueu`` or an old ``v1beta1`` manifest must not vanish)."""


def kind_error(kind: object, api_version: object) -> FieldError | None:
    if kind is None or kind == "":
        return FieldError("kind", "Required value: every manifest names its kind")
    if not isinstance(kind, str):
        return FieldError("kind", "Invalid value: must be a string")
    if kind not in API_VERSIONS:
        close = difflib.get_close_matches(kind, API_VERSIONS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return FieldError("kind", f'Unsupported value: "{kind[:100]}": {hint}kueued reads '
                                  + ", ".join(sorted(API_VERSIONS)))
    if api_version != API_VERSIONS[kind]:
        what = "Required value" if api_version in (None, "") else f'Unsupported value: "{str(api_version)[:100]}"'
        return FieldError("apiVersion", f"{what}: kueued reads {kind} as {API_VERSIONS[kind]}")
    return None


def node_errors(manifest: dict[str, Any]) -> list[FieldError]:
    """The API server's schema for what kueued reads of a Node: allocatable quantities."""
    allocatable = (manifest.get("status") or {}).get("allocatable") or {}
    if not isinstance(allocatable, dict):
        return [FieldError("status.allocatable", "must be a map of resource name to quantity")]
    errors = []
    for resource, quantity in allocatable.items():
        try:
            if isinstance(quantity, bool):
                raise QuantityError(quantity)
            parse(quantity)
        except QuantityError:
            errors.append(FieldError(f"status.allocatable.{resource}", f'Invalid value: "{quantity}": '
                                                                        "not a quantity"))
    return errors


_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`$")
_OPENAPI_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "array": "array",
                  "object": "object", "null": "null"}


def decode_error(exc: msgspec.ValidationError) -> FieldError:
    """A type the rules did not check, as the field it is in (msgspec says ``... - at `$.a.b[0]```),
    in the API server's words for a wrong type (``spec.x in body must be of type integer: "null"``)."""
    text = str(exc)
    message, _, where = text.rpartition(" - at `$")
    if not message or not where.endswith("`"):
        return FieldError("", text)
    path = where[:-1].lstrip(".")
    typed = _EXPECTED.match(message)
    if typed is not None:
        want = _OPENAPI_TYPES.get(typed["want"].split(" |")[0], typed["want"])
        got = _OPENAPI_TYPES.get(typed["got"], typed["got"])
        return FieldError(path, f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"')
    return FieldError(path, f"Invalid value: {message}")
