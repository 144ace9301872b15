"""Reclaimable pods of a Job (Kueue's ``Job.ReclaimablePods``) reach its Workload's status."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueued.kube import job_reclaimable as jr
from kueued.kube import job_workload as jw
from tests.kube.test_jobs import NS, admit_in, controller, make_job, setup_api, workload_of


def with_status(job: dict[str, Any], **status: Any) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["status"] = status
    return job


@pytest.mark.parametrize("parallelism, completions, succeeded, pods", [
    (1, 5, 3, ()),                  # one pod at a time: nothing to reclaim
    (2, None, 0, ()),               # nothing succeeded yet
    (2, None, 1, (("main", 1),)),   # 2 pods, 1 done: 1 left to run
    (4, 10, 5, ()),                 # 5 left, more than run at once
    (4, 10, 8, (("main", 2),)),     # 2 left of 4 at once
    (3, 3, 3, (("main", 3),)),      # all done
])
def test_reclaimable_pods_as_kueue_counts_them(parallelism: int, completions: int | None, succeeded: int,
                                               pods: tuple) -> None:
    job = with_status(make_job(parallelism=parallelism, completions=completions), succeeded=succeeded)
    assert jr.reclaimable_pods(job) == pods


def test_the_write_comes_before_doing_nothing_and_only_when_it_differs() -> None:
    job = with_status(make_job(parallelism=2, suspend=False), succeeded=1)
    wl = {"metadata": {"name": "w"}, "status": {}}
    step = jr.refine(job, [wl], jw.Done(why="running and admitted"))
    assert isinstance(step, jr.UpdateReclaimable) and step.body() == [{"name": "main", "count": 1}]
    wl["status"]["reclaimablePods"] = [{"name": "main", "count": 1}]
    assert isinstance(jr.refine(job, [wl], jw.Done()), jw.Done)
    suspend = jw.Suspend(why="workload evicted")
    assert jr.refine(job, [{"metadata": {"name": "w"}}], suspend) is suspend  # stopping comes first


async def test_a_job_with_a_pod_done_gives_its_quota_back_through_the_workload_status() -> None:
    api = setup_api(make_job(parallelism=2))
    async with controller(api):
        admit_in(api, await api.until(lambda: workload_of(api)))
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and not j["spec"]["suspend"] and j)
        api.put(with_status(job, succeeded=1, active=1))
        wl = await api.until(lambda: (w := workload_of(api)) and (w.get("status") or {}).get("reclaimablePods") and w)
    assert wl["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
