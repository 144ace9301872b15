"""The reliability tests that run kueued against the session's real kube-apiserver, as tests/integration does.

The fixtures are tests/integration's own (imported, so this directory sees them): the
session's one control plane is shared through ``SHARED_CLUSTER``, whichever directory's
tests ask for it first.  A test here that uses it (``control_plane``, ``installed`` or
``cp_binaries``, directly or through another fixture) gets the ``control_plane`` marker
and the same skip (or, with ``KUEUED_REQUIRE_CONTROL_PLANE=1``, failure) when no control
plane can be had; ``-m "not control_plane"`` leaves them out.  The directory also holds
pure tests (fuzzing the schemas, the RBAC scan), which need no cluster and are left alone.

Figures: :func:`record` writes a test's measurements as JSON into ``build/reliability/``
(or ``$KUEUED_RELIABILITY_OUT``), which ``docs/reliability.md`` quotes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import (  # noqa: F401  (fixtures, found by name)
    BUILD_TIMEOUT_S,
    EXTERNAL,
    MARKER,
    REQUIRE,
    _unavailable,
    control_plane,
    cp_binaries,
    installed,
)
from tests.integration.conftest import build as _build

HERE = Path(__file__).parent
RESULTS = Path(os.environ.get("KUEUED_RELIABILITY_OUT", HERE.parents[1] / "build" / "reliability"))
CLUSTER_FIXTURES = frozenset({"control_plane", "installed", "cp_binaries"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marker added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            # A socket of an HTTP client a cluster test here cancelled can be collected (and
            # reported, unraisable) during whichever test runs next, in-process ones included:
            # known, bounded, and not that test's fault (tests/integration/conftest.py says the same).
            item.add_marker(pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"))
    ours = [item for item in items if HERE in item.path.parents
            and CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ()))]
    if not ours:
        return
    reason = None if REQUIRE else _unavailable()
    cold = reason is None and not EXTERNAL and not _build.is_cached()
    for item in ours:
        item.add_marker(MARKER)
        item.add_marker(pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning"))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"reliability tests skipped: {reason}"))
        elif cold and "cp_binaries" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT_S))


def record(name: str, figures: dict[str, Any]) -> Path:
    """Write one test's figures as ``<name>.json`` for docs/reliability.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return path
