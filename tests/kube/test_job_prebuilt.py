"""A Job that names its own Workload (``kueue.x-k8s.io/prebuilt-workload-name``): adopted, never
duplicated, finished when out of sync, and the Job held while it is missing (Kueue's
``ensureOneWorkload`` with a prebuilt Workload)."""

from __future__ import annotations

import copy
from typing import Any

import anyio

from kueued.kube import job_prebuilt
from kueued.kube import job_workload as jw
from tests.kube.test_jobs import NS, admit_in, controller, make_job, setup_api

PREBUILT = "my-workload"


def prebuilt_job(**kwargs: Any) -> dict[str, Any]:
    job = make_job(**kwargs)
    job["metadata"]["labels"][job_prebuilt.PREBUILT_LABEL] = PREBUILT
    return job


def users_workload(job: dict[str, Any], *, cpu: str | None = None, owner: dict[str, Any] | None = None) -> dict:
    """The Workload a user made for ``job``: Kueue's shape, the user's name, no owner (or ``owner``)."""
    wl = jw.build_workload(job, priority=jw.Priority(0))
    wl["metadata"] = {"name": PREBUILT, "namespace": NS, **({"ownerReferences": [owner]} if owner else {})}
    if cpu is not None:
        wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return wl


# ---- the rules --------------------------------------------------------------------------------------------

def test_an_unowned_prebuilt_workload_is_adopted_first() -> None:
    job = prebuilt_job()
    step = job_prebuilt.decide(job, users_workload(job))
    assert isinstance(step, job_prebuilt.Adopt) and step.workload == PREBUILT
    patch = job_prebuilt.adoption(job, users_workload(job))
    ref = patch["metadata"]["ownerReferences"][-1]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Job", "train", job["metadata"]["uid"], True)
    assert patch["metadata"]["labels"] == {jw.JOB_UID_LABEL: job["metadata"]["uid"]}


def test_a_missing_prebuilt_workload_is_never_created() -> None:
    assert isinstance(job_prebuilt.decide(prebuilt_job(), None), jw.Wait)
    step = job_prebuilt.decide(prebuilt_job(suspend=False), None)
    assert isinstance(step, jw.Suspend) and step.message == "missing workload"


def test_an_out_of_sync_prebuilt_workload_is_finished_and_then_counts_as_missing() -> None:
    job = prebuilt_job(suspend=False)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": job["metadata"]["uid"],
             "controller": True}
    wl = users_workload(job, cpu="2", owner=owner)
    step = job_prebuilt.decide(job, wl)
    assert isinstance(step, jw.Finish)
    assert (step.reason, step.message) == ("OutOfSync", "The prebuilt workload is out of sync with its user job")
    wl["status"] = {"conditions": [{"type": "Finished", "status": "True", "reason": "OutOfSync"}]}
    assert isinstance(job_prebuilt.decide(job, wl), jw.Suspend)


# ---- the controller against the in-memory API ---------------------------------------------------------------

async def test_a_prebuilt_workload_is_adopted_admitted_and_starts_its_job_and_no_other_is_made() -> None:
    job = prebuilt_job()
    api = setup_api(job, users_workload(job))
    async with controller(api):
        wl = await api.until(lambda: (w := api.obj("Workload", NS, PREBUILT)) and jw.owner_uid(w) and w)
        assert wl["metadata"]["labels"][jw.JOB_UID_LABEL] == job["metadata"]["uid"]
        admit_in(api, wl)
        await api.until(lambda: api.obj("Job", NS, "train")["spec"]["suspend"] is False)
    assert [w for w in api.writes if w[0] == "create"] == []


async def test_a_job_waits_for_its_prebuilt_workload_and_takes_it_once_it_is_made() -> None:
    job = prebuilt_job(suspend=False)
    api = setup_api(job)
    async with controller(api):
        await api.until(lambda: api.obj("Job", NS, "train")["spec"]["suspend"] is True)
        await anyio.sleep(0.1)
        assert not [w for w in api.writes if w[1] == "Workload"]  # nothing made in its place
        api.put(users_workload(job))
        await api.until(lambda: (w := api.obj("Workload", NS, PREBUILT)) and jw.owner_uid(w))


async def test_a_prebuilt_workload_another_object_controls_is_left_alone() -> None:
    job = prebuilt_job()
    other = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "another",
             "controller": True}
    api = setup_api(job, users_workload(job, owner=other))
    before = copy.deepcopy(api.obj("Workload", NS, PREBUILT))
    async with controller(api):
        await anyio.sleep(0.2)
    assert api.obj("Workload", NS, PREBUILT) == before
    assert not [w for w in api.writes if w[1] == "Workload"]
