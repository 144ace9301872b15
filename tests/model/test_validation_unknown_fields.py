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
