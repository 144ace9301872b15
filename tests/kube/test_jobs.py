"""The Job integration: the pure rules (job_workload) and the controller against an in-memory API.

The controller runs against :class:`tests.kube.fake_api.FakeApi`, which refuses what
kube-apiserver refuses (a stale resourceVersion, a running Job's template change), so the
order of writes is checked as well as their result.  The same life against a real API
server, with kueued deciding, is tests/integration/test_jobs_api.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from kueued.kube import job_patches as jp
from kueued.kube import job_workload as jw
from kueued.kube.backoff import Backoff
from kueued.kube.errors import ApiConflict
from kueued.kube.job_cache import JobCache
from kueued.kube.jobs import JobController
from kueued.kube.workqueue import WorkQueue
from kueued.model.api import IN_USE_FINALIZER
from tests.kube.fake_api import FakeApi, merge_patch

NS = "team"


# ---- builders ---------------------------------------------------------------------------------------

def make_job(name: str = "train", *, queue: str | None = "lq", suspend: bool = True, parallelism: int | None = None,
             completions: int | None = None, cpu: str = "1", node_selector: dict[str, str] | None = None,
             tolerations: list[dict[str, str]] | None = None, priority_class: str = "",
             workload_priority_class: str = "", uid: str = "0c0ffee0-1111-2222-3333-444455556666") -> dict[str, Any]:
    """A Job as the API server stores it: defaulted, with the template labels the Job API adds."""
    labels = {jw.QUEUE_LABEL: queue} if queue is not None else {}
    if workload_priority_class:
        labels[jw.PRIORITY_CLASS_LABEL] = workload_priority_class
    pod: dict[str, Any] = {"restartPolicy": "Never",
                           "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    if tolerations:
        pod["tolerations"] = tolerations
    if priority_class:
        pod["priorityClassName"] = priority_class
    spec: dict[str, Any] = {"suspend": suspend, "template": {
        "metadata": {"labels": {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                                "controller-uid": uid, "job-name": name, "app": "trainer"}},
        "spec": pod}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "labels": labels}, "spec": spec}


def flavor(name: str, labels: dict[str, str] | None = None, tolerations: list[dict[str, str]] | None = None) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": labels or {}, "tolerations": tolerations or []}}


SPOT = flavor("spot", {"pool": "spot", "zone": "a"}, [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}])
TEAM_TOLERATION = {"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}


def cond(type_: str, status: str, at: str = "2026-01-01T00:00:00Z", reason: str = "R") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "", "lastTransitionTime": at}


def admitted(wl: dict[str, Any], flavor_name: str = "spot", at: str = "2026-01-01T00:00:10Z") -> dict[str, Any]:
    wl = copy.deepcopy(wl)
    conditions = [c for c in (wl.get("status") or {}).get("conditions", []) if c["type"] not in
                  ("QuotaReserved", "Admitted")]
    wl["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "count": 1, "flavors": {"cpu": flavor_name}, "resourceUsage": {"cpu": "1"}}]},
        "conditions": conditions + [cond("QuotaReserved", "True", at), cond("Admitted", "True", at)]}
    return wl


def evicted(wl: dict[str, Any], *, phase: int = 2, at: str = "2026-01-01T00:00:20Z") -> dict[str, Any]:
    wl = copy.deepcopy(wl)
    status = wl.setdefault("status", {})
    conditions = [c for c in status.get("conditions", []) if c["type"] not in ("Evicted", "Preempted")]
    conditions += [cond("Evicted", "True", at, "Preempted"), cond("Preempted", "True", at, "InClusterQueue")]
    if phase == 2:
        status.pop("admission", None)
        conditions = [c for c in conditions if c["type"] not in ("QuotaReserved", "Admitted")]
        conditions += [cond("QuotaReserved", "False", at, "Pending"), cond("Admitted", "False", at)]
    status["conditions"] = conditions
    return wl


def completed(job: dict[str, Any], *, failed: bool = False) -> dict[str, Any]:
    job = copy.deepcopy(job)
    kind = "Failed" if failed else "Complete"
    job["status"] = {"startTime": "2026-01-01T00:00:00Z", "conditions": [
        {"type": kind, "status": "True", "reason": "R", "message": f"the job {kind.lower()}"}]}
    return job


# ---- the Workload built from a Job ----------------------------------------------------------------------

def test_the_workload_is_built_from_the_job_as_kueue_builds_it() -> None:
    job = make_job(parallelism=3, node_selector={"team": "a"})
    wl = jw.build_workload(job, priority=jw.Priority(0))
    uid = job["metadata"]["uid"]
    digest = hashlib.sha1(f"Job\nbatch\ntrain\n{uid}".encode()).hexdigest()[:5]
    assert wl["metadata"] == {
        "name": f"job-train-{digest}", "namespace": NS, "labels": {"kueue.x-k8s.io/job-uid": uid},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": uid,
                             "controller": True, "blockOwnerDeletion": True}],
        "finalizers": ["kueue.x-k8s.io/resource-in-use"]}  # Kueue's, on every Workload it makes
    (pod_set,) = wl["spec"]["podSets"]
    assert pod_set["name"] == "main" and pod_set["count"] == 3 and "minCount" not in pod_set
    assert pod_set["template"]["metadata"]["labels"] == {"app": "trainer"}  # the Job API's own labels dropped
    assert pod_set["template"]["spec"] == job["spec"]["template"]["spec"]
    assert wl["spec"]["queueName"] == "lq" and wl["spec"]["priority"] == 0 and "priorityClassRef" not in wl["spec"]
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "train"  # the Job is not touched


@pytest.mark.parametrize(("label", "limit"), [("600", 600), ("+30", 30), ("0", None), ("-5", None), ("1h", None),
                                              (" 10", None), ("2147483648", None), (None, None)])
def test_the_max_exec_time_label_becomes_the_workload_s_limit(label: str | None, limit: int | None) -> None:
    job = make_job()
    if label is not None:
        job["metadata"].setdefault("labels", {})[jw.MAX_EXEC_LABEL] = label
    assert jw.build_workload(job, priority=jw.Priority(0))["spec"].get("maximumExecutionTimeSeconds") == limit


def test_a_long_job_name_is_cut_but_the_hash_still_tells_jobs_apart() -> None:
    a, b = jw.workload_name("x" * 300, "uid-1"), jw.workload_name("x" * 300, "uid-2")
    assert len(a) == 253 and a.startswith("job-xxx") and a != b


@pytest.mark.parametrize(("parallelism", "completions", "count"), [
    pytest.param(None, None, 1, id="default"),
    pytest.param(3, None, 3, id="parallelism"),
    pytest.param(3, 2, 2, id="fewer-completions"),
    pytest.param(2, 5, 2, id="more-completions"),
])
def test_the_pod_count_is_what_runs_at_once(parallelism: int | None, completions: int | None, count: int) -> None:
    assert jw.pod_count(make_job(parallelism=parallelism, completions=completions)) == count


# ---- starting and stopping: the template ------------------------------------------------------------------

def _apply(job: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    patch = copy.deepcopy(patch)
    patch.get("metadata", {}).pop("resourceVersion", None)
    return merge_patch(job, patch)


def test_start_merges_the_flavors_in_and_restore_gives_the_template_back() -> None:
    job = make_job(node_selector={"team": "a"}, tolerations=[TEAM_TOLERATION])
    started = _apply(job, jp.start_patch(job, [SPOT]))
    pod = started["spec"]["template"]["spec"]
    assert started["spec"]["suspend"] is False
    assert pod["nodeSelector"] == {"team": "a", "pool": "spot", "zone": "a"}
    assert pod["tolerations"] == [TEAM_TOLERATION, SPOT["spec"]["tolerations"][0]]
    assert json.loads(started["metadata"]["annotations"][jw.ORIGINAL_ANNOTATION]) == [
        {"name": "main", "nodeSelector": {"team": "a"}, "tolerations": [TEAM_TOLERATION]}]
    stopped = _apply(started, jp.suspend_patch(started))
    restored = _apply(stopped, jp.restore_patch(stopped, None))
    assert restored["spec"]["template"] == job["spec"]["template"]
    assert restored["spec"]["suspend"] is True and jw.ORIGINAL_ANNOTATION not in restored["metadata"]["annotations"]


_labels = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["1", "2"]), max_size=3)
_tolerations = st.lists(st.builds(lambda k, e: {"key": k, "operator": "Exists", "effect": e},
                                  st.sampled_from(["x", "y"]), st.sampled_from(["NoSchedule", "NoExecute"])),
                        max_size=3, unique_by=lambda t: (t["key"], t["effect"]))


@given(own=_labels, own_tolerations=_tolerations, flavor_labels=_labels, flavor_tolerations=_tolerations,
       restarts=st.integers(0, 2))
def test_start_then_stop_is_the_identity_on_the_template(own: dict, own_tolerations: list, flavor_labels: dict,
                                                           flavor_tolerations: list, restarts: int) -> None:
    job = make_job(node_selector=own, tolerations=own_tolerations)
    f = flavor("f", flavor_labels, flavor_tolerations)
    if any(own.get(k, v) != v for k, v in flavor_labels.items()):
        with pytest.raises(jp.FlavorConflict):
            jp.start_patch(job, [f])
        return
    started = _apply(job, jp.start_patch(job, [f]))
    for _ in range(restarts):  # suspended without a restore, then started again: the annotation is the truth
        started = _apply(_apply(started, jp.suspend_patch(started)), {"spec": {"suspend": True}})
        started = _apply(started, jp.start_patch(started, [f]))
    assert started["spec"]["template"]["spec"].get("nodeSelector", {}) == {**own, **flavor_labels}
    restored = _apply(_apply(started, jp.suspend_patch(started)), jp.restore_patch(started, None))
    assert restored["spec"]["template"] == job["spec"]["template"]


def test_without_the_annotation_the_template_comes_back_from_the_workload() -> None:
    job = make_job(node_selector={"team": "a"})
    wl = jw.build_workload(job, priority=jw.Priority(0))
    started = _apply(job, jp.start_patch(job, [SPOT]))
    started["metadata"]["annotations"].pop(jw.ORIGINAL_ANNOTATION)  # someone removed it
    restored = _apply(started, jp.restore_patch(started, wl))
    assert restored["spec"]["template"]["spec"]["nodeSelector"] == {"team": "a"}
    assert "tolerations" not in restored["spec"]["template"]["spec"]


def test_a_flavor_that_contradicts_the_template_is_a_conflict() -> None:
    with pytest.raises(jp.FlavorConflict, match="zone=a"):
        jp.start_patch(make_job(node_selector={"zone": "b"}), [SPOT])


# ---- decide: the step function -----------------------------------------------------------------------------

def _wl(job: dict[str, Any]) -> dict[str, Any]:
    return jw.build_workload(job, priority=jw.Priority(0))


def _running(job: dict[str, Any]) -> dict[str, Any]:
    return _apply(job, jp.start_patch(job, [SPOT]))


_JOB = make_job()
_OTHER_QUEUE = make_job(queue="other")


@pytest.mark.parametrize(("job", "workloads", "step"), [
    pytest.param(_JOB, [], jw.CreateWorkload, id="suspended-no-workload"),
    pytest.param(make_job(suspend=False), [], jw.Suspend, id="running-no-workload"),
    pytest.param(_apply(_JOB, {"status": {"active": 2}}), [], jw.Wait, id="pods-still-active"),
    pytest.param(_JOB, [_wl(_JOB)], jw.Done, id="pending"),
    pytest.param(_JOB, [admitted(_wl(_JOB))], jw.Start, id="admitted"),
    pytest.param(_apply(_JOB, {"status": {"startTime": "t"}}), [admitted(_wl(_JOB))], jw.ResetStartTime,
                 id="admitted-after-an-earlier-run"),
    pytest.param(_running(_JOB), [admitted(_wl(_JOB))], jw.Done, id="running-admitted"),
    pytest.param(_running(_JOB), [evicted(admitted(_wl(_JOB)), phase=1)], jw.Suspend, id="evicted-phase-1"),
    pytest.param(_running(_JOB), [evicted(admitted(_wl(_JOB)))], jw.Suspend, id="evicted"),
    pytest.param(_running(_JOB), [_wl(_JOB)], jw.Suspend, id="admission-lost"),
    pytest.param(_apply(_running(_JOB), {"spec": {"suspend": True}, "status": {"startTime": "t"}}),
                 [evicted(admitted(_wl(_JOB)))], jw.ResetStartTime, id="stopped-started"),
    pytest.param(_apply(_running(_JOB), {"spec": {"suspend": True}}), [evicted(admitted(_wl(_JOB)))], jw.Restore,
                 id="stopped"),
    pytest.param(_apply(_running(_JOB), {"spec": {"suspend": True}}), [], jw.Restore, id="stopped-no-workload"),
    pytest.param(completed(_running(_JOB)), [admitted(_wl(_JOB))], jw.Finish, id="job-finished"),
    pytest.param(completed(_JOB), [], jw.Done, id="finished-without-workload"),
    pytest.param(_running(_JOB), [_apply(admitted(_wl(_JOB)), {"status": {"conditions": [cond("Finished", "True")]}})],
                 jw.Release, id="workload-finished"),  # Kueue's finalizer comes off
    pytest.param(_running(_JOB), [_apply(admitted(_wl(_JOB)), {"metadata": {"finalizers": []},
                                                               "status": {"conditions": [cond("Finished", "True")]}})],
                 jw.Done, id="workload-finished-released"),
    pytest.param(completed(_running(_JOB)), [_apply(admitted(_wl(_JOB)), {
        "status": {"conditions": [cond("Finished", "True")]}})], jw.Release, id="job-and-workload-finished"),
    pytest.param(_OTHER_QUEUE, [_wl(_JOB)], jw.MoveQueue, id="queue-changed"),
    pytest.param(_OTHER_QUEUE, [admitted(_wl(_JOB))], jw.Start, id="queue-changed-after-admission"),
    pytest.param(make_job(parallelism=2), [_wl(_JOB)], jw.UpdatePodSets, id="resized-while-pending"),
    pytest.param(make_job(parallelism=2), [admitted(_wl(_JOB))], jw.DeleteWorkloads, id="resized-while-admitted"),
    pytest.param(_JOB, [_wl(_JOB), _apply(_wl(_JOB), {"metadata": {"name": "extra"}})], jw.DeleteWorkloads,
                 id="two-workloads"),
])
def test_decide(job: dict[str, Any], workloads: list[dict[str, Any]], step: type[jw.Step]) -> None:
    assert type(jw.decide(job, workloads)) is step


def test_a_stale_evicted_condition_does_not_hide_a_new_admission() -> None:
    """A writer that does not reset Evicted on re-admission (Kueue does) leaves it True beside the new one."""
    wl = evicted(admitted(_wl(_JOB)), at="2026-01-01T00:00:20Z")
    readmitted = admitted(wl, at="2026-01-01T00:00:30Z")
    assert jw.is_evicted(wl) and not jw.is_evicted(readmitted)
    assert type(jw.decide(_JOB, [readmitted])) is jw.Start


def test_decide_never_fails_on_a_malformed_job() -> None:
    bad = {"kind": "Job", "metadata": {"name": "x", "labels": {jw.QUEUE_LABEL: "lq"}}, "spec": "garbage",
           "status": ["not", "a", "map"]}
    assert isinstance(jw.decide(bad, []), jw.Step)


# ---- the controller, against an in-memory API ----------------------------------------------------------------

@asynccontextmanager
async def controller(api: FakeApi, **kwargs: Any) -> AsyncIterator[JobController]:
    c = JobController(api, backoff=Backoff(base=0.01, cap=0.05), **kwargs)
    async with anyio.create_task_group() as tg:
        await tg.start(c.run)
        yield c
        tg.cancel_scope.cancel()


def _idle(c: JobController) -> bool:
    return not len(c.queue) and not c.queue.active and not c.stats().retrying


def workload_of(api: FakeApi, name: str = "train") -> dict[str, Any] | None:
    job = api.obj("Job", NS, name)
    return job and api.obj("Workload", NS, jw.workload_name(name, job["metadata"]["uid"]))


def setup_api(*objects: dict[str, Any], into: FakeApi | None = None) -> FakeApi:
    api = into if into is not None else FakeApi()
    for obj in (SPOT, *objects):
        api.put(copy.deepcopy(obj))
    return api


def admit_in(api: FakeApi, wl: dict[str, Any], **kwargs: Any) -> None:
    api.put(admitted(wl, **kwargs))


async def test_a_job_s_whole_life() -> None:
    api = setup_api(make_job(node_selector={"team": "a"}, tolerations=[TEAM_TOLERATION]))
    async with controller(api):
        wl = await api.until(lambda: workload_of(api))
        assert wl["spec"]["queueName"] == "lq" and wl["spec"]["podSets"][0]["count"] == 1
        admit_in(api, wl)
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and not j["spec"]["suspend"] and j)
        pod = job["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"team": "a", "pool": "spot", "zone": "a"}
        assert pod["tolerations"] == [TEAM_TOLERATION, {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
        api.put(completed(job))
        done = await api.until(lambda: jw.condition_true(workload_of(api) or {}, "Finished") and workload_of(api))
        finished = next(c for c in done["status"]["conditions"] if c["type"] == "Finished")
        assert (finished["reason"], finished["message"]) == ("Succeeded", "the job complete")
        assert done["status"]["admission"]  # the quota is released by kueued reading Finished, not by us


async def test_a_failed_job_finishes_its_workload_as_failed() -> None:
    api = setup_api(make_job())
    async with controller(api):
        admit_in(api, await api.until(lambda: workload_of(api)))
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and not j["spec"]["suspend"] and j)
        api.put(completed(job, failed=True))
        done = await api.until(lambda: jw.condition_true(workload_of(api) or {}, "Finished") and workload_of(api))
        assert next(c for c in done["status"]["conditions"] if c["type"] == "Finished")["reason"] == "Failed"


@pytest.mark.parametrize(("job", "objects", "priority", "ref"), [
    pytest.param(make_job(workload_priority_class="high"),
                 [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                   "metadata": {"name": "high"}, "value": 1000}], 1000,
                 {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}, id="workload-class"),
    pytest.param(make_job(priority_class="urgent"),
                 [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"},
                   "value": 500}], 500, {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "urgent"},
                 id="pod-class"),
    pytest.param(make_job(),
                 [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "normal"},
                   "value": 7, "globalDefault": True}], 7,
                 {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "normal"}, id="global-default"),
    pytest.param(make_job(), [], 0, None, id="none"),
])
async def test_the_workload_takes_the_job_s_priority(job: dict, objects: list[dict], priority: int,
                                                      ref: dict | None) -> None:
    api = setup_api(*objects, job)
    async with controller(api):
        wl = await api.until(lambda: workload_of(api))
    assert wl["spec"]["priority"] == priority
    assert wl["spec"].get("priorityClassRef") == ref


async def test_a_missing_priority_class_holds_the_workload_back_until_it_exists() -> None:
    api = setup_api(make_job(workload_priority_class="later"))
    recorded: list[tuple[str, str]] = []

    class Sink:
        def record(self, obj_ref: Any, type: str, reason: str, message: str) -> bool:
            recorded.append((type, reason))
            return True

    with capture_logs() as logs:
        async with controller(api, events=Sink()) as c:
            await api.until(lambda: c.stats().retrying or None)
            assert workload_of(api) is None
            api.put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                     "metadata": {"name": "later"}, "value": 3})
            assert (await api.until(lambda: workload_of(api)))["spec"]["priority"] == 3
    assert any(e["event"] == "job_api_refused" and e["error"] == "ApiNotFound" for e in logs)
    assert ("Warning", "ErrWorkloadCompose") in recorded  # what kubectl describe job shows meanwhile


async def test_eviction_suspends_the_job_then_clears_its_start_time_then_restores_the_template() -> None:
    original = make_job(node_selector={"team": "a"})
    api = setup_api(original)
    async with controller(api):
        admit_in(api, await api.until(lambda: workload_of(api)))
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and not j["spec"]["suspend"] and j)
        api.put(_apply(job, {"status": {"startTime": "2026-01-01T00:00:11Z", "active": 1}}))  # the job controller
        api.writes.clear()
        api.put(evicted(workload_of(api) or {}))
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and
                              jw.ORIGINAL_ANNOTATION not in j["metadata"].get("annotations", {}) and j)
    assert job["spec"]["suspend"] is True and "startTime" not in job["status"]
    assert job["spec"]["template"] == original["spec"]["template"]
    assert [w for w in api.writes if w[1] == "Job"] == [("patch", "Job", "team/train"),
                                                         ("patch_status", "Job", "team/train"),
                                                         ("patch", "Job", "team/train")]


async def test_a_job_created_running_is_suspended_and_gets_its_workload() -> None:
    api = setup_api(make_job(suspend=False))
    async with controller(api):
        await api.until(lambda: workload_of(api))
    assert api.obj("Job", NS, "train")["spec"]["suspend"] is True
    name = (workload_of(api) or {})["metadata"]["name"]
    assert api.writes[:2] == [("patch", "Job", "team/train"), ("create", "Workload", f"team/{name}")]


async def test_a_queue_label_change_moves_a_pending_workload_but_not_an_admitted_one() -> None:
    api = setup_api(make_job())
    async with controller(api):
        await api.until(lambda: workload_of(api))
        api.put(_apply(api.obj("Job", NS, "train"), {"metadata": {"labels": {jw.QUEUE_LABEL: "other"}}}))
        wl = await api.until(lambda: (w := workload_of(api)) and w["spec"]["queueName"] == "other" and w)
        admit_in(api, wl)
        await api.until(lambda: not api.obj("Job", NS, "train")["spec"]["suspend"])
        api.put(_apply(api.obj("Job", NS, "train"), {"metadata": {"labels": {jw.QUEUE_LABEL: "third"}}}))
        await api.until(lambda: api.obj("Job", NS, "train")["metadata"]["labels"][jw.QUEUE_LABEL] == "third")
        api.writes.clear()
        async with controller(api) as second:  # a second pass over the same state: nothing to write
            await api.until(lambda: _idle(second))
        assert workload_of(api)["spec"]["queueName"] == "other" and api.writes == []


async def test_deleting_a_job_deletes_its_workload_and_a_restart_collects_orphans() -> None:
    api = setup_api(make_job(), make_job("other", uid="uid-other"))
    async with controller(api):
        await api.until(lambda: workload_of(api) and workload_of(api, "other"))
        api.remove("Job", NS, "train")
        await api.until(lambda: len(api.all("Workload")) == 1)
    orphan = workload_of(api, "other")
    api.remove("Job", NS, "other")  # while no controller runs
    async with controller(api):
        await api.until(lambda: not api.all("Workload"))
    assert ("delete", "Workload", f"team/{orphan['metadata']['name']}") in api.writes


async def test_a_workload_kueue_made_loses_kueue_s_finalizer_before_it_is_deleted() -> None:
    """A Workload created under Kueue carries its resource-in-use finalizer: deleting it alone would
    leave it terminating for ever, so the finalizer comes off first (others' stay)."""
    api = setup_api(make_job())
    async with controller(api):
        wl = await api.until(lambda: workload_of(api))
    api.put(_apply(wl, {"metadata": {"finalizers": [IN_USE_FINALIZER, "example.com/keep"]}}))
    api.remove("Job", NS, "train")  # while no controller runs
    api.writes.clear()
    async with controller(api):
        await api.until(lambda: not api.all("Workload"))
    name = f"{NS}/{wl['metadata']['name']}"
    assert api.writes == [("patch", "Workload", name), ("delete", "Workload", name)]
    *_, (_, patched), (_, deleted) = api.history["Workload"]
    assert (patched["type"], deleted["type"]) == ("MODIFIED", "DELETED")
    assert patched["object"]["metadata"]["finalizers"] == ["example.com/keep"]


async def test_a_deleted_workload_held_by_kueue_s_finalizer_stops_its_job_then_lets_go() -> None:
    """Kueue's reconciler: a Workload being deleted stops its Job (suspended, template restored),
    then loses the finalizer, so the API server can complete the deletion and the quota is free."""
    api = setup_api(make_job(node_selector={"team": "a"}))
    async with controller(api):
        admit_in(api, await api.until(lambda: workload_of(api)))
        await api.until(lambda: not api.obj("Job", NS, "train")["spec"]["suspend"])
        wl = workload_of(api)
        api.put(_apply(wl, {"metadata": {"finalizers": [IN_USE_FINALIZER, "example.com/keep"],
                                         "deletionTimestamp": "2026-11-26T12:00:00Z"}}))
        await api.until(lambda: workload_of(api)["metadata"]["finalizers"] == ["example.com/keep"])
    job = api.obj("Job", NS, "train")
    assert job["spec"]["suspend"] is True
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"team": "a"}  # the flavors' labels taken out
    name = f"{NS}/{wl['metadata']['name']}"
    assert [w for w in api.writes if w[1] == "Workload"][-1] == ("patch", "Workload", name)


