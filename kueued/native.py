"""The compiled engine: which modules mypyc compiles, and the guard that never runs a stale one.

``setup.py`` compiles the modules in :data:`COMPILED` with mypyc (``KUEUED_COMPILE=0`` builds
pure Python): the quota nodes, the cycle and its flavor assignment, the verdicts, the pending
queues, the snapshot, the preemption search, and the actors' runtime and their Cohort and
ClusterQueue actors.  They are the hot half of the engine; compiled, the contended throughput
bench runs about 1.6 times fewer instructions (``bench/throughput.py``).  Everything else stays
Python: the compiled modules call into it, and it into them, as into any module.

A compiled module is a C extension beside its source, and Python imports the extension first.
An editable install (``make``) leaves the extensions in the checkout, so after an edit the
extension would run the old code.  So the build records a SHA-256 of each compiled source
(``_native_build.json``), and :func:`install`, run by ``import kueued`` before any compiled
module is imported, checks them:

- every source matches its record: the extensions are imported (the engine is compiled);
- a source changed, the record is missing (a pure build), or ``KUEUED_PURE`` is set: every
  module of the list is imported from its source.  All of them, never a mix: compiled code
  checks the classes of the other compiled modules it is handed, and a class from the source
  is another class.

:func:`compiled` says which it is and :func:`engine` also why (``kueue_build_info``'s compiler
label, the daemon's ``daemon_ready`` line, the benches' tables); ``make`` rebuilds the extensions
when a compiled source changed.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

__all__ = ["COMPILED", "MANIFEST", "compiled", "engine", "install", "source_digest", "source_path", "why_pure"]

# The modules mypyc compiles (setup.py reads this literal; keep it a plain tuple of names).
COMPILED = (
    "kueued.quota.node",
    "kueued.quota.tree",
    "kueued.scheduling.cycle",
    "kueued.scheduling.flavors",
    "kueued.scheduling.forest",
    "kueued.scheduling.queues",
    "kueued.scheduling.snapshot",
    "kueued.scheduling.verdicts",
    "kueued.scheduling.workload",
    "kueued.scheduling.preemption.candidates",
    "kueued.scheduling.preemption.classical",
    "kueued.scheduling.preemption.minimal",
    "kueued.scheduling.preemption.ordering",
    "kueued.scheduling.preemption.policy",
    "kueued.scheduling.preemption.stream",
    "actors.runtime",
    "actors.node",
    "actors.cluster_queue",
    "actors.cohort",
)

MANIFEST = "_native_build.json"  # beside this file: {module: SHA-256 of the source compiled}

_ROOT = Path(__file__).resolve().parent.parent  # the directory holding the packages kueued and actors

_pure_reason: str | None = None
_installed = False


def source_path(module: str, root: Path = _ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def why_pure(environ: Mapping[str, str] = os.environ, root: Path = _ROOT) -> str | None:
    """None when the extensions under ``root`` may be imported, else why every compiled module
    is to load from its source."""
    if environ.get("KUEUED_PURE", "") not in ("", "0"):
        return "KUEUED_PURE is set"
    manifest = root / "kueued" / MANIFEST
    try:
        built = json.loads(manifest.read_text())
    except FileNotFoundError:
        return "built without mypyc"
    except (OSError, ValueError) as e:
        return f"{MANIFEST} is unreadable ({e})"
    if not isinstance(built, dict):
        return f"{MANIFEST} is not a mapping"
    for module in COMPILED:
        try:
            digest = source_digest(source_path(module, root))
        except OSError:
            continue  # an install without sources: only the extension exists
        if built.get(module) != digest:
            return f"{module} changed since it was compiled (make rebuilds it)"
    return None


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' sources ahead of their extensions."""

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED:
            return None
        source = source_path(fullname)
        if not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def install() -> None:
    """Decide once, before any compiled module is imported, where they are imported from."""
    global _pure_reason, _installed
    if _installed:
        return
    _installed = True
    _pure_reason = why_pure()
    if _pure_reason is not None:
        sys.meta_path.insert(0, _FromSource())


def compiled() -> bool:
    """Does the running engine run compiled (its modules imported as extensions)?"""
    install()
    from kueued.scheduling import cycle
    return cycle.__file__ is not None and not cycle.__file__.endswith(".py")


def engine() -> str:
    """``compiled (mypyc)`` or ``pure Python (<why>)``: what the running engine is."""
    if compiled():
        return "compiled (mypyc)"
    return f"pure Python ({_pure_reason or 'no extension found'})"
