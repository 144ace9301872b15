"""Is the daemon alive, is it ready, and what its metrics say: one small HTTP server.

Three questions a kubelet, systemd or Prometheus asks, answered on ``--metrics-address`` and
``--metrics-port`` (127.0.0.1 by default: the metrics name namespaces and queues, so they are
offered to the network only when asked):

- ``/healthz``: 200 while the scheduling loop completes passes (the daemon calls
  :meth:`Health.tick` at the end of every pass, idle ones too, so at least every
  ``--interval`` seconds); 503 once none has ended for ``stale_after`` seconds: a wedged
  loop, which a liveness probe should restart.  Before the first pass it answers 200: the
  first list of a big cluster takes a while, starting is not being wedged, and ``/readyz``
  says it is not ready yet.
- ``/readyz``: 503 until the first load is applied (when systemd is told READY), 200 after.
- ``/metrics``: the registry (``kueued.metrics``), in the format the scraper asks for.

:class:`Health` is plain state written by the event loop and read by the server's threads
(single attribute stores, atomic under the GIL); its clock is injected, so a test wedges the
loop by moving the clock.  The server is ``http.server`` in a thread of its own: no
dependency, and an answer never waits on the event loop (a wedged loop must still be able to
say so).  Requests are not logged: stderr is the structured log's.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["Health", "HealthServer", "STALE_AFTER", "stale_after"]

log = structlog.get_logger("kueued.health")

STALE_AFTER = 60.0
"""Seconds without a finished pass after which the loop is wedged, at the least (:func:`stale_after`)."""


START_GRACE = 5
"""Times ``stale_after`` a start may take (the first list of every kind) before ``/healthz`` fails."""


def stale_after(interval: float) -> float:
    """How long a pass may take before ``/healthz`` fails: a pass works for up to ``interval`` and
    then waits for up to ``interval``; a slow API server or a big status write add to that."""
    return max(STALE_AFTER, 4 * interval)


class Health:
    """What the daemon tells the probes: progress (:meth:`tick`), :meth:`ready`, :meth:`set_leader`."""

    def __init__(self, *, stale_after: float = STALE_AFTER, clock: Callable[[], float] = time.monotonic) -> None:
        self.stale_after = stale_after
        self.clock = clock
        self.leader = False
        self._ready = False
        self._last_tick: float | None = None
        self._started = clock()

    def tick(self) -> None:
        """A pass of the scheduling loop ended."""
        self._last_tick = self.clock()

    def ready(self) -> None:
        """The first load is applied: decisions are being made."""
        self._ready = True

    def set_leader(self, leader: bool) -> None:
        """Whether this process commits decisions (``kueued_leader``)."""
        self.leader = leader

    @property
    def is_ready(self) -> bool:
        return self._ready

    def live(self) -> tuple[bool, str]:
        """(alive, why): alive unless the last pass ended more than ``stale_after`` seconds ago."""
        last = self._last_tick
        if last is None:  # the first list may take long on a big cluster, but not for ever (a 403 on every kind)
            waited = self.clock() - self._started
            if waited > START_GRACE * self.stale_after:
                return False, f"no scheduling pass has ended since the start {waited:.0f}s ago " \
                              f"(limit {START_GRACE * self.stale_after:g}s)"
            return True, "starting: no scheduling pass has ended yet"
        age = self.clock() - last
        if age > self.stale_after:
            return False, f"no scheduling pass has ended for {age:.0f}s (limit {self.stale_after:g}s)"
        return True, f"the last scheduling pass ended {age:.1f}s ago"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "kueued"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0]
        health = self.server.health
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._answer(200, encoder(self.server.registry), content_type)
        elif path == "/healthz":
            alive, why = health.live()
            self._answer(200 if alive else 503, f"{'ok' if alive else 'wedged'}: {why}\n".encode())
        elif path == "/readyz":
            ready = health.is_ready
            self._answer(200 if ready else 503,
                         b"ok: the first load is applied\n" if ready else b"not ready: the first load is not applied\n")
        else:
            self._answer(404, b"not found: /metrics, /healthz and /readyz are served here\n")

    def _answer(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        pass


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True  # a restart binds at once (Linux still refuses a port that is listened on)
    daemon_threads = True

    def __init__(self, address: tuple[str, int], health: Health, registry: CollectorRegistry) -> None:
        self.address_family = socket.getaddrinfo(address[0], address[1], type=socket.SOCK_STREAM)[0][0]
        self.health = health
        self.registry = registry
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("health_request_failed", client=str(client_address[0]), exc_info=True)


class HealthServer:
    """Serves ``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` from a thread (port 0: any free
    one, read back from :attr:`port`).  Binding happens here: an unusable address raises ``OSError``."""

    def __init__(self, health: Health, registry: CollectorRegistry, *, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self._server = _Server((host, port), health, registry)
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="kueued-health", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> HealthServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
