"""Telling systemd how the daemon is doing: sd_notify(3), written again in a few lines.

Why.  ``systemd/kueued.service`` is ``Type=notify`` with a watchdog: systemd counts the
service started only when it says ``READY=1``, shows its ``STATUS=`` line in ``systemctl
status``, kills and restarts it when ``WATCHDOG=1`` stops coming for ``WatchdogSec``, and
knows a stop is under way from ``STOPPING=1``.  libsystemd is not needed for that: the
protocol is one datagram of ``KEY=value`` lines to the AF_UNIX socket named by
``$NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace).

How the daemon uses it (``actors.daemon``): READY once every actor runs and the first load is
applied; STATUS after each pass when it changed; WATCHDOG from the scheduling loop itself, at
the end of every pass and between rounds when :meth:`Notifier.watchdog_due`, with its idle waits
cut to half the watchdog period (:attr:`Notifier.ping_every`), never from a timer task of its
own: a loop that wedges stops pinging and systemd kills it.  STOPPING on shutdown.

A notification is best effort: outside systemd (no ``$NOTIFY_SOCKET``) every call is a no-op,
and a send that fails (socket gone, queue full) is logged once and dropped, never raised and
never waited for: the scheduling loop must not block on its supervisor.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping

import structlog

__all__ = ["Notifier", "sd_notify"]

log = structlog.get_logger("kueued.notify")


class Notifier:
    """One service's channel to systemd, configured from ``environ`` (``os.environ`` by default)."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, clock: Callable[[], float] = time.monotonic,
                 pid: int | None = None) -> None:
        env = os.environ if environ is None else environ
        self.clock = clock
        self.address = _address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog_usec = _watchdog_usec(env, os.getpid() if pid is None else pid) if self.address else None
        self._sock: socket.socket | None = None
        self._last_ping: float | None = None
        self._last_status: str | None = None
        self._failing: str | None = None  # the last send error, logged once until a send works

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def ping_every(self) -> float | None:
        """Seconds between two watchdog pings (half the period, as sd_watchdog_enabled(3) advises), or None."""
        return None if self.watchdog_usec is None else self.watchdog_usec / 2_000_000

    def send(self, *assignments: str) -> bool:
        """Send ``KEY=value`` lines in one datagram; True if it left."""
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sock.setblocking(False)  # a full queue drops the message, it never stalls the loop
            self._sock.sendto("\n".join(assignments).encode(), self.address)
        except OSError as exc:
            what = type(exc).__name__
            if self._failing != what:
                log.warning("sd_notify_failed", error=what, detail=exc.strerror or str(exc))
                self._failing = what
            return False
        self._failing = None
        return True

    def ready(self, status: str | None = None) -> bool:
        """Startup is finished (with the first STATUS in the same datagram)."""
        if status is not None:
            self._last_status = status
        return self.send("READY=1", *([f"STATUS={status}"] if status is not None else []))

    def status(self, text: str) -> bool:
        """The line ``systemctl status`` shows; sent only when it changed."""
        if text == self._last_status:
            return False
        self._last_status = text
        return self.send(f"STATUS={text}")

    def watchdog(self) -> bool:
        """The scheduling loop is alive (only when systemd asked for it: ``$WATCHDOG_USEC``)."""
        if self.watchdog_usec is None:
            return False
        self._last_ping = self.clock()
        return self.send("WATCHDOG=1")

    def watchdog_due(self) -> bool:
        """Whether half a watchdog period has passed since the last ping (a long pass pings midway)."""
        every = self.ping_every
        return every is not None and (self._last_ping is None or self.clock() - self._last_ping >= every)

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _address(value: str) -> str | None:
    """A path, or ``@name`` for the abstract namespace; anything else (vsock:, empty) is not ours."""
    if value.startswith("@"):
        return "\0" + value[1:]
    return value if value.startswith("/") else None


def _watchdog_usec(env: Mapping[str, str], pid: int) -> int | None:
    """$WATCHDOG_USEC when it is meant for this process ($WATCHDOG_PID absent or ours), else None."""
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
        owner = int(env["WATCHDOG_PID"]) if env.get("WATCHDOG_PID") else pid
    except ValueError:
        return None
    return usec if usec > 0 and owner == pid else None


def sd_notify(state: str) -> bool:
    """One notification, from ``$NOTIFY_SOCKET`` as it is now; a no-op (False) outside systemd."""
    notifier = Notifier()
    try:
        return notifier.send(*state.splitlines())
    finally:
        notifier.close()
