"""KubeClient against a real kube-apiserver: raw manifests in, kueued's error types out.

Each refusal the daemon must tell apart is provoked for real (a stale resourceVersion, a
missing object, RBAC, validation, a compacted watch) and matched by type, never by text.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kueued.kube.client import EVENT
from kueued.kube.connect import connect
from kueued.kube.errors import ApiConflict, ApiForbidden, ApiGone, ApiInvalid, ApiNotFound
from tests.builders import flavor, namespace, workload
from tests.integration.conftest import Cluster
from tests.integration.kube_crds import install_crds


@pytest.fixture(scope="module")
def cluster(control_plane: Cluster) -> Cluster:
    install_crds(control_plane)
    return control_plane


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


def _wl(name: str, ns: str) -> dict[str, Any]:
    manifest = workload(name, ns, "lq", cpu="1")
    del manifest["metadata"]["creationTimestamp"]
    return manifest


def _condition(reason: str) -> dict[str, Any]:
    return {"type": "QuotaReserved", "status": "False", "reason": reason, "message": reason,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


async def test_a_paged_list_is_complete_and_its_items_are_whole_manifests(cluster: Cluster) -> None:
    s = _suffix()
    async with await connect(cluster.kubeconfig) as kube:
        for i in range(5):
            await kube.create("ResourceFlavor", flavor(f"page-{i}-{s}"))
        items, rv = await kube.list("ResourceFlavor", page_size=2)
        got = await kube.get("ResourceFlavor", None, f"page-3-{s}")
    ours = sorted(m["metadata"]["name"] for m in items if s in m["metadata"]["name"])
    assert ours == [f"page-{i}-{s}" for i in range(5)]
    assert rv.isdigit()
    assert {(m["apiVersion"], m["kind"]) for m in items} == {("kueue.x-k8s.io/v1beta2", "ResourceFlavor")}
    assert (got["apiVersion"], got["kind"], got["metadata"]["name"]) == ("kueue.x-k8s.io/v1beta2", "ResourceFlavor",
                                                                         f"page-3-{s}")


async def test_a_status_write_against_a_stale_version_is_a_conflict(cluster: Cluster) -> None:
    s = _suffix()
    ns = f"client-{s}"
    async with await connect(cluster.kubeconfig) as kube:
        await kube.create("Namespace", namespace(ns))
        created = await kube.create("Workload", _wl("wl", ns))
        stale = created["metadata"]["resourceVersion"]
        await kube.patch("Workload", ns, "wl", {"metadata": {"labels": {"touched": "yes"}}})
        with pytest.raises(ApiConflict) as conflict:
            await kube.patch_status("Workload", ns, "wl", {"status": {"conditions": [_condition("Stale")]}},
                                    resource_version=stale)
        written = await kube.patch_status("Workload", ns, "wl", {"status": {"conditions": [_condition("Fresh")]}})
        assert written["status"]["conditions"][0]["reason"] == "Fresh"
        assert written["metadata"]["labels"] == {"touched": "yes"}

        # PUT on /status: conditional on the body's resourceVersion.
        replaced = await kube.replace_status("Workload", ns, "wl", {
            **written, "status": {"conditions": [_condition("Replaced")]}})
        assert replaced["status"]["conditions"][0]["reason"] == "Replaced"
        with pytest.raises(ApiConflict):
            await kube.replace_status("Workload", ns, "wl", {**written, "status": {"conditions": []}})
        with pytest.raises(ApiConflict):  # AlreadyExists is a 409 too
            await kube.create("Workload", _wl("wl", ns))
    assert conflict.value.status == 409 and conflict.value.reason == "Conflict"
    assert conflict.value.object is not None and conflict.value.object["kind"] == "Status"


async def test_missing_invalid_and_forbidden_are_told_apart(cluster: Cluster) -> None:
    async with await connect(cluster.kubeconfig) as kube:
        with pytest.raises(ApiNotFound):
            await kube.get("Workload", "default", f"nope-{_suffix()}")
        with pytest.raises(ApiNotFound):
            await kube.patch_status("ClusterQueue", None, f"nope-{_suffix()}", {"status": {}})
        with pytest.raises(ApiInvalid) as invalid:
            await kube.create("Namespace", {"metadata": {"name": "Not_A_DNS_Label"}})
    assert invalid.value.status == 422 and invalid.value.reason == "Invalid"
    nobody = cluster.user_kubeconfig(f"nobody-{_suffix()}")
    async with await connect(nobody) as kube:
        with pytest.raises(ApiForbidden) as forbidden:
            await kube.list("Workload")
    assert forbidden.value.status == 403


async def test_a_watch_from_a_version_older_than_the_cache_raises_gone(cluster: Cluster) -> None:
    async with await connect(cluster.kubeconfig) as kube:
        with pytest.raises(ApiGone) as gone:
            async with kube.watch("ResourceFlavor", "1", timeout_seconds=10) as events:
                async for _ in events:
                    pass
    assert gone.value.status == 410


async def test_an_event_is_recorded_about_an_object(cluster: Cluster) -> None:
    s = _suffix()
    ns = f"events-{s}"
    async with await connect(cluster.kubeconfig) as kube:
        await kube.create("Namespace", namespace(ns))
        wl = await kube.create("Workload", _wl("wl", ns))
        rf = await kube.create("ResourceFlavor", flavor(f"rf-{s}"))
        about_wl = await kube.create_event(wl, reason="QuotaReserved", message="admitted by cq", type="Normal")
        about_rf = await kube.create_event(rf, reason="Refused", message="bad flavor", type="Warning")
        listed, _ = await kube.list(EVENT, ns)
    assert about_wl["metadata"]["namespace"] == ns and about_rf["metadata"]["namespace"] == "default"
    involved = about_wl["involvedObject"]
    assert (involved["kind"], involved["name"], involved["namespace"], involved["uid"]) == (
        "Workload", "wl", ns, wl["metadata"]["uid"])
    assert [(e["reason"], e["type"], e["source"]["component"]) for e in listed] == [
        ("QuotaReserved", "Normal", "kueued")]
