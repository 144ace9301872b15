"""Logging set-up, done once by the CLI: structlog, to stderr, JSON lines or console.

Logs are facts: snake_case events with fields (``workload_admitted workload=ns/wl
cluster_queue=cq``).  ``simulate`` keeps them at WARNING so stdout carries only the
report; the daemon streams INFO as JSON lines for journald and log shippers.

Under ``--log-format json`` *every* line kueued writes to stderr is one JSON object, so
``journalctl -o cat | jq`` keeps working exactly when something goes wrong:

- structlog events, with exceptions as a ``exception`` field (structured traceback);
- the standard library's ``logging`` (libraries such as the Kubernetes client) through
  the same processors;
- an uncaught exception, as one ``uncaught_exception`` event (``sys.excepthook``), and
  Python warnings as ``python_warning`` events;
- the CLI's own error messages (:func:`fail`), which in console mode stay plain
  ``kueued: ...`` lines for people.
"""

from __future__ import annotations

import logging
import sys
import traceback
import warnings
from types import TracebackType
from typing import Any

import structlog

__all__ = ["configure", "fail", "warn", "is_json"]

_state = {"json": False}


def is_json() -> bool:
    return _state["json"]


def configure(*, level: str = "WARNING", json: bool = False) -> None:
    _state["json"] = json
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.WARNING)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        renderer: Any = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.dict_tracebacks)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    _route_stdlib(shared, renderer, numeric)
    if json:
        sys.excepthook = _log_uncaught
        warnings.showwarning = _log_warning


def fail(message: str, **fields: Any) -> None:
    """A CLI error for the user: ``kueued: message`` on stderr, or one JSON event in JSON mode."""
    if _state["json"]:
        structlog.get_logger("kueued.cli").error("command_failed", error=message, **fields)
    else:
        print(f"kueued: {message}", file=sys.stderr)


def warn(message: str, *, event: str = "command_warning", **fields: Any) -> None:
    """A problem the command works around: ``kueued: warning: ...``, or one JSON event."""
    if _state["json"]:
        structlog.get_logger("kueued.cli").warning(event, error=message, **fields)
    else:
        print(f"kueued: warning: {message}", file=sys.stderr)


def _route_stdlib(shared: list[Any], renderer: Any, level: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name("kueued")
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processor=renderer, foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared]))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "kueued"]:  # configured again (tests)
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    structlog.get_logger("kueued").critical(
        "uncaught_exception", error=f"{kind.__name__}: {exc}",
        traceback="".join(traceback.format_exception(kind, exc, tb)))


def _log_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
    structlog.get_logger("kueued").warning("python_warning", category=category.__name__, message=str(message),
                                           location=f"{filename}:{lineno}")