class DeletesOnRelease(FakeApi):
    """The API server's rule: a patch that empties the finalizers of an object being deleted deletes
    it, and here the deletion's event comes before the patch's reply (the race on a real server)."""

    async def patch(self, kind: Any, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = await super().patch(kind, namespace, name, body)
        meta = reply["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.remove(reply["kind"], namespace or "", name)
            await anyio.lowlevel.checkpoint()  # the watch takes the deletion in first
            await anyio.lowlevel.checkpoint()
        return reply


async def test_a_released_workload_the_server_deleted_is_replaced_whatever_comes_first() -> None:
    """The reply of the release that completes a deletion is never taken for a live Workload."""
    api = setup_api(make_job(), into=DeletesOnRelease())
    async with controller(api):
        admit_in(api, await api.until(lambda: workload_of(api)))
        await api.until(lambda: not api.obj("Job", NS, "train")["spec"]["suspend"])
        old = workload_of(api)
        api.put(_apply(old, {"metadata": {"finalizers": [IN_USE_FINALIZER],
                                          "deletionTimestamp": "2026-11-26T12:00:00Z"}}))
        new = await api.until(lambda: (w := workload_of(api)) and w["metadata"]["uid"] != old["metadata"]["uid"]
                              and w)
    assert new["metadata"]["name"] == old["metadata"]["name"]
    assert api.obj("Job", NS, "train")["spec"]["suspend"] is True  # waits for its new Workload's admission


async def test_a_job_recreated_under_the_same_name_gets_a_new_workload() -> None:
    api = setup_api(make_job())
    async with controller(api):
        old = await api.until(lambda: workload_of(api))
        api.remove("Job", NS, "train")
        api.put(make_job(uid="uid-new"))
        new = await api.until(lambda: (w := workload_of(api)) and w["metadata"]["name"] != old["metadata"]["name"]
                              and w)
        await api.until(lambda: api.obj("Workload", NS, old["metadata"]["name"]) is None)
    assert new["metadata"]["labels"][jw.JOB_UID_LABEL] == "uid-new"


async def test_every_step_is_idempotent_and_a_restart_writes_nothing() -> None:
    api = setup_api(make_job(node_selector={"team": "a"}))
    async with controller(api) as c:
        admit_in(api, await api.until(lambda: workload_of(api)))
        await api.until(lambda: not api.obj("Job", NS, "train")["spec"]["suspend"])
        await api.until(lambda: _idle(c))
        api.writes.clear()
        await c.reconcile(f"{NS}/train")
        await c.reconcile(f"{NS}/train")
    async with controller(api) as again:
        await api.until(lambda: _idle(again))
    assert api.writes == []


async def test_a_conflict_is_retried_and_converges() -> None:
    api = setup_api(make_job())
    api.fail_next = [ApiConflict(409, "Conflict", "the object has been modified")]
    with capture_logs() as logs:
        async with controller(api):
            await api.until(lambda: workload_of(api))
    assert api.writes[0] == api.writes[1] and api.writes[0][0] == "create"
    assert any(e["event"] == "job_write_conflict" for e in logs)


async def test_a_malformed_job_is_logged_and_the_others_go_on() -> None:
    bad = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad", "namespace": NS, "uid": "u",
                                                                  "labels": {jw.QUEUE_LABEL: "lq"}},
           "spec": {"suspend": True, "template": "garbage", "parallelism": "many"}}
    api = setup_api(bad, make_job())
    with capture_logs():
        async with controller(api):
            await api.until(lambda: workload_of(api))


