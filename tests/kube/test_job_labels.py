"""A Job's labels that its Workload follows after creation: the WorkloadPriorityClass
(Kueue's UpdateWorkloadPriority) and the maximum execution time (EquivalentToWorkload)."""

from __future__ import annotations

import copy
from typing import Any

from kueued.kube import job_priority
from kueued.kube import job_workload as jw
from tests.kube.test_jobs import NS, admit_in, controller, make_job, setup_api, workload_of


def wpc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}


def relabel(api: Any, **labels: str) -> None:
    job = copy.deepcopy(api.obj("Job", NS, "train"))
    job["metadata"]["labels"].update(labels)
    api.put(job)


def test_the_step_comes_only_when_the_label_names_another_workload_priority_class() -> None:
    job = make_job(workload_priority_class="high")
    wl = jw.build_workload(job, priority=jw.Priority(10, {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                           "name": "low"}))
    wl["metadata"]["name"] = "w"
    assert isinstance(job_priority.refine(job, [wl], jw.Done()), job_priority.UpdatePriority)
    wl["spec"]["priorityClassRef"]["name"] = "high"
    assert isinstance(job_priority.refine(job, [wl], jw.Done()), jw.Done)
    wl["spec"]["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "urgent"}
    assert isinstance(job_priority.refine(job, [wl], jw.Done()), jw.Done)  # a pod class: not the label's business
    bare = jw.build_workload(make_job(), priority=jw.Priority(0))
    assert isinstance(job_priority.refine(make_job(), [bare], jw.Done()), jw.Done)  # no label, no class


async def test_a_new_priority_class_label_moves_the_workload_pending_or_admitted() -> None:
    api = setup_api(wpc("low", 10), wpc("high", 500), make_job(workload_priority_class="low"))
    async with controller(api):
        wl = await api.until(lambda: workload_of(api))
        assert wl["spec"]["priority"] == 10
        relabel(api, **{jw.PRIORITY_CLASS_LABEL: "high"})
        wl = await api.until(lambda: (w := workload_of(api)) and w["spec"]["priority"] == 500 and w)
        assert wl["spec"]["priorityClassRef"]["name"] == "high"
        admit_in(api, wl)
        await api.until(lambda: api.obj("Job", NS, "train")["spec"]["suspend"] is False)
        relabel(api, **{jw.PRIORITY_CLASS_LABEL: "low"})
        wl = await api.until(lambda: (w := workload_of(api)) and w["spec"]["priority"] == 10 and w)
    assert wl["status"]["admission"]  # the same Workload, still admitted


async def test_a_time_limit_added_to_a_pending_job_reaches_its_workload() -> None:
    api = setup_api(make_job())
    async with controller(api):
        await api.until(lambda: workload_of(api))
        relabel(api, **{jw.MAX_EXEC_LABEL: "600"})
        wl = await api.until(lambda: (w := workload_of(api)) and w["spec"].get("maximumExecutionTimeSeconds") and w)
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 600
