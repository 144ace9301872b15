"""A fault-injecting HTTPS proxy between kueued and the local kube-apiserver.

Why TLS-terminating.  The API server speaks only HTTPS and authenticates kueued by its
client certificate, so a plain TCP proxy could cut connections but never see a request:
no 409 on a write, no 410 on a watch resume, no "drop this watch after three events".
Two ways to see inside: give kueued a plain-HTTP URL to the proxy, or terminate TLS in the
proxy.  The first would test a kueued that is not the one users run (no TLS at all, and
``kueued.kube.client`` checks a server certificate whenever it has one).  So the proxy
terminates TLS as the API server does: it serves a certificate signed by the control
plane's CA (the API server's own serving pair, whose names are 127.0.0.1 and localhost,
exactly where the proxy listens), demands a client certificate from that CA, and
forwards to the API server over a second TLS connection that presents the ``kueued``
user's certificate.  kueued's kubeconfig differs from its usual one only in the server's
port: the same CA, the same user, verification on.

How a request flows.  Each connection from kueued gets its own upstream connection,
opened when first needed and kept alive with it.  Every request is read whole (head and
body), classified (``write``: POST, PUT, PATCH, DELETE; ``watch``: a GET with
``watch=true``; else ``read``) and one seeded draw decides its fate, the kinds that apply
to its class sharing the unit interval in a fixed order::

    write  conflict_409, throttle_429, error_500, unavailable_503, timeout, reset
    read   throttle_429, error_500, unavailable_503, timeout, reset
    watch  throttle_429, error_500, unavailable_503, reset, gone_410; if none, watch_drop

- ``conflict_409``, ``throttle_429`` (with ``Retry-After``), ``error_500``,
  ``unavailable_503``: a ``Status`` answer, as the API server writes one; nothing is
  forwarded, so nothing is written.
- ``timeout``: nothing is forwarded or answered; the connection is held until the client
  gives up (its own request timeout: 60 s for kueued) or ``timeout_hold`` passes.  Each
  one stalls whatever awaited that request for a full client timeout, so a profile caps
  them (``timeout_limit``).  Never on a watch: its read timeout is minutes long.
- ``reset``: the connection is reset (TCP RST), half of the time before the request is
  forwarded and half after the API server answered it: a write applied that the client
  will never hear of (``reset_after_upstream``).
- ``gone_410``: the watch is answered as the API server answers a compacted
  resourceVersion: 200, then one ``ERROR`` event whose Status has code 410.
- ``watch_drop``: the watch is forwarded and cut (reset) after a random time in
  ``drop_after``, events already relayed.

Concurrency makes the order in which requests reach the draw vary from run to run, so
the seed fixes the rates and the mix, not the exact sequence.  Counts by kind
(``faults``) and by class (``requests``) are what the tests record.  The proxy runs its
own asyncio loop in a thread, so a synchronous test starts and stops it like a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import ssl
import struct
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_REASONS = {409: "Conflict", 410: "Gone", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}
_STATUS_REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
_STATUS_KINDS = {"conflict_409": 409, "throttle_429": 429, "error_500": 500, "unavailable_503": 503}
_ORDER = {
    "write": ("conflict_409", "throttle_429", "error_500", "unavailable_503", "timeout", "reset"),
    "read": ("throttle_429", "error_500", "unavailable_503", "timeout", "reset"),
    "watch": ("throttle_429", "error_500", "unavailable_503", "reset", "gone_410"),
}
KINDS = ("conflict_409", "throttle_429", "error_500", "unavailable_503", "timeout", "reset", "watch_drop",
         "gone_410")


@dataclass(frozen=True)
class Profile:
    """How often each fault strikes the requests it applies to (a probability per request)."""

    rates: dict[str, float] = field(default_factory=dict)
    retry_after: int = 1
    """Seconds a 429 asks the client to wait."""
    timeout_hold: float = 65.0
    """How long a timed-out request is held at most: past kueued's 60 s request timeout."""
    timeout_limit: int | None = None
    """At most this many timeouts in all (each costs the client a whole request timeout)."""
    drop_after: tuple[float, float] = (0.2, 4.0)
    """A dropped watch lives a uniformly random time in this range, in seconds."""

    def rate(self, kind: str) -> float:
        return self.rates.get(kind, 0.0)


NONE = Profile()
HEAVY = Profile(rates={"conflict_409": 0.05, "throttle_429": 0.04, "error_500": 0.03, "unavailable_503": 0.03,
                       "timeout": 0.01, "reset": 0.20, "watch_drop": 0.5, "gone_410": 0.25},
                timeout_limit=1)
