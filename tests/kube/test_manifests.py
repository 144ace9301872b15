"""``kueued manifests`` without a cluster: the CRD schemas are structural, the names are Kueue's and
Koordinator's, the RBAC is least-privilege, and the options do what they say.

What the API server makes of the output is tests/integration/test_manifests_api.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import yaml

from kueued.kube import shapes
from kueued.kube.crds import KINDS, KUEUE_DEFAULTS, crds
from kueued.kube.manifests import documents, render
from kueued.kube.rbac import RULES, rbac
from kueued.kube.schema import QUANTITY_PATTERN, SchemaError, structural
from kueued.model import api

# Kueue's config/components/crd/bases and Koordinator's elasticquotas CRD, as they name things.
EXPECTED = {
    "resourceflavors.kueue.x-k8s.io": ("ResourceFlavor", "resourceflavor", "Cluster", ["flavor", "flavors", "rf"]),
    "cohorts.kueue.x-k8s.io": ("Cohort", "cohort", "Cluster", []),
    "clusterqueues.kueue.x-k8s.io": ("ClusterQueue", "clusterqueue", "Cluster", ["cq"]),
    "localqueues.kueue.x-k8s.io": ("LocalQueue", "localqueue", "Namespaced", ["queue", "queues", "lq"]),
    "workloads.kueue.x-k8s.io": ("Workload", "workload", "Namespaced", ["wl"]),
    "workloadpriorityclasses.kueue.x-k8s.io": ("WorkloadPriorityClass", "workloadpriorityclass", "Cluster", []),
    "elasticquotas.scheduling.sigs.k8s.io": ("ElasticQuota", "elasticquota", "Namespaced", []),
}


def _by_name() -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in crds()}


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path, the way the API server walks a structural schema."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")
    for i, sub in enumerate(node.get("anyOf", [])):
        yield from _nodes(sub, f"{path}|{i}")


def _at(schema: dict[str, Any], *steps: str) -> dict[str, Any]:
    node = schema
    for step in steps:
        node = node["items"] if step == "[]" else node["additionalProperties"] if step == "{}" else \
            node["properties"][step]
    return node


# --- names, scope, versions -------------------------------------------------------------------------

def test_names_and_scope_are_kueues_and_koordinators():
    by_name = _by_name()
    assert set(by_name) == set(EXPECTED)
    for name, (kind, singular, scope, short_names) in EXPECTED.items():
        spec = by_name[name]["spec"]
        assert spec["names"] == {"kind": kind, "listKind": f"{kind}List", "plural": name.split(".")[0],
                                 "singular": singular, **({"shortNames": short_names} if short_names else {})}
        assert spec["scope"] == scope
        assert spec["group"] == name.split(".", 1)[1]


def test_one_version_served_and_stored_with_a_status_subresource():
    for crd in crds():
        (version,) = crd["spec"]["versions"]
        expected = "v1alpha1" if crd["spec"]["group"] == "scheduling.sigs.k8s.io" else "v1beta2"
        assert (version["name"], version["served"], version["storage"]) == (expected, True, True)
        assert version["subresources"] == {"status": {}}


# --- structural schemas -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_schema_is_structural(name):
    schema = _schema(_by_name()[name])
    assert schema["type"] == "object"
    assert schema["properties"]["metadata"] == {"type": "object"}  # the API server owns metadata's schema
    assert "x-kubernetes-preserve-unknown-fields" not in schema  # a top-level typo is refused
    for path, node in _nodes(schema):
        assert "$ref" not in node and "$defs" not in node, path
        assert "title" not in node, path
        assert "default" not in node or _dotted(path) in KUEUE_DEFAULTS[_by_name()[name]["spec"]["names"]["kind"]], path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        if "|" in path:  # inside int-or-string's anyOf: types are allowed there only
            continue
        assert "anyOf" not in node, path
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), f"{path} has no type"
        if node.get("type") == "object" and not ({"properties", "additionalProperties"} & node.keys()):
            # An object that names nothing would be pruned empty: it must keep what it holds.
            assert node.get("x-kubernetes-preserve-unknown-fields") or path == ".metadata", path


def _dotted(path: str) -> str:
    """A walked schema path (``.spec.podSets[].count``) as :data:`KUEUE_DEFAULTS` spells it."""
    return path.lstrip(".")


# What a missing field decodes as, reached through objects that exist (a list item, an optional object).
_DECODED = {
    "ClusterQueue": {"metadata": {"name": "x"}, "spec": {"preemption": {"borrowWithinCohort": {}}}},
    "LocalQueue": {"metadata": {"name": "x", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}},
    "Workload": {"metadata": {"name": "x", "namespace": "ns"}, "spec": {"podSets": [{}]}},
}


def _decoded(obj: Any, path: str) -> Any:
    for part in path.split("."):
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in part.removesuffix("[]"))
        obj = getattr(obj, snake)
        if part.endswith("[]"):
            obj = obj[0]
    return msgspec.to_builtins(obj) if isinstance(obj, msgspec.Struct) else obj


@pytest.mark.parametrize("kind", sorted(KUEUE_DEFAULTS))
def test_crd_defaults_are_kueues_and_what_kueued_decodes_a_missing_field_as(kind: str) -> None:
    """The API server writes these into stored objects; an object it defaulted must schedule as the
    object written, so each default is the value kueued reads when the field is missing."""
    crd = next(c for c in KINDS if c.kind == kind)
    obj = msgspec.convert(_DECODED[kind], crd.model)
    by_path = {_dotted(path): node["default"] for path, node in _nodes(_schema(_by_name()[crd.name]))
               if "default" in node}
    assert by_path == KUEUE_DEFAULTS[kind]
    for path, value in KUEUE_DEFAULTS[kind].items():
        if value == {}:  # an object defaulted so that its own fields' defaults apply
            assert isinstance(_decoded(obj, path), dict), path
        else:
            assert _decoded(obj, path) == value, path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_field_names_are_the_camel_case_api_names(name):
    for path, _ in _nodes(_schema(_by_name()[name])):
        assert "_" not in path, path


def test_quantities_are_int_or_string_with_kueues_pattern():
    cq = _schema(_by_name()["clusterqueues.kueue.x-k8s.io"])
    resource = _at(cq, "spec", "resourceGroups", "[]", "flavors", "[]", "resources", "[]")
    assert _at(resource, "nominalQuota") == {"anyOf": [{"type": "integer"}, {"type": "string"}],
                                             "pattern": QUANTITY_PATTERN, "x-kubernetes-int-or-string": True}
    assert _at(resource, "borrowingLimit")["nullable"] is True
    assert _at(resource, "name") == {"type": "string"}
    assert resource["required"] == ["name"]
    eq = _schema(_by_name()["elasticquotas.scheduling.sigs.k8s.io"])
    assert _at(eq, "spec", "max", "{}")["x-kubernetes-int-or-string"] is True
    assert _at(eq, "status", "used", "{}")["pattern"] == QUANTITY_PATTERN


def test_workload_types_what_kueued_reads_and_keeps_the_rest():
    wl = _schema(_by_name()["workloads.kueue.x-k8s.io"])
    pod_set = _at(wl, "spec", "podSets", "[]")
    assert _at(pod_set, "count") == {"type": "integer", "default": 1}  # Kueue's default
    assert _at(pod_set, "minCount") == {"type": "integer", "nullable": True}
    # Kueue's declared fields only (a typo is refused); topologyRequest, not typed here, is kept whole
    assert "x-kubernetes-preserve-unknown-fields" not in pod_set
    assert _at(pod_set, "topologyRequest") == {"x-kubernetes-preserve-unknown-fields": True}
    pod_spec = _at(pod_set, "template", "spec")
    # a PodSpec's own fields and no others (a typo'd ``resources.request`` is refused); those not typed here kept whole
    assert "x-kubernetes-preserve-unknown-fields" not in pod_spec and "schedulerName" in pod_spec["properties"]
    assert _at(pod_spec, "volumes") == {"x-kubernetes-preserve-unknown-fields": True}
    container = _at(pod_spec, "containers", "[]")
    assert "x-kubernetes-preserve-unknown-fields" not in container and "livenessProbe" in container["properties"]
    assert "x-kubernetes-preserve-unknown-fields" not in _at(container, "resources")
    assert set(_at(container, "resources")["properties"]) == {"claims", "limits", "requests"}
    assert _at(pod_spec, "affinity") == {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                         "nullable": True}
    requests = _at(pod_spec, "containers", "[]", "resources", "requests", "{}")
    assert requests["x-kubernetes-int-or-string"] is True
    assert _at(wl, "spec", "priority") == {"type": "integer", "nullable": True}


def test_status_holds_the_shapes_kueued_writes():
    by_name = _by_name()
    wl = _at(_schema(by_name["workloads.kueue.x-k8s.io"]), "status")
    assignment = _at(wl, "admission", "podSetAssignments", "[]")
    assert set(assignment["properties"]) == {"name", "flavors", "resourceUsage", "count"}
    assert _at(assignment, "resourceUsage", "{}")["x-kubernetes-int-or-string"] is True
    assert _at(assignment, "flavors", "{}") == {"type": "string"}
    condition = _at(wl, "conditions", "[]")
    assert set(condition["properties"]) == {"type", "status", "reason", "message", "lastTransitionTime",
                                            "observedGeneration"}
    # The model's own status fits inside what the CRD admits.
    assert {f.encode_name for f in msgspec.structs.fields(api.WorkloadStatus)} <= set(wl["properties"])
    cq = _at(_schema(by_name["clusterqueues.kueue.x-k8s.io"]), "status")
    assert {"pendingWorkloads", "reservingWorkloads", "admittedWorkloads", "flavorsReservation", "flavorsUsage",
            "conditions", "fairSharing"} <= set(cq["properties"])
    assert _at(cq, "flavorsUsage", "[]", "resources", "[]", "total")["x-kubernetes-int-or-string"] is True
    lq = _at(_schema(by_name["localqueues.kueue.x-k8s.io"]), "status")
    assert {f.encode_name for f in msgspec.structs.fields(api.LocalQueueStatus)} <= set(lq["properties"])
    assert _at(_schema(by_name["cohorts.kueue.x-k8s.io"]), "status", "fairSharing", "weightedShare") == \
        {"type": "integer"}
    for name in ("workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io",
                 "cohorts.kueue.x-k8s.io", "elasticquotas.scheduling.sigs.k8s.io"):
        status = _at(_schema(by_name[name]), "status")
        assert status["x-kubernetes-preserve-unknown-fields"] is True, name  # Kueue's other status fields
        assert "observedGeneration" in _at(status, "conditions", "[]")["properties"], name


def test_kinds_without_a_status_have_no_status_schema():
    by_name = _by_name()
    for name in ("resourceflavors.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io"):
        assert "status" not in _schema(by_name[name])["properties"]
    wpc = _schema(by_name["workloadpriorityclasses.kueue.x-k8s.io"])
    assert _at(wpc, "value") == {"type": "integer"} and _at(wpc, "description") == {"type": "string"}


# --- the converter ------------------------------------------------------------------------------------

class _Sample(msgspec.Struct, rename="camel"):
    plain_name: str
    maybe_count: int | None = None
    amounts: dict[str, api.Quantity] = {}
    anything: dict[str, Any] = {}
    nested: shapes.FairSharingStatus | None = None


class _Odd(msgspec.Struct):
    either: int | bool = 0


def test_converter_inlines_and_maps_each_json_schema_form():
    schema = structural(_Sample, root=False)
    assert schema["required"] == ["plainName"]
    assert schema["properties"]["maybeCount"] == {"type": "integer", "nullable": True}
    assert schema["properties"]["amounts"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert schema["properties"]["anything"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert schema["properties"]["nested"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                              "properties": {"weightedShare": {"type": "integer"}},
                                              "nullable": True}


def test_converter_refuses_a_union_it_has_no_structural_form_for():
    with pytest.raises(SchemaError, match="either"):
        structural(_Odd)


# --- RBAC -------------------------------------------------------------------------------------------

def test_no_wildcards_and_every_rule_says_why():
    for rule in RULES:
        assert "*" not in rule.verbs and "*" not in rule.resources and rule.group != "*", rule
        assert rule.why.strip(), rule
    for doc in rbac(user="kueued"):
        for policy in doc.get("rules", []):
            assert "*" not in policy["verbs"] + policy["resources"] + policy["apiGroups"], policy


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for p in role["rules"] for group in p["apiGroups"]
            for resource in p["resources"] for verb in p["verbs"]}


def test_cluster_role_reads_every_kind_and_writes_only_status_annotations_finalizers_and_workloads():
    docs = {d["kind"]: d for d in rbac()}
    grants = _grants(docs["ClusterRole"])
    for kind in KINDS:
        assert {(kind.group, kind.plural, verb) for verb in ("list", "watch")} <= grants, kind.kind
        if kind.status is not None:
            assert (kind.group, f"{kind.plural}/status", "patch") in grants, kind.kind
    writes = {g for g in grants if g[2] in ("create", "update", "patch", "delete")}
    assert writes == {  # merge patches only, never a PUT (update) but the finalizers the API server asks for
        *{("kueue.x-k8s.io", f"{p}/status", "patch") for p in ("workloads", "clusterqueues", "localqueues",
                                                                "cohorts")},
        ("scheduling.sigs.k8s.io", "elasticquotas/status", "patch"),
        ("scheduling.sigs.k8s.io", "elasticquotas", "patch"),
        *{("kueue.x-k8s.io", "workloads", v) for v in ("create", "patch", "delete")},
        # Kueue's resource-in-use finalizer, put on and taken off
        ("kueue.x-k8s.io", "clusterqueues", "patch"), ("kueue.x-k8s.io", "resourceflavors", "patch"),
        ("", "events", "create"), ("", "events", "patch"),  # a repeated Event is counted on the one written
        ("batch", "jobs", "patch"), ("batch", "jobs/status", "patch"), ("batch", "jobs/finalizers", "update"),
        ("batch", "jobs", "delete"),  # object retention: the Job of a Workload Kueue deactivated
        # the kueued.io/in-force annotation on an object whose update was refused
        *{("kueue.x-k8s.io", p, "patch") for p in ("cohorts", "localqueues", "workloadpriorityclasses")},
    }
    assert not any(g[1] == "leases" for g in grants)  # leases only in kueued's namespace
    assert {("", "namespaces", "watch"), ("", "nodes", "list")} <= grants
    assert not any(g[1] in ("secrets", "configmaps", "pods") for g in grants)


def test_leases_are_a_role_in_kueueds_namespace():
    docs = {d["kind"]: d for d in rbac(namespace="elsewhere")}
    assert docs["Role"]["metadata"]["namespace"] == "elsewhere"
    assert _grants(docs["Role"]) == {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


_SA = [{"kind": "ServiceAccount", "name": "kueued", "namespace": "ns"}]


def _binding_pairs(docs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Binding name -> kind -> binding."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for d in docs:
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            out.setdefault(d["metadata"]["name"], {})[d["kind"]] = d
    return out


@pytest.mark.parametrize(("user", "subjects"), [
    pytest.param(None, {"kueued": _SA}, id="service-account"),
    pytest.param("kueued", {"kueued": _SA, "kueued:user:kueued": [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "kueued"}]}, id="user"),
])
def test_bindings_name_the_service_account_and_the_user(user, subjects):
    docs = rbac(namespace="ns", user=user)
    kinds = {d["kind"]: d for d in docs}
    assert kinds["Namespace"]["metadata"]["name"] == "ns"
    assert kinds["ServiceAccount"]["metadata"] == {"name": "kueued", "namespace": "ns",
                                                   "labels": {"app.kubernetes.io/managed-by": "kueued"}}
    pairs = _binding_pairs(docs)
    assert {name: {kind: b["subjects"] for kind, b in by_kind.items()} for name, by_kind in pairs.items()} == {
        name: {"ClusterRoleBinding": s, "RoleBinding": s} for name, s in subjects.items()}
    for by_kind in pairs.values():
        for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
            assert by_kind[binding]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role,
                                                   "name": "kueued"}
        assert by_kind["RoleBinding"]["metadata"]["namespace"] == "ns"


def test_a_user_changes_no_object_the_plain_stream_has():
    """``make dev-cluster`` applies the stream with a user; a user who then applies the plain
    stream server-side must find every shared object the same (``subjects`` is an atomic list
    to server-side apply: a different one is a conflict with the manager that set it)."""
    plain = {(d["kind"], d["metadata"]["name"]): d for d in documents()}
    with_user = {(d["kind"], d["metadata"]["name"]): d for d in documents(user="someone")}
    assert plain.keys() < with_user.keys()
    assert all(with_user[key] == doc for key, doc in plain.items())


# --- render -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "kinds"), [
    pytest.param({}, ["CustomResourceDefinition"] * 7 + ["Namespace", "ServiceAccount", "ClusterRole",
                                                          "ClusterRoleBinding", "Role", "RoleBinding"], id="all"),
    pytest.param({"rbac": False}, ["CustomResourceDefinition"] * 7, id="crds-only"),
    pytest.param({"crds": False}, ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                   "RoleBinding"], id="rbac-only"),
    pytest.param({"crds": False, "rbac": False}, [], id="nothing"),
])
def test_render_is_the_documents_as_one_yaml_stream(options, kinds):
    text = render(**options)
    loaded = [d for d in yaml.safe_load_all(text) if d is not None]
    assert [d["kind"] for d in loaded] == kinds
    assert loaded == documents(**options)
    assert "&id" not in text and "*id" not in text  # no anchors where documents share a value


def test_render_quotes_what_yaml_1_1_would_read_as_a_boolean():
    text = render(crds=False, user="y", namespace="n")
    assert "name: 'y'" in text and "namespace: 'n'" in text
