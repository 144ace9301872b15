"""The settings a running daemon has in force (:class:`Live`), and their reload on SIGHUP.

:mod:`kueued.config` reads and checks a file; here the daemon holds what it read, reads it again
when told, puts in force what may change in place (the scheduling sections, the log, the
interval) and keeps the rest (``RESTART_SECTIONS``) until a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import structlog

from kueued.config import RESTART_SECTIONS, Config, ConfigError, configuration_manifest, load, with_flags

__all__ = ["Live", "diff"]

log = structlog.get_logger("kueued.config")


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): value}


def diff(old: Config, new: Config) -> dict[str, tuple[Any, Any]]:
    """Each setting whose value differs, dotted (``log.level``), with its old and new values."""
    a, b = _flat(msgspec.to_builtins(old)), _flat(msgspec.to_builtins(new))
    return {k: (a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}


class Live:
    """The settings a running daemon has in force, and their reload from ``path`` (SIGHUP).

    ``flags`` are the command line's (they keep overriding the file); ``applied`` is the
    Configuration manifest the daemon last applied for the file (:func:`configuration_manifest`).
    """

    def __init__(self, path: Path, config: Config, *, flags: Mapping[str, Any]) -> None:
        self.path = path
        self.config = config
        self.flags = dict(flags)
        self.applied: dict[str, Any] | None = None

    @property
    def interval(self) -> float:
        return self.config.daemon.interval

    def configuration(self) -> dict[str, Any] | None:
        return configuration_manifest(self.config)

    def reload(self) -> dict[str, tuple[Any, Any]]:
        """Read the file again and put in force what is safe; what changed (empty when it is invalid).

        Logs ``config_reloaded`` (what changed), ``config_restart_needed`` (settings that only a
        restart applies: they keep their running values) or ``config_invalid`` (the old config stays).
        """
        try:
            new = with_flags(load(self.path), self.flags)
        except ConfigError as exc:
            log.error("config_invalid", file=str(self.path), error=str(exc))
            return {}
        old, changes = self.config, diff(self.config, new)
        restart = sorted(k for k in changes if k.split(".")[0] in RESTART_SECTIONS)
        kept = {s: getattr(self.config, s) for s in RESTART_SECTIONS}
        self.config = msgspec.structs.replace(new, **kept)
        applied = {k: list(v) for k, v in changes.items() if k not in restart}
        # At the more verbose of the two levels: an operator who turns the log down still sees it taken.
        quieter = _verbosity(self.config.log.level) > _verbosity(old.log.level)
        if quieter:
            log.info("config_reloaded", file=str(self.path), changed=applied)
        if applied.keys() & {"log.level", "log.format"}:
            from kueued.logging import configure
            configure(level=self.config.log.level, format=self.config.log.format, daemon=True)
        if not quieter:
            log.info("config_reloaded", file=str(self.path), changed=applied)
        if restart:
            log.warning("config_restart_needed", file=str(self.path), settings=restart)
        return {k: changes[k] for k in applied}


def _verbosity(level: str) -> int:
    return logging.getLevelNamesMapping()[level]
