"""Test-wide settings: Hypothesis runs derandomized so CI is repeatable, and every test leaves
logging as it found it: ``main`` configures it in this process (``kueued.logging.configure``: a
WARNING filter, a root handler, JSON mode's process hooks), and a later test's ``capture_logs``
must still see INFO events, whatever order the tests run in.

A test against a real control plane cancels HTTP clients mid-request; the socket aiohttp drops
then is reclaimed only by the garbage collector, and would be reported (an unclosed-socket
ResourceWarning, unraisable) during whichever test runs next, failing an innocent in-process one.
``collect_cluster_sockets`` collects right after each such test, with that one warning ignored.
Every other warning stays an error.

A test marked ``interpreted`` spies on the compiled modules' insides (it monkeypatches one of
their functions or methods): compiled code calls its own functions and methods directly, so the
spy would see nothing.  (Stand-ins for the engine's classes do not work either: compiled code
checks the classes it is handed; tests give it real objects.)  When the installed engine is
compiled, such a test runs in a child pytest with
``KUEUED_PURE=1`` (the same sources, interpreted: ``kueued/native.py``) and passes or fails as
that run does.  ``tests/test_native.py`` checks that both engines decide alike."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

import kueued.logging
from kueued import native


@pytest.fixture(autouse=True)
def restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    was_configured, saved = structlog.is_configured(), structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setitem(kueued.logging._state, "json", kueued.logging._state["json"])
    yield
    if was_configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def collect_cluster_sockets(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if request.node.get_closest_marker("control_plane") is None:
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "unclosed", ResourceWarning)
        gc.collect()


settings.register_profile("kueued", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("kueued")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "interpreted: spies on compiled modules' insides; runs with KUEUED_PURE=1")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker("interpreted") is None or not native.compiled():
        return None
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", pyfuncitem.nodeid],
                         cwd=pyfuncitem.config.rootpath, env={**os.environ, "KUEUED_PURE": "1"},
                         capture_output=True, text=True)
    if run.returncode != 0 or " passed" not in run.stdout:
        pytest.fail(f"with KUEUED_PURE=1 (exit {run.returncode}):\n{run.stdout[-4000:]}{run.stderr[-2000:]}",
                    pytrace=False)
    return True
