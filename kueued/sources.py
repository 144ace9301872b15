"""Where objects come from offline: a directory of manifests.

:class:`ManifestDirectory` remembers every object it has read, per file, and each
:meth:`~ManifestDirectory.scan` yields what changed in the directory as a whole since the
last one: objects added or modified (``("apply", manifest)``) and objects gone
(``("delete", manifest)``), applies in dependency order (Namespaces, flavors, cohorts and
queues before workloads, so a workload never arrives before its queue), deletes in the
reverse order.  The difference is taken over the whole directory, keyed by object, not per
file: an object moved from one file to another is unchanged, not deleted.

What is read, and what is not:

- ``*.yaml`` and ``*.yml`` files, following symlinks; hidden files and editor droppings
  (``.#org.yaml``, ``#org.yaml#``, ``org.yaml~``) are not manifests and are skipped.
- A file that cannot be read (a dangling symlink, no permission, not UTF-8, broken YAML)
  is a :class:`~kueued.manifests.Problem`; what it held before stays in force until it
  reads again.  One bad document does not stop the file's other documents.
- An object defined in two files is taken from the first in name order; the second is a
  problem.
- A directory that cannot be listed is a problem too, and nothing is deleted because of it.

Problems are state, not events: :meth:`~ManifestDirectory.problem_changes` says which
appeared, changed or cleared since it was last asked, so the daemon logs each once per
change rather than at every scan.  The API server's watches will give the coordinator the
same two events; it cannot tell the difference.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import anyio

from kueued.manifests import Problem, read_manifests
from kueued.model.api import object_key
from kueued.model.validation.kinds import kind_error

__all__ = ["ManifestDirectory", "KIND_ORDER", "Source", "is_manifest_name"]

KIND_ORDER = {"Configuration": 0, "Namespace": 1, "Node": 1, "LimitRange": 2, "ResourceFlavor": 2,
              "WorkloadPriorityClass": 2, "Cohort": 3, "ElasticQuota": 3, "ClusterQueue": 4, "LocalQueue": 5,
              "Workload": 6}

Stamp = tuple[int, int, int, int]


class Source(Protocol):
    """Where the daemon's objects come from: this directory, or the API server's watches."""

    name: str

    async def initial(self) -> list[tuple[str, dict[str, Any]]]:
        """Every object there is, once, before the first decision (an initial sync)."""
        ...

    async def changes(self, wait: float) -> list[tuple[str, dict[str, Any]]]:
        """What changed since the last call, after waiting up to ``wait`` seconds for something."""
        ...

    def problem_changes(self) -> tuple[list[Problem], list[str]]: ...

    def queued(self) -> int:
        """How many changes are already waiting to be taken (the daemon puts its own status
        writes after them while they keep coming)."""
        ...


def is_manifest_name(name: str) -> bool:
    """A YAML file a person meant as a manifest: not hidden, not an editor's lock or backup."""
    return name.endswith((".yaml", ".yml")) and not name.startswith((".", "#")) and not name.endswith("~")


def _order(change: tuple[str, dict[str, Any]]) -> int:
    kind = change[1].get("kind")
    return KIND_ORDER.get(kind, 9) if isinstance(kind, str) else 9


