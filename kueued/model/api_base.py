"""The base every API Struct shares (:mod:`kueued.model.api` says why it is untracked by the
collector) and the object metadata every kind carries."""

from __future__ import annotations

import msgspec

__all__ = ["ObjectMeta", "Quantity", "_Base"]

Quantity = str | int | float


class _Base(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True, gc=False):
    pass


class ObjectMeta(_Base):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None  # a ClusterQueue with one is terminating (kueued.world)
    resource_version: str = ""
    generation: int = 0