async def test_unlabelled_jobs_and_filtered_namespaces_are_left_alone() -> None:
    elsewhere = make_job("away")
    elsewhere["metadata"]["namespace"] = "elsewhere"
    api = setup_api(make_job("plain", queue=None, suspend=False), elsewhere, make_job())
    async with controller(api, workload_namespace_filter=lambda ns: ns == NS) as c:
        await api.until(lambda: workload_of(api))
        await api.until(lambda: _idle(c))
    assert len(api.all("Workload")) == 1 and api.obj("Job", NS, "plain")["spec"]["suspend"] is False
    assert api.obj("Job", "elsewhere", "away")["spec"]["suspend"] is True


async def test_events_are_recorded_on_the_job() -> None:
    recorded: list[tuple[str, str, str]] = []

    class Sink:
        def record(self, obj_ref: Any, type: str, reason: str, message: str) -> bool:
            recorded.append((obj_ref["metadata"]["name"], type, reason))
            return True

    api = setup_api(make_job())
    async with controller(api, events=Sink()):
        admit_in(api, await api.until(lambda: workload_of(api)))
        await api.until(lambda: not api.obj("Job", NS, "train")["spec"]["suspend"])
    assert recorded == [("train", "Normal", "CreatedWorkload"), ("train", "Normal", "Started")]


