"""Syntax rules shared by every kind: names, label keys and values, selectors, quantities.

Kubernetes has a handful of string grammars (``k8s.io/apimachinery/pkg/util/validation``):
RFC 1123 labels and subdomains for object names and references, qualified names for label
keys and resource names, label values.  The API server applies them to metadata; Kueue's
CRD ``Pattern`` markers apply the subdomain grammar to references (``cohortName``,
``spec.clusterQueue``, flavor names) and its webhooks apply qualified names to resources.

Quantities are checked against the CRD's int-or-string pattern and then read *exactly*
(:func:`exact`): Kueue compares ``resource.Quantity`` values without rounding, so
``lendingLimit: 1n`` against ``nominalQuota: 0`` must compare as 1e-9 > 0, not as the
milli-unit ceiling :func:`kueued.model.quantity.parse` gives.

The grammars return their messages as tuples, so that those applied to strings that repeat
(label keys and values, namespaces) can remember their verdict per string.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime
from fractions import Fraction
from typing import Any

from kueued.model.quantity import QuantityError, exact

from .fields import Errors, child, index, key, mapping, sequence, string

__all__ = [
    "DNS1123_SUBDOMAIN", "dns_label_errors", "dns_subdomain_errors", "qualified_name_errors",
    "label_value_errors", "reference", "labels", "annotation_map", "label_selector",
    "selector_matches", "quantity", "exact", "date_time", "NEGATIVE",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
_QUANTITY = re.compile(QUANTITY_PATTERN)

_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                  "'-' or '.', and must start and end with an alphanumeric character")
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
              "and must start and end with an alphanumeric character")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character")
_NAME_PART_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                  "and end with an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                    "'_' or '.', and must start and end with an alphanumeric character")


# ---- grammars: each returns the apimachinery messages, empty when valid ------------------------
# Label keys and values, namespaces and resource names repeat across objects, so their
# grammars remember verdicts by the string (messages are tuples: shared, never mutated);
# object names are mostly unique, so dns_subdomain_errors does not.

def dns_subdomain_errors(value: str) -> tuple[str, ...]:
    if len(value) <= 253 and DNS1123_SUBDOMAIN.match(value):
        return ()
    msgs = []
    if len(value) > 253:
        msgs.append("must be no more than 253 characters")
    if not DNS1123_SUBDOMAIN.match(value):
        msgs.append(_SUBDOMAIN_MSG)
    return tuple(msgs)


@functools.lru_cache(maxsize=4096)
def dns_label_errors(value: str) -> tuple[str, ...]:
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not DNS1123_LABEL.match(value):
        msgs.append(_LABEL_MSG)
    return tuple(msgs)


@functools.lru_cache(maxsize=4096)
def dns1035_label_errors(value: str) -> tuple[str, ...]:
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not DNS1035_LABEL.match(value):
        msgs.append(_DNS1035_MSG)
    return tuple(msgs)


@functools.lru_cache(maxsize=4096)
def qualified_name_errors(value: str) -> tuple[str, ...]:
    """``IsQualifiedName``: an optional DNS-subdomain prefix and '/', then a 63-char name."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        msgs: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            msgs = ["prefix part must be non-empty"]
        else:
            msgs = [f"prefix part {m}" for m in dns_subdomain_errors(prefix)]
    else:
        return ("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character with an optional DNS subdomain prefix "
                "and '/' (e.g. 'example.com/MyName')",)
    if not name:
        msgs.append("name part must be non-empty")
    else:
        if len(name) > 63:
            msgs.append("name part must be no more than 63 characters")
        if not _QUALIFIED_PART.match(name):
            msgs.append(_NAME_PART_MSG)
    return tuple(msgs)


@functools.lru_cache(maxsize=4096)
def label_value_errors(value: str) -> tuple[str, ...]:
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not _LABEL_VALUE.match(value):
        msgs.append(_LABEL_VALUE_MSG)
    return tuple(msgs)


# ---- field checks ------------------------------------------------------------------------------

def reference(errs: Errors, value: object, path: str, *, max_length: int = 253,
              pattern: re.Pattern[str] = DNS1123_SUBDOMAIN) -> str | None:
    """A CRD string with ``MaxLength`` and ``Pattern`` markers (names of other objects)."""
    text = string(errs, value, path, max_length=max_length)
    if text is None:
        return None
    if not pattern.match(text):
        errs.invalid(path, text, f"{path} in body should match '{pattern.pattern}'")
        return None
    return text


