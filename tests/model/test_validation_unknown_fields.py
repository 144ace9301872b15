"""A top-level field the kind does not have is refused, as ``kubectl apply``'s strict field
validation refuses it: ``sepc:`` must not leave a ClusterQueue silently without its spec."""

from __future__ import annotations

from kueued.model.validation import validate_object


def test_a_misspelt_top_level_field_is_refused_by_name() -> None:
    errors = validate_object({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                              "metadata": {"name": "a"}, "sepc": {}})
    assert [(e.path, e.reason) for e in errors] == [("sepc", 'unknown field "sepc"')]


def test_a_priority_class_keeps_its_own_top_level_fields() -> None:
    ok = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"},
          "value": 10, "description": "batch"}
    assert validate_object(ok) == []
    assert [e.path for e in validate_object({**ok, "spec": {}})] == ["spec"]


def _cq(spec: dict) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "a"}, "spec": spec}


def test_a_v1beta1_spelling_inside_the_spec_is_refused_not_dropped() -> None:
    """``spec.cohort`` (v1beta1) in a v1beta2 ClusterQueue: Kueue's CRD refuses it; read without it,
    the queue would have quietly had no cohort."""
    errors = validate_object(_cq({"cohort": "team", "namespaceSelector": {}}))
    assert [(e.path, e.reason) for e in errors] == [("spec.cohort", 'unknown field "spec.cohort"')]


def test_unknown_fields_are_named_with_their_index_however_deep() -> None:
    spec = {"namespaceSelector": {"matchLabels": {"any": "label"}}, "resourceGroups": [{
        "coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [
            {"name": "cpu", "nominalQuota": "1", "nominal": "2"}]}]}]}
    assert [e.path for e in validate_object(_cq(spec))] == ["spec.resourceGroups[0].flavors[0].resources[0].nominal"]
    workload = _workload({"containers": [], "anything": "not a PodSpec field"}, queuename="lq")
    assert [e.path for e in validate_object(workload)] == ["spec.queuename", "spec.podSets[0].template.spec.anything"]


def _workload(pod_spec: dict, **spec: object) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "n"},
            "spec": {**spec, "podSets": [{"name": "main", "count": 1, "template": {"spec": pod_spec}}]}}


def test_a_misspelt_request_in_a_pod_template_is_refused_not_admitted_for_nothing() -> None:
    """``resources.request`` (no s): read without it, the workload asked for nothing and was admitted
    without quota.  Kueue's CRD carries the whole PodTemplateSpec schema: kubectl refuses it."""
    typo = _workload({"containers": [{"name": "c", "resources": {"request": {"cpu": "100"}}}],
                      "initContainers": [{"name": "i", "resouces": {"requests": {"cpu": "1"}}}],
                      "resources": {"requests": {"cpu": "1"}, "limit": {"cpu": "2"}},
                      "tolerations": [{"key": "gpu", "efect": "NoSchedule"}]}, queueName="lq")
    assert [(e.path, e.reason) for e in validate_object(typo)] == [
        (p, f'unknown field "{p}"') for p in ("spec.podSets[0].template.spec.containers[0].resources.request",
                                               "spec.podSets[0].template.spec.initContainers[0].resouces",
                                               "spec.podSets[0].template.spec.resources.limit",
                                               "spec.podSets[0].template.spec.tolerations[0].efect")]


def test_a_full_pod_template_keeps_every_core_field() -> None:
    """Every field of a real pod template passes; what is below the closed nodes (a probe, an
    affinity, the template's metadata) is the core API's to judge."""
    ok = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "n"},
          "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {
              "metadata": {"labels": {"app": "x"}, "anything": "kept"},
              "spec": {"restartPolicy": "Never", "schedulerName": "default-scheduler",
                       "affinity": {"nodeAffinity": {"whatever": 1}}, "overhead": {"cpu": "10m"},
                       "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                       "resources": {"requests": {"cpu": "1"}},
                       "containers": [{"name": "c", "image": "busybox", "command": ["sleep"], "env": [{"name": "A"}],
                                       "livenessProbe": {"exec": {}}, "restartPolicy": "Always",
                                       "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"},
                                                     "claims": [{"name": "gpu"}]}}]}}}]}}
    assert validate_object(ok) == []


def test_the_pod_template_s_fields_are_kubernetes_own() -> None:
    """The closed pod template nodes list exactly Kubernetes' fields, as the client's models name them."""
    from kubernetes_asyncio.client import models

    from kueued.model.validation.known_fields import FIELDS
    template = "spec.podSets[].template"
    nodes = FIELDS["Workload"]
    for node, model in ((template, models.V1PodTemplateSpec), (f"{template}.spec", models.V1PodSpec),
                        (f"{template}.spec.containers[]", models.V1Container),
                        (f"{template}.spec.initContainers[]", models.V1Container),
                        (f"{template}.spec.containers[].resources", models.V1ResourceRequirements),
                        (f"{template}.spec.resources", models.V1ResourceRequirements),
                        (f"{template}.spec.tolerations[]", models.V1Toleration)):
        assert sorted(nodes[node]) == sorted(model.attribute_map.values()), node


def test_every_field_kueued_reads_is_one_kueue_declares() -> None:
    """The Structs kueued decodes name no field the table lacks (a field added to one and not the
    other would refuse every object that uses it)."""
    import msgspec

    from kueued.model import api
    from kueued.model.validation.known_fields import FIELDS
    for kind, model in (("ClusterQueue", api.ClusterQueueSpec), ("Cohort", api.CohortSpec),
                        ("LocalQueue", api.LocalQueueSpec), ("ResourceFlavor", api.ResourceFlavorSpec),
                        ("Workload", api.WorkloadSpec)):
        declared = {f.encode_name for f in msgspec.structs.fields(model)}
        assert declared <= set(FIELDS[kind]["spec"]), (kind, declared - set(FIELDS[kind]["spec"]))
