"""A namespace's LimitRanges, as Kueue reads them for the Workloads queued there.

The API server applies a LimitRange to Pods only: a Workload's pod templates are not defaulted,
so Kueue does it itself before it counts a Workload's requests (``workload.AdjustResources``),
and refuses to admit a Workload whose pods the LimitRanges would refuse
(``workload.ValidateLimitRange``, part of nomination's admissibility check).  Without that a Job
that names no requests would be admitted for nothing and its pods, defaulted by the API server,
would run on quota nobody counted.

* :func:`summarize` folds a namespace's LimitRanges into one (Kueue's ``limitrange.Summarize``):
  the lowest ``max``, the highest ``min``, the first ``default`` and ``defaultRequest`` (in name
  order, as a List returns them).  Each Container item first gets the API server's own defaults
  (``SetDefaults_LimitRangeItem``): ``default`` from ``max``, ``defaultRequest`` from ``default``,
  then from ``min``, so a manifest read from a file reads as the stored object would.
* :func:`with_defaults`: every container and init container takes the Container ``default`` as
  its missing limits and ``defaultRequest`` as its missing requests.
* :func:`violations`: a container whose larger of request and limit exceeds the Container
  ``max``, or whose smaller is below ``min``; a pod whose total requests exceed the Pod ``max`` or
  fall below its ``min``.  Messages are Kueue's field errors.

Kueue adjusts a Workload when its queue takes it in; so does kueued (``World`` builds the spec
with the namespace's summary, and a LimitRange change builds its pending Workloads' specs again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from kueued.model import api
from kueued.model.quantity import QuantityError, parse

__all__ = ["Summary", "summarize", "with_defaults", "violations", "ABOVE_MAX", "BELOW_MIN"]

ABOVE_MAX = "requests must not be above the limitRange max"
BELOW_MIN = "requests must not be below the limitRange min"

Amounts = dict[str, api.Quantity]


class Summary(msgspec.Struct, frozen=True):
    container_max: Amounts = {}
    container_min: Amounts = {}
    default: Amounts = {}
    default_request: Amounts = {}
    pod_max: Amounts = {}
    pod_min: Amounts = {}


def summarize(ranges: Iterable[api.LimitRange]) -> Summary | None:
    """One summary of a namespace's LimitRanges; None when they limit nothing Kueue reads."""
    found: dict[str, Amounts] = {f: {} for f in Summary.__struct_fields__}
    for lr in sorted(ranges, key=lambda r: r.metadata.name):
        for item in lr.spec.limits:
            if item.type == "Container":
                default = {**item.max, **item.default}
                request = {**item.min, **default, **item.default_request}
                _keep(found["container_max"], item.max, lowest=True)
                _keep(found["container_min"], item.min, lowest=False)
                _first(found["default"], default)
                _first(found["default_request"], request)
            elif item.type == "Pod":
                _keep(found["pod_max"], item.max, lowest=True)
                _keep(found["pod_min"], item.min, lowest=False)
    if not any(found.values()):
        return None
    return Summary(**found)


def _keep(into: Amounts, values: Mapping[str, api.Quantity], *, lowest: bool) -> None:
    for res, q in values.items():
        have = into.get(res)
        if have is None or (_milli(q) < _milli(have) if lowest else _milli(q) > _milli(have)):
            into[res] = q


def _first(into: Amounts, values: Mapping[str, api.Quantity]) -> None:
    for res, q in values.items():
        into.setdefault(res, q)


def _milli(q: api.Quantity) -> int:
    try:
        return parse(q)
    except QuantityError:
        return 0


def with_defaults(spec: api.PodSpec, summary: Summary) -> api.PodSpec:
    """``spec`` with the Container defaults filled in where a container names none."""
    if not (summary.default or summary.default_request):
        return spec

    def adjusted(c: api.Container) -> api.Container:
        r = c.resources
        limits = {**summary.default, **r.limits}
        requests = {**summary.default_request, **r.requests}
        if limits == r.limits and requests == r.requests:
            return c
        return msgspec.structs.replace(c, resources=api.ResourceRequirements(requests=requests, limits=limits))

    return msgspec.structs.replace(spec, containers=[adjusted(c) for c in spec.containers],
                                   init_containers=[adjusted(c) for c in spec.init_containers])


def violations(spec: api.PodSpec, summary: Summary, path: str, pod_total: Mapping[str, int]) -> list[str]:
    """Kueue's field errors for a pod the LimitRanges would refuse (after :func:`with_defaults`);
    ``pod_total``: one pod's effective requests (``kueued.scheduling.workload.pod_requests``)."""
    out = []
    for field, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, c in enumerate(containers):
            requests = {r: _milli(q) for r, q in c.resources.requests.items()}
            limits = {r: _milli(q) for r, q in c.resources.limits.items()}
            larger = {r: max(requests.get(r, v), limits.get(r, v)) for r, v in {**requests, **limits}.items()}
            smaller = {r: min(requests.get(r, v), limits.get(r, v)) for r, v in {**requests, **limits}.items()}
            where = f"{path}.{field}[{i}]"
            out += _beyond(where, larger, summary.container_max, above=True)
            out += _beyond(where, smaller, summary.container_min, above=False)
    out += _beyond(path, pod_total, summary.pod_max, above=True)
    out += _beyond(path, pod_total, summary.pod_min, above=False)
    return out


def _beyond(where: str, values: Mapping[str, int], bounds: Amounts, *, above: bool) -> list[str]:
    names = sorted(r for r, bound in bounds.items() if r in values
                   and (values[r] > _milli(bound) if above else values[r] < _milli(bound)))
    if not names:
        return []
    listed = ", ".join(f'"{n}"' for n in names)
    return [f"{where}: Invalid value: [{listed}]: {ABOVE_MAX if above else BELOW_MIN}"]
