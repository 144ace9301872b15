"""``kueued explain`` from files: where a Workload went, or the node that blocks it and what would admit it."""

from __future__ import annotations

import json

import pytest
import yaml

from actors.simulation import run_actors
from kueued.cli import main
from kueued.ops.explain import explain_workload, render_text
from kueued.ops.status import run_world
from kueued.ops.tree import settle
from tests.ops.ops_trees import GPU, one_cohort, two_levels


def _explain(manifests, key):
    world, report = run_world(manifests, runner=run_actors)
    return explain_workload(world, settle(world), key, reason=report.workloads[key].reason)


def test_an_admitted_workload_says_where_and_with_which_flavors() -> None:
    e = _explain(two_levels(), "ns/w1")
    assert (e.state, e.cluster_queue, e.flavors, e.usage) == ("admitted", "vision", {"main": {GPU: "a100"}},
                                                               {"a100": {GPU: "8"}})
    assert render_text(e).splitlines()[0] == "ns/w1 is admitted in ClusterQueue vision"


def test_a_workload_blocked_at_its_cohort_names_the_cohort_its_numbers_and_the_quota_it_needs() -> None:
    e = _explain(one_cohort(), "ns/w3")
    assert e.state == "pending" and not e.fits_now
    (b,) = e.blocked
    assert (b.kind, b.node, b.flavor, b.resource, b.used, b.requested, b.allowed, b.more) == (
        "Cohort", "research", "a100", GPU, "12", "4", "14", "2")
    assert b.sentence() == "cohort research: nvidia.com/gpu in flavor a100 would reach 12 + 4, above 14"
    text = render_text(e)
    assert "blocked at cohort research: nvidia.com/gpu in flavor a100 would reach 12 + 4, above 14" in text
    assert ("flavor a100: 2 more nvidia.com/gpu in flavor a100 at Cohort research: its nominalQuota 0 -> 2, "
            "or as much more nominalQuota in a member without a lendingLimit") in text


def test_the_quota_it_names_is_enough() -> None:
    # vision 10 -> 12 lifts the cohort from 14 to 16: w3 (4) fits on top of 12.
    assert _explain(one_cohort(vision="12"), "ns/w3").state == "admitted"


@pytest.mark.parametrize(("extra", "alternative"), [
    pytest.param([], ", or its borrowingLimit 6 -> 8", id="the-tree-above-has-room"),
])
def test_a_workload_blocked_by_its_borrowing_limit_may_raise_either(extra, alternative) -> None:
    e = _explain(two_levels() + extra, "ns/w4")
    (b,) = e.blocked
    assert (b.kind, b.node, b.used, b.requested, b.allowed, b.more, b.borrowing_limit) == (
        "ClusterQueue", "vision", "16", "2", "16", "2", "6")
    assert b.remedy() == ("2 more nvidia.com/gpu in flavor a100 at ClusterQueue vision: its nominalQuota 10 -> 12"
                          + alternative)


def test_the_borrowing_limit_is_no_alternative_when_the_cohort_is_full_too() -> None:
    # vision (10, borrowingLimit 2) holds 12 of the cohort's 14; w (4) passes both vision's 12 and the cohort's 14.
    from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
    manifests = [namespace("ns"), flavor("a100"),
                 cluster_queue("vision", quotas("a100", cpu=("10", "2")), cohort="research"),
                 cluster_queue("nlp", quotas("a100", cpu="4"), cohort="research"), local_queue("lq", "ns", "vision"),
                 workload("a", "ns", "lq", created=1, cpu="12"), workload("w", "ns", "lq", created=2, cpu="4")]
    e = _explain(manifests, "ns/w")
    (opt,) = e.options
    assert [(b.node, b.more, b.borrowing_limit_suffices) for b in opt.raises] == [("vision", "4", False)]