# ---- the work queue -------------------------------------------------------------------------------------------

async def test_the_work_queue_holds_a_key_once_and_requeues_one_changed_while_handled() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert await q.get() == "a"
    q.add("a")  # changed while handled: again afterwards, not twice at once
    assert await q.get() == "b"
    assert len(q) == 0
    q.done("a")
    assert await q.get() == "a"
    q.done("a")
    q.done("b")
    assert len(q) == 0 and q.active == 0
    with anyio.fail_after(1):
        await q.join()  # nothing left: returns at once


async def test_join_waits_for_the_keys_being_handled() -> None:
    q = WorkQueue()
    q.add("a")
    key = await q.get()
    joined = False

    async def join() -> None:
        nonlocal joined
        await q.join()
        joined = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(join)
        await anyio.lowlevel.checkpoint()
        assert not joined
        q.done(key)
    assert joined


def test_the_cache_never_takes_back_a_version_of_an_object_deleted_since() -> None:
    """A write's reply that comes after the object's deletion event is not a live object; one
    created anew under the same name (a new uid) is."""
    cache = JobCache()
    job = make_job()
    job["metadata"]["resourceVersion"] = "5"
    assert cache.observe("apply", job) == f"{NS}/train"
    gone = _apply(job, {"metadata": {"resourceVersion": "9"}})
    cache.observe("delete", gone)
    late_reply = _apply(job, {"metadata": {"resourceVersion": "8"}})
    assert cache.observe("apply", late_reply) is None and f"{NS}/train" not in cache.jobs
    again = make_job(uid="uid-again")
    assert cache.observe("apply", again) == f"{NS}/train" and cache.jobs[f"{NS}/train"] is again


