"""Koordinator's ElasticQuota webhook rules, one rule per case."""

from __future__ import annotations

import pytest

from kueued.model import koordinator as k
from kueued.model.elastic_validation import validate_elastic_quota
from tests.elastic.builders import EQ, WL


def _tree() -> list[EQ]:
    """cluster (10 cpu / 10Gi) > dept (min 6) > team-a (min 4); team-top is a top-level leaf."""
    return [
        EQ("cluster").cluster(cpu="10", memory="10Gi"),
        EQ("dept").parent("cluster").is_parent().min(cpu="6", memory="6Gi").max(cpu="10", memory="10Gi"),
        EQ("team-a").parent("dept").min(cpu="4", memory="1Gi").max(cpu="10", memory="10Gi"),
        EQ("team-top").min(cpu="1").max(cpu="5"),
    ]


def _check(obj: EQ, *, update: bool = False, setup: list[EQ] | None = None,
           workloads: list[WL] | None = None) -> list[str]:
    quotas = {b.obj["metadata"]["name"]: b.build() for b in (_tree() if setup is None else setup)}
    new = obj.build()
    old = quotas.get(k.name_of(new)) if update else None
    seen = [w.build() for w in workloads or []]
    errors = validate_elastic_quota(new, old=old, quotas=quotas, workloads=seen)
    return [e.path for e in errors]


def _team(name: str = "team-b") -> EQ:
    return EQ(name).parent("dept").min(cpu="1", memory="1Gi").max(cpu="10", memory="10Gi")


SHARED_WEIGHT = f"metadata.annotations[{k.ANNOTATION_SHARED_WEIGHT}]"
PARENT = f"metadata.labels[{k.LABEL_PARENT}]"
IS_PARENT = f"metadata.labels[{k.LABEL_IS_PARENT}]"


@pytest.mark.parametrize(("obj", "paths"), [
    pytest.param(_team(), [], id="valid-child"),
    pytest.param(_team().min(cpu="-1", memory="1Gi"), ["spec.min.cpu"], id="negative-min"),
    pytest.param(_team().max(cpu="-1", memory="10Gi").min(), ["spec.max.cpu"], id="negative-max"),
    pytest.param(_team().max(cpu="ten", memory="10Gi"), ["spec.max.cpu"], id="bad-quantity"),
    pytest.param(_team().min(cpu="11", memory="1Gi"), ["spec.min.cpu"], id="min-above-max"),
    pytest.param(_team().min(cpu="1", memory="1Gi", gpu="1"), ["spec.min.nvidia.com/gpu"],
                 id="min-key-not-in-max"),
    pytest.param(_team().annotate(k.ANNOTATION_SHARED_WEIGHT, "cpu=2"), [SHARED_WEIGHT],
                 id="weight-not-json"),
    pytest.param(_team().weight(cpu="-1"), [SHARED_WEIGHT], id="weight-negative"),
    pytest.param(EQ("Team_B").parent("dept").max(cpu="1", memory="1Gi"), ["metadata.name"], id="bad-name"),
    pytest.param(EQ(k.SYSTEM_QUOTA).max(cpu="1"), ["metadata.name"], id="system-quota"),
    pytest.param(EQ(k.ROOT_QUOTA).max(cpu="1"), ["metadata.name"], id="root-quota"),
    pytest.param(_team("team-a"), ["metadata.name"], id="create-existing-name"),
    pytest.param(_team().parent("nowhere"), [PARENT], id="parent-missing"),
    pytest.param(_team().parent("team-a"), [PARENT], id="parent-not-is-parent"),
    pytest.param(_team().min(cpu="1").max(cpu="10"), ["spec.max"], id="max-keys-differ-from-parent"),
    pytest.param(EQ("team-b").parent("dept").min(cpu="1", gpu="1").max(cpu="10", memory="10Gi", gpu="1"),
                 ["spec.max"], id="gpu-in-max-not-in-parent"),
    pytest.param(_team().min(cpu="3", memory="1Gi"), ["spec.min"], id="siblings-min-above-parent-min"),
    pytest.param(_team().min(cpu="3", memory="1Gi").force(), [], id="allow-force-update"),
    pytest.param(_team().min(cpu="3", memory="1Gi").label(k.LABEL_IS_ROOT, "true"), [], id="is-root"),
    pytest.param(EQ("other-top").min(cpu="100").max(cpu="100"), [], id="top-level-leaf-unchecked"),
    pytest.param(EQ("dept-2").parent("cluster").is_parent().min(cpu="5", memory="1Gi")
                 .max(cpu="10", memory="10Gi"), ["spec.min"], id="first-level-under-cluster-checked"),
    pytest.param(EQ("dept-2").is_parent().min(cpu="50").max(cpu="50"), [],
                 id="directly-under-root-unchecked"),
    pytest.param(_team().namespaces("apps"), [], id="namespaces-free"),
    pytest.param(_team().label(k.LABEL_TREE_ID, "t1"), [f"metadata.labels[{k.LABEL_TREE_ID}]"],
                 id="tree-id-differs-from-parent"),
])
def test_create(obj, paths):
    assert _check(obj) == paths


