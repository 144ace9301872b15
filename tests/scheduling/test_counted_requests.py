"""What one pod's requests count as in quota under the Configuration's ``resources`` rules
(Kueue's ``dropExcludedResources`` and ``applyResourceTransformations``)."""

from __future__ import annotations

from kueued.model.api import ResourceTransformation
from kueued.scheduling.workload import counted_requests

GIB = 1024 ** 3 * 1000  # milli-units


def test_no_rules_count_the_requests_as_they_are() -> None:
    pod = {"cpu": 500, "memory": GIB}
    assert counted_requests(pod, (), ()) is pod


def test_excluded_prefixes_drop_resources_and_transformations_add_whole_units() -> None:
    mig = ResourceTransformation(input="nvidia.com/mig-1g.5gb", outputs={"example.com/accelerator-memory": "5Gi",
                                                                          "example.com/credits": "2"})
    pod = {"cpu": 1500, "ephemeral-storage": 10 * GIB, "nvidia.com/mig-1g.5gb": 2000}
    assert counted_requests(pod, ("ephemeral-",), (mig,)) == {
        "cpu": 1500, "nvidia.com/mig-1g.5gb": 2000,  # Retain (the default) keeps the input
        "example.com/accelerator-memory": 10 * GIB, "example.com/credits": 4000}


def test_replace_drops_the_input_and_a_fraction_of_a_unit_counts_as_one() -> None:
    half = ResourceTransformation(input="example.com/x", strategy="Replace", outputs={"example.com/y": "3"})
    assert counted_requests({"example.com/x": 500}, (), (half,)) == {"example.com/y": 3000}


def test_outputs_of_several_inputs_add_up_and_multiply_by_scales_the_input() -> None:
    a = ResourceTransformation(input="a.com/a", strategy="Replace", outputs={"z.com/z": "1"})
    b = ResourceTransformation(input="b.com/b", strategy="Replace", outputs={"z.com/z": "1"}, multiply_by="cpu")
    assert counted_requests({"a.com/a": 2000, "b.com/b": 3000, "cpu": 2000}, (), (a, b)) == {
        "z.com/z": 2000 + 6000, "cpu": 2000}