def test_the_command_takes_namespace_slash_name(tmp_path, capsys) -> None:
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump_all(one_cohort()))
    assert main(["explain", "ns/w3", str(path), "-o", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["state"], body["clusterQueue"], body["blocked"][0]["node"]) == ("pending", "vision", "research")
    assert main(["explain", "w3", str(path)]) == 2
    assert main(["explain", "ns/nope", str(path)]) == 2


def _roomy(*extra: dict, queue: str = "lq", **wl_spec) -> list[dict]:
    """One ClusterQueue with room to spare; ``ns/w`` asks 1 cpu of it (``wl_spec`` added to its spec)."""
    from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
    w = workload("w", "ns", queue, cpu="1")
    w["spec"].update(wl_spec)
    return [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="8")),
            local_queue("lq", "ns", "cq"), *extra, w]


@pytest.mark.parametrize(("change", "why"), [
    pytest.param({"active": False}, "the Workload is deactivated (spec.active is false)", id="deactivated"),
    pytest.param({"stop": "Hold"}, "LocalQueue lq is stopped (stopPolicy Hold)", id="held-local-queue"),
    pytest.param({"selector": {"matchLabels": {"team": "x"}}},
                 "namespace ns doesn't match the namespaceSelector of ClusterQueue cq", id="namespace"),
])
def test_a_workload_waiting_for_something_quota_cannot_give_is_never_said_to_fit(change, why) -> None:
    manifests = _roomy(**({"active": change["active"]} if "active" in change else {}))
    if "stop" in change:
        manifests[3]["spec"]["stopPolicy"] = change["stop"]
    if "selector" in change:
        manifests[2]["spec"]["namespaceSelector"] = change["selector"]
    world, _ = run_world(manifests, runner=run_actors)
    e = explain_workload(world, settle(world), "ns/w")  # no engine reason: the daemon's view
    assert (e.state, e.fits_now, e.options, e.reason) == ("pending", False, [], why)
    assert "room for it now" not in render_text(e)


def test_a_flavor_whose_taint_the_pods_do_not_tolerate_is_no_room() -> None:
    from tests.builders import cluster_queue, flavor, quotas
    manifests = _roomy()
    manifests[1] = flavor("spot", nodeTaints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}])
    manifests[2] = cluster_queue("cq", quotas("spot", cpu="8"))
    world, _ = run_world(manifests, runner=run_actors)
    e = explain_workload(world, settle(world), "ns/w")
    assert e.state == "pending" and not e.fits_now and e.options == []
    assert e.reason == "untolerated taint {spot true NoSchedule <nil>} in flavor spot"
    # a flavor the ClusterQueue does not use is no part of its story
    world.apply(flavor("elsewhere", nodeTaints=[{"key": "x", "value": "y", "effect": "NoSchedule"}]))
    assert explain_workload(world, settle(world), "ns/w").reason == e.reason


def test_a_koordinator_pod_is_explained_in_its_elastic_quota_not_a_cluster_queue() -> None:
    """A Workload that stands for a Koordinator pod joins an ElasticQuota group: explain names the group
    and what it holds (no flavors), or why it waits; status lists a waiting one with its group."""
    from kueued.ops.status import status_from_files, status_of_world
    from tests.elastic.builders import EQ, WL
    manifests = [EQ("cluster").cluster(cpu="10").build(),
                 EQ("team").parent("cluster").min(cpu="2").max(cpu="4").build(),
                 WL("a", "team").req(cpu="3").at(1).build(), WL("b", "team").req(cpu="3").at(2).build()]
    world, report = run_world(manifests, runner=run_actors)
    seen = report.workloads["default/a"]
    admitted = explain_workload(world, settle(world), "default/a", reason=seen.reason, state=seen.state)
    assert (admitted.state, admitted.elastic_quota, admitted.cluster_queue) == ("admitted", "team", None)
    assert render_text(admitted).splitlines() == ["default/a is admitted in ElasticQuota team", "  holds cpu 3"]
    pending = explain_workload(world, settle(world), "default/b", reason=report.workloads["default/b"].reason)
    lines = render_text(pending).splitlines()
    assert lines[0] == "default/b is pending in ElasticQuota team" and lines[1].startswith("  why: quota team:")
    assert status_of_world(world, source="files", admitted={"default/a"}).unrouted == {
        "default/b": "waits in ElasticQuota team"}
    assert status_from_files(manifests, runner=run_actors).unrouted == {"default/b": "waits in ElasticQuota team"}
