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
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "n"},
                "spec": {"queuename": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                    "containers": [], "anything": "the pod template is the core API's"}}}]}}
    assert [e.path for e in validate_object(workload)] == ["spec.queuename"]


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
