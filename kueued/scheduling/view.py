"""The accepted objects as the scheduling layer reads them: a Protocol, not the World.

``kueued.world.World`` (above this layer: it validates and stores) satisfies it; the pure
decision code names only what it reads, so it never imports upward and a test can hand it
any object with these attributes.
"""

from __future__ import annotations

from typing import Any, Protocol

from kueued.model import api
from kueued.model.settings import Settings
from kueued.scheduling.workload import Placement, WorkloadInfo, WorkloadSpec

__all__ = ["WorldView"]


class WorldView(Protocol):
    settings: Settings
    workloads: dict[str, WorkloadSpec]
    placed: dict[str, Placement]
    flavors: dict[str, api.ResourceFlavor]
    cohorts: dict[str, api.Cohort]
    cluster_queues: dict[str, api.ClusterQueue]
    local_queues: dict[str, api.LocalQueue]
    namespaces: dict[str, dict[str, str]]
    raw: dict[str, dict[str, Any]]
    elastic_quotas: dict[str, dict[str, Any]]
    nodes: dict[str, dict[str, Any]]
    rejected: dict[str, str]

    def route(self, wl: WorkloadSpec | WorkloadInfo) -> tuple[str | None, str]: ...