def _partial_job() -> dict[str, Any]:
    job = make_job(parallelism=6, completions=6)
    job["spec"]["completionMode"] = "Indexed"  # completions may change with parallelism only then
    job["metadata"]["annotations"] = {jw.MIN_PARALLELISM_ANNOTATION: "2", jw.SYNC_COMPLETIONS_ANNOTATION: "true"}
    return job


async def test_a_job_admitted_with_fewer_pods_runs_that_many_and_asks_for_all_again_when_stopped() -> None:
    """Kueue's partial admission for batch/v1 Job: the min-parallelism annotation is the pod set's
    minCount; admitted with fewer pods, the Job runs with that parallelism (completions too, when
    asked) and matches its Workload; stopped, it gets its own values back."""
    original = _partial_job()
    api = setup_api(original)
    async with controller(api):
        wl = await api.until(lambda: workload_of(api))
        assert (wl["spec"]["podSets"][0]["count"], wl["spec"]["podSets"][0]["minCount"]) == (6, 2)
        reduced = admitted(wl)
        reduced["status"]["admission"]["podSetAssignments"][0].update(count=4, resourceUsage={"cpu": "4"})
        api.put(reduced)
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and not j["spec"]["suspend"] and j)
        assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (4, 4)
        running = await api.until(lambda: workload_of(api))
        assert jw.decide(job, [running]) == jw.Done(why="running and admitted")  # equivalent while admitted
        api.put(evicted(running))
        job = await api.until(lambda: (j := api.obj("Job", NS, "train")) and
                              jw.ORIGINAL_ANNOTATION not in j["metadata"].get("annotations", {}) and j)
    assert job["spec"]["suspend"] is True
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (6, 6)
    assert job["spec"]["template"] == original["spec"]["template"]


