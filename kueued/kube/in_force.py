"""The version in force of an object whose newest version kueued refused, kept on the object.

Kueue refuses a bad update in its webhook, so the API server never stores it.  kueued has no
webhook: the API server stores the update, kueued refuses it (an ``Accepted=False`` condition,
a Warning Event) and keeps the earlier version in force (``World.apply``).  That memory lived
in the process only, so a restart read the refused version as if it were new: a LocalQueue
moved to another ClusterQueue, an admitted Workload's edited pod sets taken as valid, a
ClusterQueue whose update was refused vanished from scheduling, an ElasticQuota tree changed
shape.  Now the version in force rides on the object itself, in the annotation
:data:`IN_FORCE_ANNOTATION`, written when an update is refused and an earlier version holds,
and removed once a version is accepted:

* :func:`memo_of` is what is kept of a version: its labels, its annotations (but this one and
  kubectl's last-applied copy) and every top-level field but ``apiVersion``, ``kind``,
  ``metadata`` and ``status`` (``spec``, or a WorkloadPriorityClass's ``value``): what
  validation and scheduling read of it.  Its status is the API server's current one either way.
* :func:`earlier_of` rebuilds that version from the newest manifest and the annotation; the
  daemon applies it before the newest one when it meets the object for the first time (a
  start, a relist), so the update is refused again against it, as it was before the restart.
* :func:`wanted` says what the annotation should hold after an apply: the version in force
  while the newest is refused, nothing once a version is accepted.

The status publisher writes the annotation (:mod:`kueued.kube.in_force_writer`); this module is
pure, so the daemon's actors read it too.  A version too large for an annotation's share of the
object (:data:`MAX_MEMO`) is not kept, and a restart then behaves as before.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import msgspec

from kueued.model.json_text import read_json

__all__ = ["IN_FORCE_ANNOTATION", "MAX_MEMO", "KEEP", "Keep", "memo_of", "earlier_of", "wanted"]

IN_FORCE_ANNOTATION = "kueued.io/in-force"
MAX_MEMO = 64 * 1024
"""Bytes: the API server allows 256 KiB of annotations in all; the user's come first."""
_NOT_KEPT = frozenset({IN_FORCE_ANNOTATION, "kubectl.kubernetes.io/last-applied-configuration"})
_NOT_BODY = frozenset({"apiVersion", "kind", "metadata", "status"})


class Keep:
    """:func:`wanted`'s answer when the annotation is right as it is."""


KEEP = Keep()


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _map(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def memo_of(version: Mapping[str, Any]) -> str:
    """What is kept of ``version`` (see the module notes), as compact JSON with sorted keys."""
    meta = _meta(version)
    memo = {"labels": _map(meta.get("labels")),
            "annotations": {k: v for k, v in _map(meta.get("annotations")).items() if k not in _NOT_KEPT},
            "body": {k: v for k, v in version.items() if k not in _NOT_BODY}}
    return msgspec.json.encode(memo, order="sorted").decode()


def earlier_of(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The version in force that ``manifest``'s annotation records, rebuilt around its metadata and
    status; None when it carries none, or one that cannot be read."""
    raw = _map(_meta(manifest).get("annotations")).get(IN_FORCE_ANNOTATION)
    if not isinstance(raw, str) or not raw:
        return None
    try:
        memo = read_json(raw)
    except ValueError:
        return None
    if not isinstance(memo, dict) or not all(isinstance(memo.get(k), dict) for k in ("labels", "annotations", "body")):
        return None
    earlier: dict[str, Any] = {k: copy.deepcopy(v) for k, v in manifest.items() if k in _NOT_BODY}
    earlier.update(memo["body"])
    meta = dict(_meta(manifest))
    meta["labels"] = memo["labels"]
    meta["annotations"] = memo["annotations"]
    earlier["metadata"] = meta
    return earlier


def wanted(manifest: Mapping[str, Any], held: Mapping[str, Any] | None, *, refused: bool) -> str | None | Keep:
    """What the annotation should hold once ``manifest`` was applied: a memo of ``held`` (the
    version in force) while ``manifest`` is refused, None (remove it) once it is accepted, or
    :data:`KEEP` when it holds that already, or when nothing can be kept."""
    current = _map(_meta(manifest).get("annotations")).get(IN_FORCE_ANNOTATION)
    if not refused:
        return KEEP if current is None else None
    if held is None:
        return KEEP  # refused on creation: nothing was ever in force
    memo = memo_of(held)
    if memo == current or len(memo) > MAX_MEMO:
        return KEEP
    return memo