"""The issue's profile: a fifth of all requests reset, every other kind several times a run, and
one timeout (each stalls kueued for its 60 s request timeout: see docs/reliability.md)."""


@dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def kind(self) -> str:
        if self.method in WRITES:
            return "write"
        query = self.target.partition("?")[2]
        return "watch" if "watch=true" in query.split("&") or "watch=1" in query.split("&") else "read"

    def head(self) -> bytes:
        lines = [f"{self.method} {self.target} {self.version}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in ("content-length", "transfer-encoding")]
        if self.body or self.method in WRITES:
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Closed(Exception):
    """The other side went away: end this connection quietly."""


class FaultProxy:
    """``with FaultProxy(upstream, ...) as proxy:`` serves on ``proxy.url`` until the block ends."""

    def __init__(self, upstream: str, *, serving: tuple[Path, Path], ca: Path, client: tuple[Path, Path],
                 profile: Profile = NONE, seed: int = 0) -> None:
        host, _, port = upstream.removeprefix("https://").rstrip("/").rpartition(":")
        self._upstream = (host, int(port))
        self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca))
        self._server_ssl.load_cert_chain(str(serving[0]), str(serving[1]))
        self._server_ssl.verify_mode = ssl.CERT_REQUIRED  # as the API server: only the CA's users
        self._client_ssl = ssl.create_default_context(cafile=str(ca))
        self._client_ssl.load_cert_chain(str(client[0]), str(client[1]))
        self.profile = profile
        self._rng = random.Random(seed)
        self.faults: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.detail: Counter[str] = Counter()
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    # -- lifecycle (from the test's thread) ------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._main, name="fault-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._failure is not None:
            raise RuntimeError("the fault proxy did not start") from self._failure
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._shutdown)
            self._thread.join(30)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def report(self) -> dict[str, Any]:
        """What was injected, for the JSON artefact: faults by kind, requests by class."""
        return {"faults": {kind: self.faults[kind] for kind in KINDS},
                "faults_total": sum(self.faults.values()),
                "requests": dict(sorted(self.requests.items())), "requests_total": sum(self.requests.values()),
                "detail": dict(sorted(self.detail.items())), "rates": dict(self.profile.rates)}

    # -- the loop's thread -----------------------------------------------------------------------

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        loop.set_exception_handler(lambda _loop, _context: None)  # a client's failed handshake is no news
        try:
            self._server = loop.run_until_complete(asyncio.start_server(
                self._serve, "127.0.0.1", 0, ssl=self._server_ssl, ssl_handshake_timeout=10))
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"https://127.0.0.1:{port}"
        except BaseException as exc:  # reported to start(), in the test's thread
            self._failure = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _shutdown(self) -> None:
        assert self._server is not None and self._loop is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()

        async def finish() -> None:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._loop.stop()  # type: ignore[union-attr]

        self._loop.create_task(finish())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                keep, upstream = await self._handle(request, reader, writer, upstream)
                if not keep:
                    return
        except (_Closed, ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ssl.SSLError, ValueError):
            return
        except asyncio.CancelledError:  # the proxy stops: no goodbyes
            writer.transport.abort()
            return
        finally:
            self._tasks.discard(task)
            if upstream is not None:
                upstream[1].transport.abort()
            if not writer.transport.is_closing():  # what was written still reaches the client
                writer.close()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(writer.wait_closed(), 5)

    def _fate(self, kind: str) -> str | None:
        draw = self._rng.random()
        edge = 0.0
        for fault in _ORDER[kind]:
            edge += self.profile.rate(fault)
            if draw < edge:
                if fault == "timeout" and self.profile.timeout_limit is not None \
                        and self.faults["timeout"] >= self.profile.timeout_limit:
                    return None
                return fault
        if kind == "watch" and self._rng.random() < self.profile.rate("watch_drop"):
            return "watch_drop"
        return None

    async def _handle(self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
                      ) -> tuple[bool, tuple[asyncio.StreamReader, asyncio.StreamWriter] | None]:
        """Answer one request; whether the connection goes on, and the upstream connection kept."""
        kind = request.kind
        self.requests[kind] += 1
        fate = self._fate(kind)
        if fate is not None:
            self.faults[fate] += 1
        if fate in _STATUS_KINDS:
            writer.write(_status_response(_STATUS_KINDS[fate], retry_after=self.profile.retry_after))
            await writer.drain()
            return True, upstream
        if fate == "gone_410":
            writer.write(_gone_stream(request.target))
            await writer.drain()
            return False, upstream
        if fate == "timeout":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(reader.read(1), self.profile.timeout_hold)  # b"": the client gave up
            return False, upstream
        reset_after = fate == "reset" and kind == "write" and self._rng.random() < 0.5
        if fate == "reset" and not reset_after:
            _reset(writer)
            return False, upstream
        if upstream is None:
            upstream = await asyncio.open_connection(*self._upstream, ssl=self._client_ssl,
                                                     server_hostname=self._upstream[0])
        up_reader, up_writer = upstream
        up_writer.write(request.head() + request.body)
        await up_writer.drain()
        if reset_after:
            await _read_response(up_reader, request.method, sink=None)  # applied; the answer is lost
            self.detail["reset_after_upstream"] += 1
            _reset(writer)
            return False, None
        if kind == "watch":
            deadline = self._rng.uniform(*self.profile.drop_after) if fate == "watch_drop" else None
            await self._relay_watch(up_reader, reader, writer, deadline)
            return False, None  # a watch's connection is never reused (see _relay_watch)
        keep = await _read_response(up_reader, request.method, sink=writer)
        await writer.drain()
        return keep, (upstream if keep else None)

    async def _relay_watch(self, up_reader: asyncio.StreamReader, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter, deadline: float | None) -> None:
        """Relay a watch until it ends, the client leaves, or ``deadline`` seconds pass (then reset).

        The client's side is watched for its end (kueued cutting a dead stream, or exiting);
        since that read could swallow the first byte of a next request, the connection is
        closed after every watch instead of kept.
        """
        relay = asyncio.ensure_future(_read_response(up_reader, "GET", sink=writer))
        left = asyncio.ensure_future(reader.read(1))
        try:
            done, _ = await asyncio.wait({relay, left}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                _reset(writer)
            elif relay in done:
                relay.result()
                await writer.drain()
        finally:
            for task in (relay, left):
                task.cancel()
            await asyncio.gather(relay, left, return_exceptions=True)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0), as a crashed peer or a middlebox would."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None  # the client closed between requests
        raise _Closed from exc