class ManifestDirectory:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = str(root)
        self._stamps: dict[Path, Stamp] = {}
        self._files: dict[Path, dict[str, dict[str, Any]]] = {}  # what each file held when it last read
        self._seen: dict[str, dict[str, Any]] = {}                # the directory as last yielded, by key
        self._directory_problem: Problem | None = None
        self._file_problems: dict[Path, list[Problem]] = {}
        self._duplicates: list[Problem] = []
        self._reported: dict[str, Problem] = {}

    @property
    def problems(self) -> dict[str, Problem]:
        """What cannot be read now, by where (the directory, a file, or file#document)."""
        out = {} if self._directory_problem is None else {str(self.root): self._directory_problem}
        for problems in self._file_problems.values():
            out.update((p.where, p) for p in problems)
        out.update((f"{p.where}: {p.reason}", p) for p in self._duplicates)
        return out

    async def initial(self) -> list[tuple[str, dict[str, Any]]]:
        return list(self.scan())

    def queued(self) -> int:
        return 0  # nothing is known before the next look

    async def changes(self, wait: float) -> list[tuple[str, dict[str, Any]]]:
        """A directory cannot say when it changes: wait, then look."""
        await anyio.sleep(wait)
        return list(self.scan())

    def scan(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """The changes since the last scan (see the module docstring)."""
        paths = self._list()
        if paths is None:
            return
        for path in {*self._files, *self._file_problems} - set(paths):
            self._files.pop(path, None)
            self._file_problems.pop(path, None)
            self._stamps.pop(path, None)
        for path in paths:
            self._read(path)
        now = self._merged()
        applies = [("apply", m) for k, m in now.items() if self._seen.get(k) != m]
        deletes = [("delete", m) for k, m in self._seen.items() if k not in now]
        self._seen = now
        yield from sorted(applies, key=_order)
        yield from sorted(deletes, key=_order, reverse=True)

    def problem_changes(self) -> tuple[list[Problem], list[str]]:
        """Problems that appeared or changed, and the places whose problem cleared, since last asked."""
        problems = self.problems
        new = [p for where, p in problems.items() if self._reported.get(where) != p]
        cleared = [where for where in self._reported if where not in problems]
        self._reported = problems
        return new, cleared

    def _list(self) -> list[Path] | None:
        try:
            with os.scandir(self.root) as entries:
                names = sorted(e.name for e in entries if is_manifest_name(e.name))
        except OSError as exc:
            self._directory_problem = Problem(str(self.root), "the manifest directory cannot be read: "
                                                              f"{exc.strerror or exc}")
            return None
        self._directory_problem = None
        return [self.root / name for name in names]

    def _read(self, path: Path) -> None:
        try:
            st = path.stat()
        except OSError as exc:
            why = "a dangling symlink" if path.is_symlink() else (exc.strerror or str(exc))
            self._fail(path, [Problem(str(path), f"cannot be read: {why}")])
            return
        stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if self._stamps.get(path) == stamp:
            return
        self._stamps[path] = stamp
        if not path.is_file():
            self._fail(path, [Problem(str(path), "is not a regular file")])
            return
        manifests, problems = read_manifests([path])
        whole_file = any(p.document is None for p in problems)
        self._fail(path, problems)
        if not whole_file:  # a bad document still lets the others in; an unreadable file keeps its old objects
            self._files[path] = {object_key(m): m for m in manifests}

    def _fail(self, path: Path, problems: list[Problem]) -> None:
        if problems:
            self._file_problems[path] = problems
        else:
            self._file_problems.pop(path, None)

    def _merged(self) -> dict[str, dict[str, Any]]:
        """Every file's objects, by key; an object twice over is taken from the first file, unless
        kueued cannot read that copy's kind and apiVersion (an old ``v1beta1`` file beside its
        ``v1beta2`` rewrite) and can read a later one's: refused, the first would shadow the valid one."""
        merged: dict[str, dict[str, Any]] = {}
        first: dict[str, Path] = {}
        self._duplicates = []
        for path in sorted(self._files):
            for key, manifest in self._files[path].items():
                if key in first:
                    if _unreadable(merged[key]) and not _unreadable(manifest):
                        self._duplicates.append(Problem(str(first[key]), f"{key} is also defined in {path}, "
                                                        f"which is the one in force: {_unreadable(merged[key])}"))
                        first[key], merged[key] = path, manifest
                        continue
                    self._duplicates.append(Problem(str(path), f"{key} is also defined in {first[key]}, "
                                                               "which is the one in force"))
                    continue
                first[key] = path
                merged[key] = manifest
        return merged


def _unreadable(manifest: dict[str, Any]) -> str:
    """Why kueued cannot read this kind at this apiVersion, or ""."""
    error = kind_error(manifest.get("kind"), manifest.get("apiVersion"))
    return str(error) if error is not None else ""
