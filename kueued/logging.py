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

``--log-format auto`` (the default) picks JSON lines for the daemon (``run``) when stderr is
not a terminal (journald, a pipe, a file) and the console renderer otherwise; the one-shot
commands talk to people and stay on the console.  Logs go to stderr, always: stdout carries
the commands' output (a report, manifests), and journald reads both streams alike.

No secret is ever written (:func:`redact`, the last processor before rendering, for
structlog's events and the standard library's alike): the values of keys named like a
credential (token, password, client-key-data, authorization, ...) and, in any string, a PEM
block, its base64 (a kubeconfig's ``*-data``), a ``Bearer ...`` header or a ``token: ...``
line of YAML are replaced by ``[REDACTED]``.
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
import warnings
from types import TracebackType
from typing import Any

import structlog

__all__ = ["configure", "fail", "warn", "is_json", "redact", "redact_text", "REDACTED"]

_state = {"json": False}

REDACTED = "[REDACTED]"
_SECRET_KEYS = re.compile(r"token|password|passwd|secret|client[-_]?key|client[-_]?certificate|"
                          r"certificate[-_]?authority|authorization|bearer|api[-_]?key|private[-_]?key", re.I)
_SECRET_TEXT = [
    (re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?(-----END [A-Z0-9 ]+-----|$)", re.S), REDACTED),
    (re.compile(r"LS0tLS1CRUdJT[A-Za-z0-9+/=]*"), REDACTED),  # base64 of "-----BEGIN": a kubeconfig's *-data
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.I), r"\1 " + REDACTED),
    (re.compile(r"(?i)\b((?:[\w-]*token|password|client-key-data|client-certificate-data|"
                r"certificate-authority-data|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), r"\1" + REDACTED),
]


def is_json() -> bool:
    return _state["json"]


def redact_text(text: str) -> str:
    """``text`` without PEM blocks, their base64, bearer headers or ``token: ...`` assignments."""
    for pattern, replacement in _SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and _SECRET_KEYS.search(k) and isinstance(v, str | bytes) and v
                else _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value


def redact(logger: Any, method: str, event_dict: Any) -> Any:
    """A structlog processor: no credential leaves in a log line, however it got into one."""
    return _redact_value(event_dict)


def json_wanted(format: str, *, daemon: bool) -> bool:
    """``--log-format``: json, console, or auto (JSON for the daemon off a terminal)."""
    if format == "auto":
        return daemon and not sys.stderr.isatty()
    return format == "json"


def configure(*, level: str = "WARNING", json: bool | None = None, format: str = "console",
              daemon: bool = False) -> None:
    """Set up structlog and the standard library's logging once (again on a reload)."""
    json = json_wanted(format, daemon=daemon) if json is None else json
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
    else:  # tracebacks as text before redact sees them (a loader's message can quote a file)
        renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
        shared.append(structlog.processors.format_exc_info)
    shared.append(redact)
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
        print(f"kueued: {redact_text(message)}", file=sys.stderr)


def warn(message: str, *, event: str = "command_warning", **fields: Any) -> None:
    """A problem the command works around: ``kueued: warning: ...``, or one JSON event."""
    if _state["json"]:
        structlog.get_logger("kueued.cli").warning(event, error=message, **fields)
    else:
        print(f"kueued: warning: {redact_text(message)}", file=sys.stderr)


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
