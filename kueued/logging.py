"""Logging set-up, done once by the CLI: structlog, to stderr, JSON lines or console.

Logs are facts: snake_case events with fields (``workload_admitted workload=ns/wl
cluster_queue=cq``).  ``simulate`` keeps them at WARNING so stdout carries only the
report; the daemon streams INFO as JSON lines for journald and log shippers.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(*, level: str = "WARNING", json: bool = False) -> None:
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