def test_a_running_job_asking_for_more_pods_than_admitted_is_stopped() -> None:
    job = _partial_job()
    wl = jw.build_workload(job, priority=jw.Priority(0))
    held = admitted(wl)
    held["status"]["admission"]["podSetAssignments"][0]["count"] = 4
    job["spec"]["suspend"] = False  # running with its full parallelism of 6: more than the 4 admitted
    assert isinstance(jw.decide(job, [held]), jw.Suspend)
    job["spec"]["suspend"] = True  # suspended, it matches the Workload's own count and may start
    assert isinstance(jw.decide(job, [held]), jw.Start)


def test_a_non_indexed_job_keeps_its_completions_when_started_with_fewer_pods() -> None:
    job = _partial_job()
    del job["spec"]["completionMode"]  # the API server refuses a change of a NonIndexed Job's completions
    body = jp.start_patch(job, [SPOT], 4)
    assert body["spec"]["parallelism"] == 4 and "completions" not in body["spec"]
    started = _apply(job, body)
    restored = _apply(_apply(started, jp.suspend_patch(started)), jp.restore_patch(started, None))
    assert (restored["spec"]["parallelism"], restored["spec"]["completions"]) == (6, 6)


@pytest.mark.parametrize(("workloads", "message"), [
    pytest.param([], "Missing Workload; unable to restore pod templates", id="no-workload"),
    pytest.param("evicted", "The workload is deactivated due to exceeding the maximum execution time", id="evicted"),
    pytest.param("not-admitted", "Not admitted by cluster queue", id="not-admitted"),
])
def test_a_running_job_is_stopped_with_kueue_s_event_message(workloads: Any, message: str) -> None:
    job = _running(_JOB)
    if workloads == "evicted":
        wl = evicted(admitted(_wl(_JOB)))
        for c in wl["status"]["conditions"]:
            if c["type"] == "Evicted":
                c["message"] = message
        workloads = [wl]
    elif workloads == "not-admitted":
        workloads = [_wl(_JOB)]
    step = jw.decide(job, workloads)
    assert isinstance(step, jw.Suspend) and step.message == message
