"""Where objects come from when there is no API server yet: a directory of manifests.

:class:`ManifestDirectory` remembers every object it has seen per file and, on each
:meth:`scan`, yields what changed since the last one: objects added or modified
(``("apply", manifest)``) and objects that disappeared (``("delete", manifest)``),
in a stable order (Namespaces, flavors, cohorts and queues before workloads, so a
workload never arrives before its queue).  A file that cannot be parsed is reported
and skipped; what it held before stays in force until it parses again.

The Kubernetes layer will provide the same two events from watches; the coordinator
cannot tell the difference.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kueued.errors import ManifestError
from kueued.model.api import object_key

__all__ = ["ManifestDirectory", "KIND_ORDER"]

KIND_ORDER = {"Configuration": 0, "Namespace": 1, "Node": 1, "ResourceFlavor": 2, "WorkloadPriorityClass": 2,
              "Cohort": 3, "ElasticQuota": 3, "ClusterQueue": 4, "LocalQueue": 5, "Workload": 6}


class ManifestDirectory:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._stamps: dict[Path, tuple[float, int]] = {}
        self._objects: dict[Path, dict[str, dict[str, Any]]] = {}
        self.errors: dict[Path, str] = {}

    def scan(self) -> Iterator[tuple[str, dict[str, Any]]]:
        from kueued.simulate import load_manifests
        seen = set()
        changes: list[tuple[str, dict[str, Any]]] = []
        for path in sorted(self.root.glob("*.y*ml")):
            seen.add(path)
            stat = path.stat()
            stamp = (stat.st_mtime, stat.st_size)
            if self._stamps.get(path) == stamp:
                continue
            self._stamps[path] = stamp
            try:
                docs = load_manifests([path])
            except ManifestError as exc:
                self.errors[path] = str(exc)
                continue
            self.errors.pop(path, None)
            new = {object_key(d): d for d in docs}
            old = self._objects.get(path, {})
            changes += [("apply", d) for k, d in new.items() if old.get(k) != d]
            changes += [("delete", d) for k, d in old.items() if k not in new]
            self._objects[path] = new
        for path in [p for p in self._objects if p not in seen]:
            changes += [("delete", d) for d in self._objects.pop(path).values()]
            self._stamps.pop(path, None)
        applies = sorted((c for c in changes if c[0] == "apply"), key=lambda c: KIND_ORDER.get(c[1].get("kind"), 9))
        deletes = sorted((c for c in changes if c[0] == "delete"),
                         key=lambda c: -KIND_ORDER.get(c[1].get("kind"), 9))
        yield from applies
        yield from deletes
