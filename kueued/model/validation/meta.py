"""Object metadata, as the API server checks it for every kind, and Namespaces.

Before any CRD schema or webhook runs, ``ValidateObjectMeta`` requires a name and checks
its grammar: custom resources (every Kueue kind) take an RFC 1123 *subdomain*, Namespaces
an RFC 1123 *label*.  Labels and annotations get their key/value grammars.  A namespaced
object's ``metadata.namespace`` is a label too; when absent, kubectl fills in the
context's namespace, so absence is not an error here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kueued.errors import FieldError

from .fields import Errors, mapping, string
from .names import annotation_map, date_time, dns_label_errors, dns_subdomain_errors, labels

__all__ = ["check_metadata", "validate_namespace"]


def check_metadata(errs: Errors, obj: dict[str, Any], *,
                   name_rule: Callable[[str], Sequence[str]] = dns_subdomain_errors,
                   namespaced: bool = False) -> dict[str, Any]:
    """Check ``metadata`` and return it as a dict (empty when missing or malformed)."""
    meta = mapping(errs, obj.get("metadata"), "metadata")
    name = string(errs, meta.get("name"), "metadata.name")
    if name is None:
        if meta.get("name") is None and not meta.get("generateName"):
            errs.required("metadata.name", "name or generateName is required")
    else:
        for msg in name_rule(name):
            errs.invalid("metadata.name", name, msg)
    if namespaced and meta.get("namespace") is not None:
        ns = string(errs, meta.get("namespace"), "metadata.namespace")
        for msg in dns_label_errors(ns) if ns is not None else []:
            errs.invalid("metadata.namespace", ns, msg)
    labels(errs, meta.get("labels"), "metadata.labels")
    annotation_map(errs, meta.get("annotations"), "metadata.annotations")
    date_time(errs, meta.get("creationTimestamp"), "metadata.creationTimestamp")
    return meta


def validate_namespace(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """A core/v1 Namespace: only its name (an RFC 1123 label) and labels matter here."""
    errs = Errors()
    check_metadata(errs, obj, name_rule=dns_label_errors)
    return errs.items
