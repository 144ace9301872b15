"""Kueue's pod labels on a started Job's template (PodSetLabel, AssignQueueLabelsForPods), and
the template given back whole on stop."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kueued.kube import job_patches as jp
from kueued.kube import job_workload as jw
from tests.kube.test_jobs import NS, SPOT, _apply, admit_in, controller, evicted, make_job, setup_api, workload_of


def test_queue_labels_are_added_only_when_the_name_is_a_valid_label_value() -> None:
    assert jp.pod_labels("lq", "cq") == {jp.PODSET_LABEL: "main", jp.LOCAL_QUEUE_LABEL: "lq",
                                         jp.CLUSTER_QUEUE_LABEL: "cq"}
    assert jp.CLUSTER_QUEUE_LABEL not in jp.pod_labels("lq", "a" * 64)
    assert jp.CLUSTER_QUEUE_LABEL not in jp.pod_labels("lq", "team.gpu-")


@given(own=st.dictionaries(st.sampled_from([jp.PODSET_LABEL, jp.LOCAL_QUEUE_LABEL, "app", "x"]),
                           st.sampled_from(["1", "2"]), max_size=3),
       restarts=st.integers(0, 2), from_workload=st.booleans())
def test_start_then_stop_gives_the_template_its_own_labels_back(own: dict, restarts: int,
                                                                from_workload: bool) -> None:
    job = make_job()
    job["spec"]["template"]["metadata"]["labels"] = dict(own)
    workload = jw.build_workload(job, priority=jw.Priority(0))
    labels = jp.pod_labels("lq", "cq")
    started = _apply(job, jp.start_patch(job, [SPOT], None, labels))
    for _ in range(restarts):  # suspended without a restore, then started again: the annotation is the truth
        started = _apply(_apply(started, jp.suspend_patch(started)), {"spec": {"suspend": True}})
        started = _apply(started, jp.start_patch(started, [SPOT], None, labels))
    assert started["spec"]["template"]["metadata"]["labels"] == {**own, **labels}
    if from_workload:  # someone removed the annotation: the Workload's copy of the template tells
        started["metadata"]["annotations"].pop(jw.ORIGINAL_ANNOTATION)
    restored = _apply(_apply(started, jp.suspend_patch(started)), jp.restore_patch(started, workload))
    assert restored["spec"]["template"]["metadata"].get("labels", {}) == own


async def test_an_admitted_job_s_pods_carry_kueue_s_labels_until_it_is_stopped() -> None:
    api = setup_api(make_job())
    async with controller(api):
        wl = await api.until(lambda: workload_of(api))
        admit_in(api, wl)
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and not j["spec"]["suspend"] and j)
        assert {k: v for k, v in job["spec"]["template"]["metadata"]["labels"].items() if k.startswith("kueue")} == {
            jp.PODSET_LABEL: "main", jp.LOCAL_QUEUE_LABEL: "lq", jp.CLUSTER_QUEUE_LABEL: "cq"}
        api.put(evicted(workload_of(api) or {}))
        stopped = await api.until(lambda: (j := api.obj("Job", NS, "train")) and j["spec"]["suspend"]
                                  and jw.ORIGINAL_ANNOTATION not in (j["metadata"].get("annotations") or {}) and j)
    assert not [k for k in stopped["spec"]["template"]["metadata"]["labels"] if k.startswith("kueue")]


def test_the_completions_annotation_reads_as_go_s_parse_bool_does() -> None:
    job = make_job(parallelism=6, completions=6)
    job["spec"]["completionMode"] = "Indexed"
    for value, wanted in (("true", True), ("True", True), ("1", True), ("t", True), ("false", False),
                          ("yes", False), ("", False)):
        job["metadata"]["annotations"] = {jw.SYNC_COMPLETIONS_ANNOTATION: value}
        assert jw.sync_completions(job) is wanted, value


def test_a_hand_edited_annotation_never_makes_a_patch_the_api_server_refuses() -> None:
    job = make_job()
    job["metadata"]["annotations"] = {jw.ORIGINAL_ANNOTATION:
                                      '[{"name":"main","nodeSelector":{"a":5,"b":"x"},"tolerations":"x",'
                                      '"parallelism":"abc","labels":[1]}]'}
    original = jp.original_info(job)
    assert original == {"nodeSelector": {"b": "x"}, "tolerations": []}
    body = jp.restore_patch(job, None)["spec"]
    assert "parallelism" not in body and "metadata" not in body["template"]