def _parse_headers(lines: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for line in lines:
        name, _, value = line.partition(":")
        out.append((name.strip(), value.strip()))
    return out


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    head = await _read_head(reader)
    if head is None:
        return None
    first, *rest = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    method, target, version = first.split(" ", 2)
    headers = _parse_headers(rest)
    if (_header(headers, "transfer-encoding") or "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
        data = bytes(body)
    else:
        data = await reader.readexactly(int(_header(headers, "content-length") or 0))
    return _Request(method, target, version, headers, data)


async def _read_response(reader: asyncio.StreamReader, method: str, *, sink: asyncio.StreamWriter | None) -> bool:
    """Read one response from upstream, relaying it to ``sink`` as it comes; whether the upstream
    connection can carry another request."""
    head = await _read_head(reader)
    if head is None:
        raise _Closed
    if sink is not None:
        sink.write(head)
    first, *rest = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    status = int(first.split(" ", 2)[1])
    headers = _parse_headers(rest)
    closing = (_header(headers, "connection") or "").lower() == "close"
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return not closing
    if (_header(headers, "transfer-encoding") or "").lower() == "chunked":
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if sink is not None:
                sink.write(size_line + chunk)
                await sink.drain()
            if size == 0:
                return not closing
    length = _header(headers, "content-length")
    if length is not None:
        body = await reader.readexactly(int(length))
        if sink is not None:
            sink.write(body)
        return not closing
    while chunk := await reader.read(65536):  # framed by the end of the connection
        if sink is not None:
            sink.write(chunk)
            await sink.drain()
    return False


def _status(code: int, message: str, **extra: Any) -> bytes:
    reason = _STATUS_REASONS.get(code, "Expired" if code == 410 else "Unknown")
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code, **extra}
    return json.dumps(body).encode()


def _status_response(code: int, *, retry_after: int) -> bytes:
    extra: dict[str, Any] = {}
    headers = ["Content-Type: application/json", "Cache-Control: no-cache, private"]
    if code == 429:
        extra["details"] = {"retryAfterSeconds": retry_after}
        headers.append(f"Retry-After: {retry_after}")
    body = _status(code, f"injected by the fault proxy: {code} {_REASONS[code]}", **extra)
    head = f"HTTP/1.1 {code} {_REASONS[code]}\r\n" + "".join(f"{h}\r\n" for h in headers)
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _gone_stream(target: str) -> bytes:
    """The API server's answer to a watch from a compacted resourceVersion: 200, one ERROR event."""
    query = dict(p.partition("=")[::2] for p in target.partition("?")[2].split("&") if p)
    event = json.dumps({"type": "ERROR", "object": json.loads(_status(
        410, f"too old resource version: {query.get('resourceVersion', '')} (injected by the fault proxy)"))})
    line = (event + "\n").encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + f"{len(line):x}\r\n".encode() + line + b"\r\n0\r\n\r\n")
