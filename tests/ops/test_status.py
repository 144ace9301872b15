"""``kueued status`` from files: the tree's numbers after a run, worked out by hand (``ops_trees``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.simulation import run_actors
from kueued.cli import main
from kueued.ops.status import status_from_files
from kueued.ops.tree import node_statuses, settle
from kueued.scheduling.workload import Placement
from kueued.world import World
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
from tests.ops.ops_trees import GPU, two_levels


def _numbers(report, key: str) -> tuple[str, ...]:
    a = report.nodes[key].resources["a100"][GPU]
    return a.nominal, a.quota, a.used, a.borrowed, a.lent


@pytest.mark.parametrize(("key", "numbers", "pending", "admitted"), [
    pytest.param("Cohort/org", ("0", "20", "16", "0", "0"), 1, 3, id="root"),
    pytest.param("Cohort/research", ("0", "14", "16", "2", "0"), 1, 3, id="cohort-borrowing-from-its-parent"),
    pytest.param("ClusterQueue/vision", ("10", "10", "16", "6", "0"), 1, 3, id="borrower"),
    pytest.param("ClusterQueue/nlp", ("4", "4", "0", "0", "4"), 0, 0, id="lender-in-research"),
    pytest.param("ClusterQueue/ops", ("6", "6", "0", "0", "2"), 0, 0, id="lender-to-research"),
])
def test_each_node_shows_nominal_quota_used_borrowed_lent_and_counts(key: str, numbers: tuple[str, ...],
                                                                       pending: int, admitted: int) -> None:
    report = status_from_files(two_levels(), runner=run_actors)
    assert _numbers(report, key) == numbers
    assert (report.nodes[key].pending, report.nodes[key].admitted) == (pending, admitted)


def test_nodes_come_in_tree_order_with_parents_depths_and_limits() -> None:
    report = status_from_files(two_levels(), runner=run_actors)
    assert [(k, n.parent, n.depth) for k, n in report.nodes.items()] == [
        ("Cohort/org", None, 0), ("Cohort/research", "org", 1), ("ClusterQueue/nlp", "research", 2),
        ("ClusterQueue/vision", "research", 2), ("ClusterQueue/ops", "org", 1)]
    assert report.nodes["ClusterQueue/vision"].resources["a100"][GPU].borrowing_limit == "6"


def test_idle_quota_lent_to_one_borrower_is_shared_by_what_each_lender_has_idle() -> None:
    # a (2) uses 7, borrowing 5; b (3) and d (6) are idle: 5 * 3/9 and 5 * 6/9 = 1.67 and 3.33,
    # the remaining unit to the larger remainder (b): 2 and 3, adding up to the 5 borrowed.
    world = World()
    for m in [namespace("ns"), flavor("f"),
              *(cluster_queue(n, quotas("f", cpu=q), cohort="c") for n, q in (("a", "2"), ("b", "3"), ("d", "6"))),
              local_queue("lq", "ns", "a"), workload("w", "ns", "lq", cpu="7")]:
        world.apply(m)
    world.placed["ns/w"] = Placement("a", {("f", "cpu"): 7000}, {"main": {"cpu": "f"}})
    nodes = node_statuses(world, settle(world))
    assert [(nodes[f"ClusterQueue/{n}"].resources["f"]["cpu"].borrowed,
             nodes[f"ClusterQueue/{n}"].resources["f"]["cpu"].lent) for n in "abd"] == [
        ("5", "0"), ("0", "2"), ("0", "3")]


def test_a_cohort_s_own_quota_covers_its_members_borrowing_before_they_lend() -> None:
    # research holds 3 of its own: vision's 5 over its nominal takes those 3 first, then 2 of nlp's 4.
    world = World()
    for m in [namespace("ns"), flavor("a100"), cohort("research", quotas("a100", cpu="3")),
              cluster_queue("vision", quotas("a100", cpu="5"), cohort="research"),
              cluster_queue("nlp", quotas("a100", cpu="4"), cohort="research"),
              local_queue("lq", "ns", "vision"), workload("w", "ns", "lq", cpu="10")]:
        world.apply(m)
    world.placed["ns/w"] = Placement("vision", {("a100", "cpu"): 10_000}, {"main": {"cpu": "a100"}})
    nodes = node_statuses(world, settle(world))
    research = nodes["Cohort/research"].resources["a100"]["cpu"]
    assert (research.nominal, research.quota, research.used) == ("3", "12", "10")
    assert nodes["ClusterQueue/vision"].resources["a100"]["cpu"].borrowed == "5"
    assert nodes["ClusterQueue/nlp"].resources["a100"]["cpu"].lent == "2"


def test_the_command_prints_json_and_a_tree(tmp_path, capsys) -> None:
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump_all(two_levels()))
    assert main(["status", str(path), "--output", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["source"] == "files"
    assert body["nodes"]["ClusterQueue/vision"]["resources"]["a100"][GPU] == {
        "nominal": "10", "quota": "10", "used": "16", "borrowed": "6", "lent": "0", "borrowingLimit": "6"}
    assert body["nodes"]["Cohort/research"]["pending"] == 1
    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Cohort org  pending 1 · admitted 3" in out
    assert "a100 nvidia.com/gpu: used 0 of quota 4 · lent 4" in out
    assert "a100 nvidia.com/gpu: used 16 of quota 10 · borrowed 6 · borrowingLimit 6" in out


def test_a_workload_routed_nowhere_is_listed_apart(tmp_path, capsys) -> None:
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump_all([*two_levels(), workload("lost", "ns", "nope", cpu="1")]))
    assert main(["status", str(path), "-o", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["unrouted"] == {"ns/lost": "LocalQueue nope doesn't exist in namespace ns"}


def test_a_held_local_queue_s_workloads_are_pending_nowhere_as_in_the_status_the_daemon_writes() -> None:
    from kueued.kube.tree_status import tree_status
    held = local_queue("held", "ns", "cq")
    held["spec"]["stopPolicy"] = "Hold"
    manifests = [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="1")),
                 local_queue("open", "ns", "cq"), held,
                 workload("big", "ns", "open", created=0, cpu="2"), workload("waits", "ns", "held", created=1, cpu="1")]
    world = World()
    for m in manifests:
        world.apply(m)
    nodes = node_statuses(world, settle(world))
    assert nodes["ClusterQueue/cq"].pending == 1  # big only: kueued status agrees with the written status
    written = tree_status(world, settle(world))
    assert written["ClusterQueue/cq"].fields["pendingWorkloads"] == 1


def test_an_inactive_queue_gives_every_cause_the_active_condition_gives() -> None:
    stopped = cluster_queue("cq", quotas("nope", cpu="1"), quotas("nope2", cpu="1"))
    stopped["spec"]["stopPolicy"] = "Hold"
    world = World()
    for m in [namespace("ns"), stopped]:
        world.apply(m)
    nodes = node_statuses(world, settle(world))
    assert nodes["ClusterQueue/cq"].inactive == "is stopped, references missing ResourceFlavor(s): nope,nope2"


def _teams() -> list[dict]:
    from tests.elastic.builders import EQ, WL
    return [EQ("cluster").cluster(cpu="10").build(),
            EQ("team-a").parent("cluster").min(cpu="4").max(cpu="10").build(),
            EQ("team-b").parent("cluster").min(cpu="6").max(cpu="10").build(),
            WL("a1", "team-a").req(cpu="3").at(1).build(),
            WL("a2", "team-a").req(cpu="8").at(2).build(),
            WL("b1", "team-b").req(cpu="5").at(1).build()]


def test_elastic_quota_trees_show_min_max_runtime_request_and_used(tmp_path, capsys) -> None:
    """team-b asks 5 (under its min): runtime 5; team-a gets the other 5 of the cluster's 10, so of its
    3 + 8 only a1 runs.  A parent's used is its children's."""
    path = tmp_path / "quotas.yaml"
    path.write_text(yaml.safe_dump_all(_teams()))
    assert main(["status", str(path), "-o", "json"]) == 0
    groups = json.loads(capsys.readouterr().out)["quotaGroups"]
    assert list(groups) == ["cluster", "team-a", "team-b"]
    assert groups["team-a"] == {"namespace": "kube-system", "parent": "cluster", "depth": 1, "pending": 1,
                                "admitted": 1, "min": {"cpu": "4"}, "max": {"cpu": "10"}, "runtime": {"cpu": "5"},
                                "request": {"cpu": "11"}, "used": {"cpu": "3"}}
    assert (groups["team-b"]["runtime"], groups["team-b"]["used"]) == ({"cpu": "5"}, {"cpu": "5"})
    assert "parent" not in groups["cluster"] and groups["cluster"]["used"] == {"cpu": "8"}
    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ElasticQuota team-a  pending 1 · admitted 1" in out
    assert "cpu: used 3 of runtime 5 · request 11 · min 4 · max 10" in out
    assert "no Cohorts" not in out


def test_a_cluster_s_elastic_quotas_read_runtime_from_annotations_and_used_from_admissions() -> None:
    """Nothing is scheduled on a read of a cluster: the runtime and request are the annotations the
    daemon wrote, and what is used is what the admitted Workloads ask."""
    from kueued.model import koordinator as k
    from kueued.ops.cluster_read import world_of
    from kueued.ops.status import status_of_world
    docs = _teams()
    docs[1]["metadata"]["annotations"] = {k.ANNOTATION_RUNTIME: '{"cpu":"4500m"}', k.ANNOTATION_REQUEST: '{"cpu":"11"}'}
    docs[3]["status"] = {"admission": {"clusterQueue": "team-a", "podSetAssignments": [
        {"name": "main", "count": 1, "resourceUsage": {"cpu": "3"}}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"},
                       {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    groups = status_of_world(world_of(docs), source="cluster").quota_groups
    a, b = groups["team-a"], groups["team-b"]
    assert (a.runtime, a.request, a.used) == ({"cpu": "4500m"}, {"cpu": "11"}, {"cpu": "3"})
    assert (a.admitted, a.pending) == (1, 1)
    assert (b.runtime, b.used, b.admitted, b.pending) == ({}, {}, 0, 1)  # not annotated: zero, as Koordinator reads it


_TEAMS = _teams()  # built once: every Workload built moves the builders' creation clock on

_JUNK = [None, 0, -1, "x", "", "-3", "1e400", "99999999999999999999Ei", [], {}, {"cpu": "x"}, {"cpu": None},
         ["cpu"], '{"cpu":', '{"cpu":"-1"}', '{"cpu":[1]}', "team-a", "cluster"]
_SPOTS = [("metadata", "labels", "quota.scheduling.koordinator.sh/parent"),
          ("metadata", "labels", "quota.scheduling.koordinator.sh/is-parent"),
          ("metadata", "annotations", "quota.scheduling.koordinator.sh/runtime"),
          ("metadata", "annotations", "quota.scheduling.koordinator.sh/request"),
          ("metadata", "labels"), ("metadata", "annotations"), ("metadata", "name"), ("spec",),
          ("spec", "min"), ("spec", "max"), ("spec", "min", "cpu"), ("spec", "max", "cpu"), ("status",),
          ("status", "admission"), ("status", "admission", "clusterQueue"), ("spec", "podSets"),
          ("metadata", "labels", "quota.scheduling.koordinator.sh/name")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(_SPOTS), st.sampled_from(_JUNK)), max_size=6))
def test_elastic_quota_trees_survive_any_value_in_any_field(edits: list) -> None:
    """``kueued status`` never fails on a quota or workload it could not read: whatever lands in a
    label, an annotation, a min or a status, it draws what is in force (from files and from a cluster)."""
    from kueued.ops.cluster_read import world_of
    from kueued.ops.status import status_of_world
    docs = copy.deepcopy(_TEAMS)
    for index, spot, value in edits:
        obj: Any = docs[index]
        for part in spot[:-1]:
            if not isinstance(obj, dict):
                break
            obj = obj.setdefault(part, {}) if isinstance(obj.get(part, {}), dict) else obj[part]
        else:
            if isinstance(obj, dict):
                obj[spot[-1]] = value
    report = status_of_world(world_of(copy.deepcopy(docs)), source="cluster")
    msgspec.json.encode(report)
    files = status_from_files(copy.deepcopy(docs), runner=run_actors)
    assert set(files.quota_groups) <= {"cluster", "team-a", "team-b", "koordinator-default-quota"} | {
        str(v) for v in _JUNK if isinstance(v, str)}
