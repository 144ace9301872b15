"""The API server's refusals and failures, as kueued's own error types.

Everything the Kubernetes client raises (``kubernetes_asyncio``'s ``ApiException``,
aiohttp's connection and payload errors, a read that timed out) is turned into one of
these by :func:`wrap` and raised ``from`` the original, so the rest of kueued matches on
types and typed fields and never imports the client (kopf's ``clients/errors.py``)::

    ApiError                 status, reason, message, object (the Status body, if any)
      ApiConflict    409     a stale resourceVersion (or the object already exists)
      ApiNotFound    404     no such object, or the kind is not served (its CRD is missing)
      ApiGone        410     the resourceVersion asked for has been compacted: list again
      ApiForbidden   403     RBAC says no
      ApiInvalid     422     the object was refused by validation
      ApiUnavailable         429, 5xx, no connection, a timeout: try again (``retry_after``)

``status`` is None when no HTTP response was had at all (connection refused, a timeout).
``reason`` is Kubernetes' machine-readable reason (``Conflict``, ``Expired``,
``TooManyRequests``) when the server sent a ``Status``, else the HTTP reason phrase or a
short name for what went wrong locally.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import aiohttp
import msgspec
from kubernetes_asyncio.client.exceptions import ApiException

from kueued.errors import KueuedError

__all__ = ["ApiError", "ApiConflict", "ApiNotFound", "ApiGone", "ApiForbidden", "ApiInvalid",
           "ApiUnavailable", "KubeConfigError", "wrap", "wrapped", "from_status"]


class ApiError(KueuedError):
    """The API server refused a request, or could not be asked."""

    def __init__(self, status: int | None, reason: str, message: str = "",
                 object: dict[str, Any] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.object = object
        super().__init__(f"{status if status is not None else 'no response'} {reason}: {message}".rstrip(": "))


class ApiConflict(ApiError):
    """409: the object changed since the resourceVersion we wrote against (or already exists)."""


class ApiNotFound(ApiError):
    """404: no such object, or its kind is not served at all."""


class ApiGone(ApiError):
    """410: the resourceVersion is too old (etcd compacted it); only a new list can resume."""


class ApiForbidden(ApiError):
    """403: not allowed by RBAC."""


class ApiInvalid(ApiError):
    """422: refused by the API server's validation."""


class ApiUnavailable(ApiError):
    """Worth retrying: throttled (429), a server error (5xx), no connection, or a timeout."""

    def __init__(self, status: int | None, reason: str, message: str = "",
                 object: dict[str, Any] | None = None, *,
                 retry_after: float | None = None) -> None:
        super().__init__(status, reason, message, object)
        self.retry_after = retry_after


class KubeConfigError(KueuedError):
    """No usable cluster configuration: no kubeconfig and not in a pod, or a broken one."""


_BY_STATUS: dict[int, type[ApiError]] = {403: ApiForbidden, 404: ApiNotFound, 409: ApiConflict, 410: ApiGone,
                                         422: ApiInvalid, 429: ApiUnavailable}


def _class_for(status: int | None) -> type[ApiError]:
    if status is None or status >= 500:
        return ApiUnavailable
    return _BY_STATUS.get(status, ApiError)


def from_status(status: int | None, body: Any, *, http_reason: str = "",
                headers: Mapping[str, str] | None = None) -> ApiError:
    """The error for an HTTP status and its body (a ``Status`` object, raw bytes, or nothing).

    Also reads the ``ERROR`` event of a watch, whose object is a ``Status`` with a ``code``.
    """
    obj = _decode(body)
    if status is None and obj is not None and isinstance(obj.get("code"), int):
        status = obj["code"]
    reason = http_reason
    message = ""
    if obj is not None:
        reason = str(obj.get("reason") or reason)
        message = str(obj.get("message") or "")
    elif isinstance(body, bytes | str) and body:
        message = (body.decode(errors="replace") if isinstance(body, bytes) else body)[:500]
    cls = _class_for(status)
    if cls is ApiUnavailable:
        return ApiUnavailable(status, reason or "Unavailable", message, obj,
                              retry_after=_retry_after(headers, obj))
    return cls(status, reason or "Error", message, obj)


def wrap(exc: BaseException) -> ApiError:
    """kueued's error for what the client raised; its ``__cause__`` is ``exc`` (``raise wrap(e) from e``)."""
    if isinstance(exc, ApiError):
        return exc
    err: ApiError
    if isinstance(exc, ApiException):
        status = exc.status if isinstance(exc.status, int) and exc.status > 0 else None
        if status is None:  # raised by the client itself, before or without a response
            err = ApiError(None, "ClientError", str(exc.reason or ""))
        else:
            err = from_status(status, exc.body, http_reason=str(exc.reason or ""), headers=exc.headers)
    elif isinstance(exc, aiohttp.ClientResponseError):
        err = from_status(exc.status, None, http_reason=exc.message, headers=exc.headers)
    elif isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        err = ApiUnavailable(None, "Timeout", str(exc) or "the API server did not answer in time")
    elif isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError):
        err = ApiUnavailable(None, "TLSError", str(exc))
    elif isinstance(exc, aiohttp.ClientPayloadError):
        err = ApiUnavailable(None, "PayloadError", str(exc))
    elif isinstance(exc, aiohttp.ClientError | ConnectionError | OSError):
        err = ApiUnavailable(None, "ConnectionError", str(exc) or type(exc).__name__)
    else:
        err = ApiError(None, type(exc).__name__, str(exc))
    err.__cause__ = exc
    return err


_WRAPPED = (ApiException, aiohttp.ClientError, TimeoutError, OSError)


@contextmanager
def wrapped() -> Iterator[None]:
    """Raise what the client raises inside as :class:`ApiError`, ``from`` the original."""
    try:
        yield
    except _WRAPPED as exc:
        raise wrap(exc) from exc


def _decode(body: Any) -> dict[str, Any] | None:
    if isinstance(body, dict):
        return body
    if not isinstance(body, bytes | str) or not body:
        return None
    try:
        obj = msgspec.json.decode(body.encode() if isinstance(body, str) else body)
    except msgspec.DecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _retry_after(headers: Mapping[str, str] | None, obj: dict[str, Any] | None) -> float | None:
    """Seconds the server asked us to wait: the Retry-After header, else the Status' retryAfterSeconds."""
    if headers is not None:
        value = headers.get("Retry-After")
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                pass  # an HTTP date: Kubernetes never sends one; fall through to the body
    details = obj.get("details") if obj is not None else None
    if isinstance(details, dict) and isinstance(details.get("retryAfterSeconds"), int | float):
        return max(0.0, float(details["retryAfterSeconds"]))
    return None
