"""One read of a cluster: every kind listed once, in order; what only elastic quota needs may be missing."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kueued.kube.client import KINDS, manifest_kind
from kueued.kube.errors import ApiError, ApiForbidden, ApiNotFound
from kueued.ops.cluster_read import read_cluster
from tests.builders import cluster_queue, local_queue, quotas, workload


class Lister:
    """``KubeClient.list`` over fixed items per kind, or a scripted refusal."""

    def __init__(self, items: dict[str, list[dict[str, Any]]], refusals: dict[str, ApiError]) -> None:
        self.items = items
        self.refusals = refusals
        self.listed: list[str] = []

    async def list(self, kind: Any, namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
        name = manifest_kind(kind).kind
        self.listed.append(name)
        if name in self.refusals:
            raise self.refusals[name]
        return [dict(i, metadata={**i["metadata"], "managedFields": [{}]}) for i in self.items.get(name, [])], "1"


def test_every_kind_is_listed_once_in_order_and_managed_fields_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    wl, lq, cq = workload("w", "ns", "lq", cpu="1"), local_queue("lq", "ns", "cq"), cluster_queue("cq", quotas("f"))
    client = Lister({"Workload": [wl], "LocalQueue": [lq], "ClusterQueue": [cq]},
                    {"ElasticQuota": ApiNotFound(404, "NotFound"), "Node": ApiForbidden(403, "Forbidden", "no")})
    got = anyio.run(read_cluster, client)
    assert client.listed == list(KINDS)
    assert [m["kind"] for m in got] == ["ClusterQueue", "LocalQueue", "Workload"]
    assert all("managedFields" not in m["metadata"] for m in got)
    assert "cannot list nodes: left out (no)" in capsys.readouterr().err  # and ElasticQuota, not served, silently


def test_a_kueue_kind_that_cannot_be_listed_is_an_error() -> None:
    client = Lister({}, {"ClusterQueue": ApiForbidden(403, "Forbidden", "no")})
    with pytest.raises(ApiForbidden):
        anyio.run(read_cluster, client)


def test_the_world_of_a_cluster_takes_its_quotas_as_made_parents_first() -> None:
    """Listed by name a child comes before its parent; the daemon's first list validates them as they
    were made, parents first, and so does the operator's read, so both see one tree."""
    from kueued.model import koordinator as k
    from kueued.ops.cluster_read import ordered, world_of
    from tests.elastic.builders import EQ

    def made(quota: dict[str, Any], second: int) -> dict[str, Any]:
        quota["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{second:02d}Z"
        return quota

    parent = made(EQ("b-parent").parent("cluster").min(cpu="4").max(cpu="10").build(), 2)
    parent["metadata"]["labels"][k.LABEL_IS_PARENT] = "true"
    early = made(EQ("a-child").parent("b-parent").min(cpu="2").max(cpu="4").build(), 1)  # made before its parent
    root = made(EQ("cluster").cluster(cpu="10").build(), 0)
    assert [k.name_of(m) for m in ordered([early, parent, root])] == ["cluster", "b-parent", "a-child"]  # what_if too
    world = world_of([early, parent, root])
    assert world.rejected == {} and world.refused_elastic == {}
    assert {k.name_of(q) for q in world.elastic_quotas.values()} == {"cluster", "b-parent", "a-child"}