def labels(errs: Errors, value: object, path: str) -> dict[str, Any]:
    """``ValidateLabels``: keys are qualified names, values label values."""
    found = mapping(errs, value, path)
    for k, v in found.items():
        for msg in qualified_name_errors(str(k)):
            errs.invalid(path, k, msg)
        if not isinstance(v, str):
            errs.wrong_type(key(path, str(k)), v, "string")
            continue
        for msg in label_value_errors(v):
            errs.invalid(path, v, msg)
    return found


def annotation_map(errs: Errors, value: object, path: str) -> None:
    """``ValidateAnnotations``: qualified-name keys, string values, 256 KiB in total."""
    if value is None:
        return
    found = mapping(errs, value, path)
    total = 0
    for k, v in found.items():
        for msg in qualified_name_errors(str(k).lower()):
            errs.invalid(path, k, msg)
        if not isinstance(v, str):
            errs.wrong_type(key(path, str(k)), v, "string")
            continue
        total += len(str(k)) + len(v)
    if total > 256 * 1024:
        errs.add(path, f"Too long: may not be more than {256 * 1024} bytes")


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(errs: Errors, value: object, path: str) -> None:
    """``metav1validation.ValidateLabelSelector`` with default options."""
    if value is None:
        return
    selector = mapping(errs, value, path)
    labels(errs, selector.get("matchLabels"), child(path, "matchLabels"))
    exprs_path = child(path, "matchExpressions")
    for i, raw in enumerate(sequence(errs, selector.get("matchExpressions"), exprs_path)):
        p = index(exprs_path, i)
        req = mapping(errs, raw, p)
        k = string(errs, req.get("key"), child(p, "key"))
        if k is None:
            errs.required(child(p, "key"))
        else:
            for msg in qualified_name_errors(k):
                errs.invalid(child(p, "key"), k, msg)
        op = string(errs, req.get("operator"), child(p, "operator"))
        values = sequence(errs, req.get("values"), child(p, "values"))
        if op is None:
            errs.required(child(p, "operator"))
        elif op in ("In", "NotIn"):
            if not values:
                errs.required(child(p, "values"), "must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.forbidden(child(p, "values"),
                               "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        else:
            errs.invalid(child(p, "operator"), op, "not a valid selector operator")
        for j, v in enumerate(values):
            vp = index(child(p, "values"), j)
            text = string(errs, v, vp)
            for msg in label_value_errors(text) if text is not None else []:
                errs.invalid(vp, text, msg)


def selector_matches(selector: dict[str, Any], target: dict[str, str]) -> bool:
    """Whether a (valid) label selector matches a label set; ``{}`` matches everything."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if target.get(k) != v:
            return False
    for req in selector.get("matchExpressions") or []:
        k, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        present = k in target
        if op == "In" and not (present and target[k] in values):
            return False
        if op == "NotIn" and present and target[k] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


# ---- times ---------------------------------------------------------------------------------

# Go's time.RFC3339, as metav1.Time reads it: an upper-case T and Z only (a lower-case one, or a
# space for the T, is no time Kueue could read)
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def date_time(errs: Errors, value: object, path: str) -> None:
    """A ``metav1.Time`` field: an RFC 3339 date-time string (what the API server's schema takes)."""
    if value is None:
        return
    if not isinstance(value, str):
        errs.wrong_type(path, value, "string")
        return
    if not _RFC3339.match(value) or not _valid_date(value):
        errs.invalid(path, value, f'{path} in body must be of type date-time: "{value[:64]}"')


@functools.lru_cache(maxsize=1024)
def _valid_date(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return True


# ---- quantities ----------------------------------------------------------------------------

NEGATIVE = "must be greater than or equal to 0"


def quantity(errs: Errors, value: object, path: str, *, non_negative: bool = False) -> Fraction | None:
    """A ``resource.Quantity`` field: schema pattern, then optionally ``>= 0`` (webhooks)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        errs.wrong_type(path, value, "string")
        return None
    if isinstance(value, str) and not _QUANTITY.match(value):
        errs.invalid(path, value, f"{path} in body should match '{QUANTITY_PATTERN}'")
        return None
    try:
        amount = exact(value)
    except QuantityError as exc:  # the pattern matched, the bounds did not
        errs.invalid(path, value, str(exc))
        return None
    if non_negative and amount < 0:
        errs.invalid(path, value, NEGATIVE)
    return amount
