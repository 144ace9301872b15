"""Errors of the local control plane: a build that failed, a process that would not come up."""

from __future__ import annotations

from pathlib import Path

from kueued.errors import KueuedError


class BuildError(KueuedError):
    """Building a control-plane binary failed; ``log`` holds the go command's full output."""

    def __init__(self, what: str, *, log: Path | None = None, tail: str = "") -> None:
        self.what = what
        self.log = log
        self.tail = tail
        where = f" (full log: {log})" if log else ""
        super().__init__(f"{what}{where}" + (f"\n{tail}" if tail else ""))


class GoNotFound(BuildError):
    """No ``go`` command, and the binaries are not cached: nothing can be built."""


class ControlPlaneError(KueuedError):
    """etcd or kube-apiserver died or did not become ready; ``tail`` is the end of its log."""

    def __init__(self, component: str, reason: str, *, log: Path | None = None, tail: str = "") -> None:
        self.component = component
        self.reason = reason
        self.log = log
        self.tail = tail
        where = f"; log: {log}" if log else ""
        super().__init__(f"{component}: {reason}{where}" + (f"\n--- last lines ---\n{tail}" if tail else ""))


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log, for error messages; empty if there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
