"""The Job controller's caches: the Jobs, and the Workloads each Job controls, by owner.

:class:`~kueued.kube.jobs.JobController` feeds every watch event, and every write's reply,
through :meth:`JobCache.observe`, which answers with the key of the Job to reconcile.  A
Workload is found by its controlling ownerReference (a Job's name and uid), so a Workload
whose Job is gone, or was replaced by one of the same name, still maps to that Job's key and
is deleted by the reconcile.  A write's reply can overtake the watch's older events: an
object replaces its cached copy only if its resourceVersion is not older.  It can also come
after the object's deletion event: the uids of the last :data:`TOMBSTONES` objects deleted are
kept, and a version of one of them is never taken in again (an object created anew under the
same name has a new uid).

A Job may name its Workload instead (``kueue.x-k8s.io/prebuilt-workload-name``,
:mod:`kueued.kube.job_prebuilt`); until the Job adopts it, that Workload has no owner.  The
cache keeps which Job wants which Workload, and a Workload nobody controls only while a Job
wants it (:attr:`JobCache.prebuilt`); its events go to that Job.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import structlog

from kueued.kube import job_prebuilt
from kueued.kube import job_workload as jw

__all__ = ["JobCache", "meta", "key_of"]

log = structlog.get_logger("kueued.kube.job_cache")

TOMBSTONES = 10_000
"""Deleted objects' uids kept (a stale reply arrives within a request's time, not hours later)."""


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def key_of(obj: dict[str, Any]) -> str:
    """``namespace/name``."""
    m = meta(obj)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def _rv(obj: dict[str, Any]) -> int | None:
    rv = meta(obj).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


def _newer(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Whether ``new`` may replace ``old`` in a cache: a write's reply can overtake the watch's older events."""
    a, b = _rv(new), (_rv(old) if old is not None else None)
    return a is None or b is None or a >= b


class JobCache:
    """Jobs and the Workloads a Job controls, in the namespaces ``namespace_filter`` admits."""

    def __init__(self, namespace_filter: Callable[[str], bool] | None = None) -> None:
        self.namespace_filter = namespace_filter
        self.jobs: dict[str, dict[str, Any]] = {}       # "ns/name" -> Job
        self.workloads: dict[str, dict[str, Any]] = {}  # "ns/name" -> Workload controlled by a Job
        self._owned: dict[str, set[str]] = {}           # Job key -> keys of the Workloads a Job of that name controls
        self._deleted: OrderedDict[str, None] = OrderedDict()  # uids of deleted objects, oldest first
        self.prebuilt: dict[str, dict[str, Any]] = {}   # "ns/name" -> a wanted Workload nobody controls yet
        self._wanted: dict[str, str] = {}               # "ns/workload" -> the Job ("ns/name") that names it
        self._names: dict[str, str] = {}                # the other way round

    def job_keys(self) -> set[str]:
        """Every Job cached, and every Job name a Workload names as its owner (orphans too)."""
        return set(self.jobs) | set(self._owned)

    def observe(self, verb: str, obj: dict[str, Any]) -> str | None:
        """Take a watch event (or a write's reply) into the caches; the Job key it concerns."""
        try:
            namespace = meta(obj).get("namespace", "")
            if self.namespace_filter is not None and not self.namespace_filter(str(namespace)):
                return None
            if self._stale(verb, obj):
                return None
            if obj.get("kind") == "Job":
                key = key_of(obj)
                if verb == "delete":
                    self.jobs.pop(key, None)
                elif _newer(obj, self.jobs.get(key)):
                    self.jobs[key] = obj
                self._want(key, None if verb == "delete" else self.jobs.get(key))
                return key
            if obj.get("kind") == "Workload":
                return self._observe_workload(verb, obj)
        except Exception:  # a malformed object is logged and skipped
            log.exception("job_object_unreadable", kind=str(obj.get("kind")), object=str(meta(obj).get("name")))
        return None

    def _stale(self, verb: str, obj: dict[str, Any]) -> bool:
        """Record a deletion's uid; whether ``obj`` is a version of an object deleted since."""
        uid = meta(obj).get("uid")
        if not isinstance(uid, str) or not uid:
            return False
        if verb == "delete":
            self._deleted[uid] = None
            if len(self._deleted) > TOMBSTONES:
                self._deleted.popitem(last=False)
            return False
        return uid in self._deleted

    def _want(self, job_key: str, job: dict[str, Any] | None) -> None:
        """Record the Workload ``job`` names (none once it is deleted or names none)."""
        name = job_prebuilt.prebuilt_name(job) if job is not None else None
        wl_key = f"{job_key.split('/', 1)[0]}/{name}" if name is not None else None
        old = self._names.get(job_key)
        if old == wl_key:
            return
        if old is not None:
            del self._names[job_key]
            self._wanted.pop(old, None)
            self.prebuilt.pop(old, None)
        if wl_key is not None:
            self._names[job_key] = wl_key
            self._wanted[wl_key] = job_key

    def _observe_workload(self, verb: str, obj: dict[str, Any]) -> str | None:
        key = key_of(obj)
        wanted_by = self._wanted.get(key)
        if wanted_by is not None:
            if verb == "delete" or jw.owner_uid(obj) is not None:
                self.prebuilt.pop(key, None)
            elif _newer(obj, self.prebuilt.get(key)):
                self.prebuilt[key] = obj
        old = self.workloads.get(key)
        owner = jw.owner_uid(obj)
        if verb != "delete" and old is not None and not _newer(obj, old):
            return None
        previous = jw.owner_uid(old) if old is not None else None
        namespace = key.split("/", 1)[0]
        if previous is not None:
            self._owned.get(f"{namespace}/{previous[0]}", set()).discard(key)
        if verb == "delete" or owner is None:
            self.workloads.pop(key, None)
        else:
            self.workloads[key] = obj
            self._owned.setdefault(f"{namespace}/{owner[0]}", set()).add(key)
        for job in {p for p in (owner, previous) if p is not None}:
            if not self._owned.get(f"{namespace}/{job[0]}"):
                self._owned.pop(f"{namespace}/{job[0]}", None)
        name = (owner or previous or ("", ""))[0]
        return f"{namespace}/{name}" if name else wanted_by

    def owned_by(self, key: str) -> list[dict[str, Any]]:
        return [self.workloads[k] for k in sorted(self._owned.get(key, ())) if k in self.workloads]
