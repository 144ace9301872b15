"""A Job Kueue's webhook would refuse gets no Workload, is kept suspended and says why."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest

from kueued.kube import job_validation as jv
from kueued.kube import job_workload as jw
from tests.kube.test_jobs import NS, controller, make_job, setup_api, workload_of


def annotated(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
              **kwargs: Any) -> dict[str, Any]:
    job = make_job(**kwargs)
    job["metadata"].setdefault("annotations", {}).update(annotations or {})
    job["metadata"]["labels"].update(labels or {})
    return job


MIN = f"metadata.annotations[{jw.MIN_PARALLELISM_ANNOTATION}]"
EXEC = f"metadata.labels[{jw.MAX_EXEC_LABEL}]"


@pytest.mark.parametrize("job, errors", [
    (annotated({jw.MIN_PARALLELISM_ANNOTATION: "2"}, parallelism=4), []),
    (annotated({jw.MIN_PARALLELISM_ANNOTATION: "abc"}, parallelism=4),
     [f'{MIN}: Invalid value: "abc": strconv.Atoi: parsing "abc": invalid syntax']),
    (annotated({jw.MIN_PARALLELISM_ANNOTATION: "4"}, parallelism=4),
     [f"{MIN}: Invalid value: 4: should be between 0 and 3"]),
    (annotated({jw.MIN_PARALLELISM_ANNOTATION: "0"}, parallelism=4),
     [f"{MIN}: Invalid value: 0: should be between 0 and 3"]),
    (annotated({jw.MIN_PARALLELISM_ANNOTATION: "99999999999999999999"}, parallelism=4),
     [f'{MIN}: Invalid value: "99999999999999999999": strconv.Atoi: parsing "99999999999999999999": '
      'value out of range']),
    (annotated(labels={jw.MAX_EXEC_LABEL: "600"}), []),
    (annotated(labels={jw.MAX_EXEC_LABEL: "abc"}),
     [f'{EXEC}: Invalid value: "abc": strconv.Atoi: parsing "abc": invalid syntax']),
    (annotated(labels={jw.MAX_EXEC_LABEL: "-5"}), [f"{EXEC}: Invalid value: -5: should be greater than 0"]),
    (make_job(queue="Not_A_Name"), None),
])
def test_kueue_s_create_rules(job: dict[str, Any], errors: list[str] | None) -> None:
    found = jv.job_errors(job)
    if errors is None:
        assert found and found[0].startswith(f'metadata.labels[{jw.QUEUE_LABEL}]: Invalid value: "Not_A_Name": ')
    else:
        assert found == errors


class Sink:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, obj_ref: Any, type: str, reason: str, message: str) -> bool:
        self.recorded.append((type, reason, message))
        return True


async def test_a_refused_job_gets_no_workload_is_stopped_and_says_why_until_it_is_fixed() -> None:
    bad = annotated({jw.MIN_PARALLELISM_ANNOTATION: "abc"}, parallelism=4, suspend=False)
    api = setup_api(bad)
    sink = Sink()
    async with controller(api, events=sink):
        await api.until(lambda: api.obj("Job", NS, "train")["spec"]["suspend"] is True)
        await api.until(lambda: sink.recorded or None)
        await anyio.sleep(0.1)
        assert workload_of(api) is None
        assert sink.recorded[0][:2] == ("Warning", "ValidationFailed") and "invalid syntax" in sink.recorded[0][2]
        fixed = copy.deepcopy(api.obj("Job", NS, "train"))
        fixed["metadata"]["annotations"][jw.MIN_PARALLELISM_ANNOTATION] = "2"
        api.put(fixed)
        wl = await api.until(lambda: workload_of(api))
    assert wl["spec"]["podSets"][0]["minCount"] == 2
