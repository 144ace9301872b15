"""What Kueue's Job webhook refuses at creation, which kueued, without a webhook, finds afterwards.

Kueue validates a Job as it is created (``pkg/controller/jobs/job/job_webhook.go``
``validateCreate`` and jobframework's ``ValidateJobOnCreate``), so a Job it would not manage
never exists.  kueued sees the Job once the API server stored it; a Job these rules refuse gets
no Workload, is kept suspended (suspended at once if it was created running), and gets a Warning
Event ``ValidationFailed`` with the errors as Kueue words them.  Before, kueued dropped what it
could not read: a Job with ``kueue.x-k8s.io/job-min-parallelism: abc`` ran with every pod and no
partial admission, one with ``kueue.x-k8s.io/max-exec-time-seconds: abc`` ran with no limit.

The rules (Go's ``strconv.Atoi`` reads the numbers):

- the ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/prebuilt-workload-name`` labels must
  be DNS subdomains (``ValidateLabelAsCRDName``);
- ``kueue.x-k8s.io/job-min-parallelism`` a whole number between 1 and the pod count less one
  ("should be between 0 and N-1", Kueue's words for it);
- ``kueue.x-k8s.io/max-exec-time-seconds`` a whole number above 0.
"""

from __future__ import annotations

import re
from typing import Any

from kueued.kube import job_workload as jw
from kueued.kube.job_prebuilt import PREBUILT_LABEL
from kueued.kube.workload_state import _dict, _meta
from kueued.model.validation.names import dns_subdomain_errors

__all__ = ["job_errors", "Refuse", "refine"]

_ATOI = re.compile(r"^[+-]?[0-9]+$")
_INT64 = 2**63


def _atoi(text: str) -> tuple[int | None, str]:
    """Go's ``strconv.Atoi`` on a 64-bit platform: (value, "") or (None, its error)."""
    if not _ATOI.match(text):
        return None, f'strconv.Atoi: parsing "{text}": invalid syntax'
    value = int(text)
    if not -_INT64 <= value < _INT64:
        return None, f'strconv.Atoi: parsing "{text}": value out of range'
    return value, ""


def job_errors(job: dict[str, Any]) -> list[str]:
    """Kueue's webhook errors for a new Job, as ``field: Invalid value: ...: why`` lines."""
    errors: list[str] = []
    labels = _dict(_meta(job).get("labels"))
    annotations = _dict(_meta(job).get("annotations"))
    for label in (jw.QUEUE_LABEL, PREBUILT_LABEL):
        value = labels.get(label)
        if isinstance(value, str):
            errors += [f'metadata.labels[{label}]: Invalid value: "{value}": {why}'
                       for why in dns_subdomain_errors(value)]
    raw = annotations.get(jw.MIN_PARALLELISM_ANNOTATION)
    if isinstance(raw, str):
        path = f"metadata.annotations[{jw.MIN_PARALLELISM_ANNOTATION}]"
        value, why = _atoi(raw)
        count = jw.pod_count(job)
        if value is None:
            errors.append(f'{path}: Invalid value: "{raw}": {why}')
        elif value >= count or value <= 0:
            errors.append(f"{path}: Invalid value: {value}: should be between 0 and {count - 1}")
    raw = labels.get(jw.MAX_EXEC_LABEL)
    if isinstance(raw, str):
        path = f"metadata.labels[{jw.MAX_EXEC_LABEL}]"
        value, why = _atoi(raw)
        if value is None:
            errors.append(f'{path}: Invalid value: "{raw}": {why}')
        elif value <= 0:
            errors.append(f"{path}: Invalid value: {value}: should be greater than 0")
    return errors


class Refuse(jw.Step, frozen=True, tag=True):
    """A Job Kueue's webhook would have refused: no Workload; stop it if it runs; say why."""

    errors: tuple[str, ...] = ()
    running: bool = False

    @property
    def message(self) -> str:
        return "; ".join(self.errors)


def refine(job: dict[str, Any], workloads: list[dict[str, Any]], step: jw.Step) -> jw.Step:
    """``step``, or :class:`Refuse` for a Job that has no Workload yet and breaks the rules."""
    if workloads or isinstance(step, jw.Done | jw.Finish | jw.Release):
        return step
    errors = job_errors(job)
    return Refuse(errors=tuple(errors), running=not jw.suspended(job), why="refused") if errors else step
