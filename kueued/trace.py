"""A timed run's input: the setup applied before time 0, and each Workload's arrival and run time.

A workload may carry ``kueued.io/arrival`` (seconds after the start, or an RFC 3339
instant) and ``kueued.io/runtime`` (seconds it runs once admitted; absent: forever), and a
``kueued.io/class`` label it reports under.  :func:`trace_from` splits manifests into the
setup (everything that is not a Workload, in order) and the arrivals (:class:`Arrival`),
in microseconds after the start (the earliest instant named, else :data:`EPOCH`); a Workload
without a ``creationTimestamp`` gets its arrival's, so queue order follows arrival.
:mod:`kueued.generator` builds a :class:`Trace` from Kueue's generator format instead;
:mod:`kueued.timeline` plays one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import msgspec

from kueued.errors import ManifestError
from kueued.scheduling.workload import timestamp

__all__ = ["ARRIVAL", "RUNTIME", "CLASS", "EPOCH", "US", "Arrival", "Trace", "trace_from", "is_timed"]

ARRIVAL = "kueued.io/arrival"
RUNTIME = "kueued.io/runtime"
CLASS = "kueued.io/class"        # label: which class a Workload or ClusterQueue reports under
EPOCH = 1_767_225_600.0          # 2026-01-01T00:00:00Z: time 0 when no arrival names an instant
US = 1_000_000


class Arrival(msgspec.Struct):
    key: str                     # namespace/name
    at: int                      # microseconds after the start
    runtime: int | None          # microseconds, None: runs until the end
    manifest: dict[str, Any]
    klass: str = "all"


class Trace(msgspec.Struct):
    setup: list[dict[str, Any]]
    arrivals: list[Arrival]
    epoch: float = EPOCH


def is_timed(manifests: Iterable[dict[str, Any]]) -> bool:
    return any(_annotations(m).keys() & {ARRIVAL, RUNTIME} for m in manifests if m.get("kind") == "Workload")


def _annotations(m: dict[str, Any]) -> dict[str, Any]:
    return (m.get("metadata") or {}).get("annotations") or {}


def _seconds(value: Any, what: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{what}: {value!r} is not a number of seconds") from exc
    if out < 0 or out != out:
        raise ManifestError(f"{what}: {value!r} must be >= 0")
    return out


def trace_from(manifests: list[dict[str, Any]]) -> Trace:
    """Every Workload arrives (at 0 without ``kueued.io/arrival``); the rest is setup, in order."""
    instants = []
    for m in manifests:
        at = _annotations(m).get(ARRIVAL) if m.get("kind") == "Workload" else None
        if isinstance(at, str) and ("T" in at or "-" in at[1:]):
            try:
                instants.append(timestamp(at))
            except ValueError as exc:
                raise ManifestError(f"{ARRIVAL}: {at!r} is neither seconds nor RFC 3339") from exc
    epoch = min(instants) if instants else EPOCH
    setup: list[dict[str, Any]] = []
    arrivals: list[Arrival] = []
    for m in manifests:
        if m.get("kind") != "Workload":
            setup.append(m)
            continue
        meta = m.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        ann = _annotations(m)
        raw_at = ann.get(ARRIVAL, 0)
        if isinstance(raw_at, str) and ("T" in raw_at or "-" in raw_at[1:]):
            at = timestamp(raw_at) - epoch
        else:
            at = _seconds(raw_at, f"Workload {key} {ARRIVAL}")
        runtime = ann.get(RUNTIME)
        rt = None if runtime is None else round(_seconds(runtime, f"Workload {key} {RUNTIME}") * US)
        if not meta.get("creationTimestamp"):  # queue order follows arrival
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch + at))
            frac = f"{(epoch + at) % 1:.6f}"[1:]
            m = {**m, "metadata": {**meta, "creationTimestamp": f"{stamp}{frac}Z"}}
        klass = str((meta.get("labels") or {}).get(CLASS, "all"))
        arrivals.append(Arrival(key, round(at * US), rt, m, klass))
    return Trace(setup, arrivals, epoch)
