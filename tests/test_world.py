"""The single door for objects: bad input is refused with a reason, never a crash."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.simulation import simulate
from kueued.scheduling.workload import timestamp
from kueued.world import Change, World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

KINDS = ["ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "Workload", "WorkloadPriorityClass",
         "Namespace", "Configuration", "ElasticQuota", "Node"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=6),
                    st.sampled_from(["1", "-1", "500m", "1Gi", "abc", "Never", "Any", "default"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


@st.composite
def mangled(draw) -> dict:
    """A valid object with one field replaced by junk, or junk of a known kind."""
    base = draw(st.sampled_from([
        namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")),
        local_queue("lq", "ns", "cq"), workload("w", "ns", "lq", cpu="1")]))
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    where = draw(st.sampled_from(["spec", "metadata", "status", "kind"]))
    if where == "kind":
        doc["kind"] = draw(st.sampled_from(KINDS))
    elif where == "spec" and isinstance(doc.get("spec"), dict):
        doc["spec"][draw(st.sampled_from(["resourceGroups", "podSets", "clusterQueue", "queueName",
                                          "cohortName", "nodeLabels", "priority"]))] = draw(values)
    else:
        doc[where] = draw(values)
    return doc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mangled(), min_size=1, max_size=6))
def test_bad_objects_never_crash_and_the_rest_still_schedules(docs) -> None:
    good = [namespace("ok"), flavor("f"), cluster_queue("good", quotas("f", cpu="1")),
            local_queue("q", "ok", "good"), workload("fine", "ok", "q", cpu="1")]
    report = simulate([*docs, *good])
    assert report.workloads["ok/fine"].state == "admitted"
    for key, why in report.rejected.items():
        assert why.strip(), key


def test_a_refused_update_keeps_the_earlier_version() -> None:
    world = World()
    world.apply(cluster_queue("cq", quotas("default", cpu="2")))
    change, key = world.apply(cluster_queue("cq", quotas("default", cpu="-1")))
    assert change is Change.REJECTED and key == "ClusterQueue/cq"
    assert "nominalQuota" in world.rejected[key]
    assert world.cluster_queues["cq"].spec.resource_groups[0].flavors[0].resources[0].nominal_quota == "2"


def test_not_a_mapping_is_refused_with_a_reason() -> None:
    world = World()
    change, _ = world.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": "oops"})
    assert change is Change.REJECTED
    assert "metadata" in next(iter(world.rejected.values()))


def test_the_recycling_delay_comes_from_the_configuration() -> None:
    world = World()
    assert world.settings.delay_evict_time == 120.0  # Koordinator's DelayEvictTime
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    world.apply({**config, "elasticQuota": {"delayEvictTime": "1m30s"}})
    assert world.settings.delay_evict_time == 90.0
    change, _ = world.apply({**config, "elasticQuota": {"delayEvictTime": "-1s"}})
    assert change is Change.REJECTED and world.settings.delay_evict_time == 90.0
    world.apply(config)
    assert world.settings.delay_evict_time == 120.0


def test_elastic_quotas_and_nodes_can_be_deleted_when_koordinator_allows_it() -> None:
    from tests.elastic.builders import EQ, WL, node
    world = World()
    parent = EQ("dept").is_parent().min(cpu="4").max(cpu="8").build()
    child = EQ("team").parent("dept").min(cpu="2").max(cpu="8").build()
    busy = EQ("busy").min(cpu="1").max(cpu="8").build()
    for m in (parent, child, busy, WL("w", "busy").req(cpu="1").build(), node("n1", cpu="8")):
        assert world.apply(m)[0] is not Change.REJECTED
    # a quota with children, or with bound workloads, stays (Koordinator's webhook refuses)
    assert world.delete(parent) == (Change.REJECTED, "ElasticQuota/kube-system/dept")
    assert "child quotas (team)" in world.rejected["ElasticQuota/kube-system/dept"]
    assert world.delete(busy)[0] is Change.REJECTED
    assert "ElasticQuota/kube-system/busy" in world.elastic_quotas
    # leaves first, then their parent; a Node just goes
    assert world.delete(child)[0] is Change.ELASTIC
    assert world.delete(parent)[0] is Change.ELASTIC
    assert world.delete(node("n1"))[0] is Change.ELASTIC and not world.nodes
    assert set(world.elastic_quotas) == {"ElasticQuota/kube-system/busy"}


def test_a_refused_deletion_waits_children_first_and_a_new_object_of_the_name_ends_it() -> None:
    from tests.elastic.builders import EQ, WL
    world = World()
    dept = EQ("dept").is_parent().min(cpu="4").max(cpu="8").build()
    team = EQ("team").parent("dept").is_parent().min(cpu="2").max(cpu="8").build()
    leaf = EQ("leaf").parent("team").min(cpu="1").max(cpu="8").build()
    busy = EQ("busy").min(cpu="1").max(cpu="8").build()
    wl = WL("w", "busy").req(cpu="1").build()
    for m in (dept, team, leaf, busy, wl):
        assert world.apply(m)[0] is not Change.REJECTED
    for m in (dept, team, busy):  # each refused: a child, or a bound workload
        assert world.delete(m)[0] is Change.REJECTED
    assert world.delete(leaf)[0] is Change.ELASTIC
    retried = world.retry_elastic_deletes()  # children first: team's deletion passes, then dept's
    names = [q["metadata"]["name"] for q in retried]
    assert sorted(names) == ["busy", "dept", "team"] and names.index("team") < names.index("dept")
    changes = {name: world.delete(q)[0] for name, q in zip(names, retried, strict=True)}
    assert changes == {"busy": Change.REJECTED, "team": Change.ELASTIC, "dept": Change.ELASTIC}
    assert set(world.deleting_elastic) == {"ElasticQuota/kube-system/busy"}
    world.delete(wl)  # its bound workload gone, busy's deletion passes
    assert world.delete(world.retry_elastic_deletes()[0])[0] is Change.ELASTIC and not world.elastic_quotas
    # made again under the name of a quota whose deletion waits: the new object is the one in force
    assert world.apply(busy)[0] is Change.ELASTIC and world.apply(wl)[0] is not Change.REJECTED
    assert world.delete(busy)[0] is Change.REJECTED and world.deleting_elastic
    assert world.apply(busy)[0] is not Change.REJECTED and not world.deleting_elastic



@pytest.mark.parametrize("manifest, path", [
    pytest.param({"apiVersion": "v1", "kind": ["Namespace"], "metadata": {"name": "x"}}, "kind: Invalid value",
                 id="kind-a-list"),
    pytest.param({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                  "metadata": {"name": "q", "namespace": "ns", "labels": ["a"]}, "spec": {}},
                 "metadata.labels", id="elastic-labels-a-list"),
    pytest.param({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                  "metadata": {"name": "q", "namespace": "ns"}, "spec": ["max"]}, "spec: Invalid value",
                 id="elastic-spec-a-list"),
    pytest.param({**workload("w", "ns", "lq", cpu="1"), "metadata": {"name": "w", "namespace": "ns",
                                                                    "creationTimestamp": "yesterday"}},
                 "metadata.creationTimestamp: Invalid value", id="creation-timestamp"),
    pytest.param({**workload("w", "ns", "lq", cpu="1"), "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "lastTransitionTime": "2026-13-45T00:00:00Z"}]}},
        "status.conditions[0].lastTransitionTime: Invalid value", id="condition-time"),
])
def test_malformed_fields_are_refused_with_their_path_not_an_internal_error(manifest: dict, path: str) -> None:
    world = World()
    change, key = world.apply(manifest)
    assert change is Change.REJECTED
    assert world.rejected[key].startswith(path)
    assert "cannot be read" not in world.rejected[key] and "Error" not in world.rejected[key]


def test_the_echo_of_a_status_write_changes_nothing_the_scheduler_reads() -> None:
    import copy
    world = World()
    first = workload("w", "ns", "lq", cpu="1")
    first["metadata"]["resourceVersion"] = "10"
    assert world.apply(first)[0] is Change.WORKLOAD
    echo = copy.deepcopy(first)
    echo["metadata"]["resourceVersion"] = "11"
    echo["status"] = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                      "message": "insufficient quota", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    assert world.apply(echo)[0] is Change.NONE
    assert world.raw["Workload/ns/w"]["metadata"]["resourceVersion"] == "11"  # the version next commits carry
    relabelled = copy.deepcopy(echo)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert world.apply(relabelled)[0] is Change.WORKLOAD
    finished = copy.deepcopy(relabelled)
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                             "lastTransitionTime": "2026-01-01T00:00:01Z"})
    assert world.apply(finished)[0] is Change.WORKLOAD and "ns/w" not in world.workloads


def test_a_status_only_update_kueue_s_webhook_refuses_is_refused_too() -> None:
    """The short cut for echoes of kueued's own status writes skips validation; status fields the
    webhook checks on update and kueued never writes still go through it."""
    import copy
    world = World()
    first = workload("w", "ns", "lq", count=3, cpu="1")
    first["status"] = {"reclaimablePods": [{"name": "main", "count": 2}], "admission": {
        "clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "count": 3, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "3"}}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    assert world.apply(first)[0] is Change.WORKLOAD
    fewer = copy.deepcopy(first)
    fewer["status"]["reclaimablePods"] = [{"name": "main", "count": 1}]
    change, key = world.apply(fewer)
    assert change is Change.REJECTED and "status.reclaimablePods" in world.rejected[key]
    assert world.raw[key]["status"]["reclaimablePods"] == [{"name": "main", "count": 2}]
    echo = copy.deepcopy(first)
    echo["status"]["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted",
                                         "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    assert world.apply(echo)[0] is Change.NONE  # kueued's own write: still the short cut


def test_deleting_a_namespace_a_priority_class_or_the_configuration_is_seen() -> None:
    world = World()
    world.apply(namespace("ns", team="a"))
    world.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                 "metadata": {"name": "high"}, "value": 1000})
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}}
    world.apply(config)
    assert world.settings.fair_sharing
    assert world.delete(namespace("ns"))[0] is Change.ROUTING and "ns" not in world.namespaces
    assert world.delete({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                         "metadata": {"name": "high"}})[0] is Change.ROUTING
    assert "high" not in world.priority_classes
    assert world.delete(config)[0] is Change.TOPOLOGY and not world.settings.fair_sharing
    assert world.delete({"kind": "Namespace", "metadata": "broken"})[0] is Change.NONE


def test_a_late_echo_older_than_the_version_held_is_ignored() -> None:
    """Eviction phase one's echo can arrive after kueued wrote phase two over it: it must not
    bring the reservation back."""
    import copy
    world = World()
    released = workload("w", "ns", "lq", cpu="1")
    released["metadata"]["resourceVersion"] = "20"
    world.apply(released)
    late = copy.deepcopy(released)
    late["metadata"]["resourceVersion"] = "19"
    late["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]}}
    assert world.apply(late)[0] is Change.NONE
    assert world.workloads["ns/w"].observed is None
    assert world.raw["Workload/ns/w"]["metadata"]["resourceVersion"] == "20"


def test_a_configuration_s_feature_gates_reach_workload_validation() -> None:
    """Kueue's gated webhook rules follow the running Configuration (here
    WorkloadValidationForPodSetMetadata, on by default)."""
    def bad(name: str) -> dict:
        wl = workload(name, "ns", "lq", cpu="1")
        wl["spec"]["podSets"][0]["template"]["metadata"] = {"labels": {"team": "not a valid value!"}}
        return wl

    world = World()
    change, key = world.apply(bad("a"))
    assert change is Change.REJECTED and "spec.podSets[0].template.metadata.labels" in world.rejected[key]
    world.apply({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                 "featureGates": {"WorkloadValidationForPodSetMetadata": False}})
    assert world.apply(bad("b"))[0] is Change.WORKLOAD


def test_a_workload_priority_class_s_value_is_its_workloads_priority_and_follows_its_changes() -> None:
    """Kueue's WorkloadPriorityClass controller keeps every Workload naming the class at its value."""
    def wpc(value: int) -> dict:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                "metadata": {"name": "high"}, "value": value}

    world = World()
    world.apply(wpc(100))
    wl = workload("w", "ns", "lq", cpu="1", priority=100)
    wl["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    world.apply(wl)
    assert world.workloads["ns/w"].priority == 100
    assert world.apply(wpc(1000))[0] is Change.ROUTING
    assert world.workloads["ns/w"].priority == 1000
    assert world.delete(wpc(1000))[0] is Change.ROUTING
    assert world.workloads["ns/w"].priority == 1000  # as Kueue's controller left it written


def test_a_workload_evicted_for_pods_ready_timeout_queues_by_its_eviction_time_unless_configured() -> None:
    """Kueue's GetQueueOrderTimestamp: the eviction time after a PodsReadyTimeout or admission-check
    eviction (waitForPodsReady.requeuingStrategy.timestamp Eviction, the default); else creation."""
    doc = workload("w", "ns", "lq", cpu="1", created=1)
    doc["status"] = {"conditions": [{"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout",
                                     "message": "", "lastTransitionTime": "2026-01-01T00:05:00Z"}]}
    world = World()
    world.apply(doc)
    assert world.workloads["ns/w"].created == timestamp("2026-01-01T00:05:00Z")
    by_creation = World()
    by_creation.apply({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                       "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"timestamp": "Creation"}}})
    by_creation.apply(doc)
    assert by_creation.workloads["ns/w"].created == timestamp("2026-01-01T00:00:01Z")
    preempted = copy.deepcopy(doc)
    preempted["status"]["conditions"][0]["reason"] = "Preempted"
    world.apply(preempted)
    assert world.workloads["ns/w"].created == timestamp("2026-01-01T00:00:01Z")  # a preemption keeps its place


DEEP = "[" * 1000 + "]" * 1000  # Go reads it; a recursive decoder does not


@pytest.mark.parametrize("annotation, refused", [
    ("quota.scheduling.koordinator.sh/shared-weight", True),
    ("quota.scheduling.koordinator.sh/max-strict-check-resource-keys", True),
    ("quota.scheduling.koordinator.sh/namespaces", False),  # Koordinator ignores an unreadable list
])
def test_json_nested_too_deep_in_an_annotation_is_refused_or_ignored_not_a_crash(annotation: str,
                                                                                 refused: bool) -> None:
    world = World()
    quota = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
             "metadata": {"name": "q", "namespace": "team", "annotations": {annotation: DEEP}},
             "spec": {"max": {"cpu": "4"}, "min": {"cpu": "1"}}}
    change, key = world.apply(quota)
    if refused:
        assert change is Change.REJECTED
        assert world.rejected[key].startswith(f"metadata.annotations[{annotation}]")
        assert "nested too deeply" in world.rejected[key]
    else:
        assert change is Change.ELASTIC and key not in world.rejected


def test_any_failure_reading_an_object_refuses_that_object_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import kueued.world as world_module

    def boom(*args: object, **kwargs: object) -> list:
        raise RecursionError("maximum recursion depth exceeded")

    world = World()
    monkeypatch.setattr(world_module, "validate_object", boom)
    change, key = world.apply(flavor("default"))
    assert change is Change.REJECTED
    assert world.rejected[key] == "cannot be read (RecursionError: maximum recursion depth exceeded)"
    monkeypatch.undo()
    assert world.apply(flavor("default"))[0] is Change.TOPOLOGY  # the same object, read now


@pytest.mark.parametrize("stamp", ["2026-01-01t00:00:00Z", "2026-01-01 00:00:00Z", "2026-01-01T00:00:00z"])
def test_a_time_go_s_rfc3339_would_not_read_is_refused_with_its_field(stamp: str) -> None:
    manifest = workload("w", "ns", "lq", cpu="1")
    manifest["metadata"]["creationTimestamp"] = stamp
    world = World()
    change, key = world.apply(manifest)
    assert change is Change.REJECTED
    assert world.rejected[key].startswith(f'metadata.creationTimestamp: Invalid value: "{stamp}"')


def test_a_null_where_a_value_is_required_is_refused_in_the_api_server_s_words() -> None:
    manifest = workload("w", "ns", "lq", cpu="1")
    manifest["spec"]["podSets"][0]["count"] = None
    world = World()
    change, key = world.apply(manifest)
    assert change is Change.REJECTED
    assert world.rejected[key] == ('spec.podSets[0].count: Invalid value: "null": '
                                   'spec.podSets[0].count in body must be of type integer: "null"')


def test_two_nameless_objects_of_a_kind_are_both_reported() -> None:
    world = World()
    for labels in ({"a": "1"}, {"b": "2"}):
        world.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"labels": labels}})
    assert sorted(world.rejected) == ["ResourceFlavor/", "ResourceFlavor/#2"]
