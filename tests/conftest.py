"""Test-wide settings: Hypothesis runs derandomized so CI is repeatable, and every test leaves
logging as it found it: ``main`` configures it in this process (``kueued.logging.configure``: a
WARNING filter, a root handler, JSON mode's process hooks), and a later test's ``capture_logs``
must still see INFO events, whatever order the tests run in.

A test against a real control plane cancels HTTP clients mid-request; the socket aiohttp drops
then is reclaimed only by the garbage collector, and would be reported (an unclosed-socket
ResourceWarning, unraisable) during whichever test runs next, failing an innocent in-process one.
``collect_cluster_sockets`` collects right after each such test, with that one warning ignored.
Every other warning stays an error."""

from __future__ import annotations

import gc
import logging
import sys
import warnings
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

import kueued.logging


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