def test_namespace_bound_twice():
    setup = [*_tree(), _team("team-c").namespaces("apps")]
    path = f"metadata.annotations[{k.ANNOTATION_NAMESPACES}]"
    assert _check(_team().namespaces("apps"), setup=setup) == [path]
    assert _check(_team("team-c").namespaces("apps", "web"), setup=setup, update=True) == []


@pytest.mark.parametrize(("obj", "paths"), [
    pytest.param(EQ("team-a").parent("dept").min(cpu="5", memory="1Gi").max(cpu="10", memory="10Gi"), [],
                 id="raise-min-within-parent"),
    pytest.param(EQ("team-a").parent("dept").min(cpu="7", memory="1Gi").max(cpu="10", memory="10Gi"),
                 ["spec.min"], id="raise-min-above-parent"),
    pytest.param(EQ("dept").parent("cluster").is_parent().min(cpu="3", memory="6Gi")
                 .max(cpu="10", memory="10Gi"), ["spec.min"], id="parent-min-below-children"),
    pytest.param(EQ("dept").parent("cluster").is_parent().min(cpu="6").max(cpu="10"),
                 ["spec.max"], id="parent-max-keys-differ-from-child"),
    pytest.param(EQ("dept").parent("cluster").is_parent().min(cpu="6").max(cpu="10", memory="10Gi"),
                 ["spec.min"], id="child-min-key-not-in-parent-min"),
    pytest.param(EQ("dept").parent("cluster").min(cpu="6", memory="6Gi").max(cpu="10", memory="10Gi"),
                 [IS_PARENT], id="is-parent-false-with-children"),
    pytest.param(EQ("team-a").parent("dept").min(cpu="4", memory="1Gi").max(cpu="10", memory="10Gi")
                 .label(k.LABEL_TREE_ID, "t2"), [f"metadata.labels[{k.LABEL_TREE_ID}]"], id="tree-id-change"),
    pytest.param(EQ("team-top").min(cpu="1").max(cpu="5").annotate(k.ANNOTATION_SHARED_WEIGHT, "cpu=2"),
                 [], id="unchanged-meta-skips-checks"),
    pytest.param(EQ("team-top").min(cpu="1").max(cpu="5").namespaces("x")
                 .annotate(k.ANNOTATION_SHARED_WEIGHT, "cpu=2"), [SHARED_WEIGHT],
                 id="weight-checked-on-update"),
])
def test_update(obj, paths):
    assert _check(obj, update=True) == paths


def test_is_parent_true_only_without_bound_workloads():
    leaf_to_parent = EQ("team-top").is_parent().min(cpu="1").max(cpu="5")
    assert _check(leaf_to_parent, update=True) == []
    assert _check(leaf_to_parent, update=True, workloads=[WL("w", "team-top")]) == [IS_PARENT]
    assert _check(leaf_to_parent, update=True, workloads=[WL("w", namespace="team-top")]) == [IS_PARENT]


def test_parent_change_that_closes_a_cycle():
    setup = [EQ("a").is_parent().min(cpu="1").max(cpu="1"),
             EQ("b").parent("a").is_parent().min(cpu="1").max(cpu="1")]
    for parent in ("b", "a"):
        moved = EQ("a").parent(parent).is_parent().min(cpu="1").max(cpu="1")
        assert _check(moved, setup=setup, update=True) == [PARENT]


def test_max_strict_check_keys():
    obj = EQ("team-top").min(cpu="1").max(cpu="4").annotate(k.ANNOTATION_MAX_STRICT_KEYS, '["cpu"]')
    obj.obj["status"] = {"used": {"cpu": "6"}}
    assert _check(obj, update=True) == ["spec.max.cpu"]
    obj.obj["status"] = {"used": {"cpu": "4"}}
    assert _check(obj, update=True) == []


def test_reasons_quote_the_numbers():
    quotas = {b.obj["metadata"]["name"]: b.build() for b in _tree()}
    errors = validate_elastic_quota(_team().min(cpu="3", memory="1Gi").build(), old=None, quotas=quotas,
                                    workloads=[])
    assert [str(e) for e in errors] == [
        "spec.min: the mins of dept's children would sum above its min (cpu 7 > 6)"]


def test_parents_first_orders_by_creation_and_puts_every_parent_before_its_children() -> None:
    def q(name: str, parent: str, second: int) -> dict:
        obj = EQ(name).parent(parent).min(cpu="1").max(cpu="2").build() if parent else EQ(name).build()
        obj["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{second:02d}Z"
        return obj

    chain = [q(f"n{i}", f"n{i - 1}" if i else "", 50 - i) for i in range(40)]  # made child-first
    tree = [q("b", "a", 1), q("a", "", 2), q("c", "a", 0), q("x", "y", 3), q("y", "x", 4)]
    order = [k.name_of(o) for o in k.parents_first(tree + chain)]
    assert order.index("a") < order.index("c") < order.index("b")  # c was made before b
    assert [n for n in order if n.startswith("n")] == [f"n{i}" for i in range(40)]
    assert {"x", "y"} <= set(order) and len(order) == len(tree) + len(chain)  # a cycle is kept, as it comes


def test_of_two_made_in_one_second_the_one_refused_before_comes_after_the_one_in_force() -> None:
    def q(name: str, refused: bool) -> dict:
        obj = EQ(name).min(cpu="1").max(cpu="2").build()
        obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:07Z"
        if refused:
            obj["status"] = {"conditions": [{"type": "Accepted", "status": "False", "reason": "ValidationFailed"}]}
        return obj

    # by name "a-bad" would come first; a restart must keep "z-ok" (in force before it) in force
    assert [k.name_of(o) for o in k.parents_first([q("a-bad", True), q("z-ok", False)])] == ["z-ok", "a-bad"]


def test_the_world_keeps_a_refused_quota_to_try_again_until_a_version_is_in_force_or_it_goes() -> None:
    from kueued.world import Change, World
    world = World()
    child = EQ("child").parent("team").min(cpu="1").max(cpu="2").build()
    assert world.apply(child)[0] is Change.REJECTED  # its parent does not exist yet
    assert world.retry_elastic() == [child]
    team = EQ("team").min(cpu="2").max(cpu="4").build()
    team["metadata"]["labels"][k.LABEL_IS_PARENT] = "true"
    assert world.apply(team)[0] is Change.ELASTIC
    assert world.apply(world.retry_elastic()[0])[0] is Change.ELASTIC
    assert world.refused_elastic == {}

    too_big = EQ("child").parent("team").min(cpu="3").max(cpu="4").build()  # above its parent's min
    assert world.apply(too_big)[0] is Change.REJECTED and world.retry_elastic() == [too_big]
    assert world.apply(child)[0] is Change.NONE  # the version in force again: the refused one is not tried
    assert world.retry_elastic() == []

    assert world.apply(too_big)[0] is Change.REJECTED
    world.delete(too_big)  # gone: no version of it is tried again
    assert world.retry_elastic() == []
