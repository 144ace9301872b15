"""wrap(): every failure the Kubernetes client raises becomes one of kueued's ApiError types."""

from __future__ import annotations

import json
import ssl

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException
from multidict import CIMultiDict, CIMultiDictProxy

from kueued.errors import KueuedError
from kueued.kube.errors import (
    ApiConflict,
    ApiError,
    ApiForbidden,
    ApiGone,
    ApiInvalid,
    ApiNotFound,
    ApiUnavailable,
    from_status,
    wrap,
    wrapped,
)


def _status(code: int, reason: str, message: str = "", **details: object) -> bytes:
    body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                               "reason": reason, "message": message}
    if details:
        body["details"] = details
    return json.dumps(body).encode()


def _api_exception(status: int, body: bytes | str | None, headers: dict[str, str] | None = None,
                   http_reason: str = "") -> ApiException:
    exc = ApiException(status=status, reason=http_reason)
    exc.body = body  # type: ignore[assignment]  # the client sets bytes, then decodes to str before raising
    exc.headers = CIMultiDictProxy(CIMultiDict(headers or {}))
    return exc


@pytest.mark.parametrize(("status", "reason", "expected"), [
    pytest.param(409, "Conflict", ApiConflict, id="409-conflict"),
    pytest.param(409, "AlreadyExists", ApiConflict, id="409-already-exists"),
    pytest.param(404, "NotFound", ApiNotFound, id="404"),
    pytest.param(410, "Expired", ApiGone, id="410"),
    pytest.param(403, "Forbidden", ApiForbidden, id="403"),
    pytest.param(422, "Invalid", ApiInvalid, id="422"),
    pytest.param(429, "TooManyRequests", ApiUnavailable, id="429"),
    pytest.param(500, "InternalError", ApiUnavailable, id="500"),
    pytest.param(503, "ServiceUnavailable", ApiUnavailable, id="503"),
    pytest.param(504, "Timeout", ApiUnavailable, id="504"),
    pytest.param(400, "BadRequest", ApiError, id="400-plain"),
    pytest.param(401, "Unauthorized", ApiError, id="401-plain"),
])
def test_an_api_exception_maps_by_status_with_the_status_fields(status, reason, expected) -> None:
    original = _api_exception(status, _status(status, reason, "the words"))
    err = wrap(original)
    assert type(err) is expected
    assert isinstance(err, KueuedError)
    assert (err.status, err.reason, err.message) == (status, reason, "the words")
    assert err.object is not None and err.object["code"] == status
    assert err.__cause__ is original


def test_a_body_that_is_not_a_status_keeps_the_http_reason_and_the_text() -> None:
    err = wrap(_api_exception(502, b"<html>bad gateway</html>", http_reason="Bad Gateway"))
    assert isinstance(err, ApiUnavailable)
    assert (err.status, err.reason, err.message, err.object) == (502, "Bad Gateway", "<html>bad gateway</html>", None)


@pytest.mark.parametrize(("headers", "details", "expected"), [
    pytest.param({"Retry-After": "7"}, {}, 7.0, id="header"),
    pytest.param({}, {"retryAfterSeconds": 3}, 3.0, id="status-details"),
    pytest.param({"Retry-After": "2"}, {"retryAfterSeconds": 9}, 2.0, id="header-wins"),
    pytest.param({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, {}, None, id="http-date-ignored"),
    pytest.param({}, {}, None, id="none"),
])
def test_a_429_carries_retry_after(headers, details, expected) -> None:
    err = wrap(_api_exception(429, _status(429, "TooManyRequests", **details), headers))
    assert isinstance(err, ApiUnavailable)
    assert err.retry_after == expected


def test_a_string_body_is_read_like_bytes() -> None:
    # kubernetes_asyncio decodes the body to str before raising
    err = wrap(_api_exception(409, _status(409, "Conflict", "stale").decode()))
    assert isinstance(err, ApiConflict) and err.message == "stale"


def test_a_client_side_api_exception_has_no_status() -> None:
    err = wrap(ApiException(status=0, reason="cannot prepare a request"))
    assert type(err) is ApiError and err.status is None and err.reason == "ClientError"


def _connector_error() -> aiohttp.ClientConnectorError:
    key = aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 1, True, True, None, None, None)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connection refused"))


@pytest.mark.parametrize(("make", "reason"), [
    pytest.param(_connector_error, "ConnectionError", id="refused"),
    pytest.param(lambda: aiohttp.ServerDisconnectedError(), "ConnectionError", id="disconnected"),
    pytest.param(lambda: aiohttp.ClientPayloadError("truncated"), "PayloadError", id="payload"),
    pytest.param(lambda: aiohttp.ServerTimeoutError("read timed out"), "Timeout", id="sock-read-timeout"),
    pytest.param(lambda: TimeoutError(), "Timeout", id="timeout"),  # asyncio.TimeoutError is this one
    pytest.param(lambda: ssl.SSLError("bad cert"), "TLSError", id="tls"),
    pytest.param(lambda: ConnectionResetError(104, "reset"), "ConnectionError", id="os-reset"),
])
def test_no_response_at_all_is_unavailable(make, reason) -> None:
    original = make()
    err = wrap(original)
    assert isinstance(err, ApiUnavailable)
    assert (err.status, err.reason, err.retry_after) == (None, reason, None)
    assert err.__cause__ is original


def test_an_aiohttp_response_error_maps_by_status() -> None:
    original = aiohttp.ClientResponseError(None, (), status=409, message="Conflict")  # type: ignore[arg-type]
    assert isinstance(wrap(original), ApiConflict)


def test_an_api_error_is_returned_as_it_is() -> None:
    err = ApiGone(410, "Expired")
    assert wrap(err) is err


def test_wrapped_raises_from_the_original() -> None:
    original = _api_exception(404, _status(404, "NotFound", "no such"))
    with pytest.raises(ApiNotFound) as caught, wrapped():
        raise original
    assert caught.value.__cause__ is original


def test_wrapped_leaves_other_errors_alone() -> None:
    with pytest.raises(KeyError), wrapped():
        raise KeyError("not an API failure")


@pytest.mark.parametrize(("obj", "expected", "status"), [
    pytest.param({"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"},
                 ApiGone, 410, id="gone"),
    pytest.param({"kind": "Status", "code": 500, "reason": "InternalError"}, ApiUnavailable, 500, id="internal"),
    pytest.param({"kind": "Status", "reason": "Unknown"}, ApiUnavailable, None, id="no-code"),
])
def test_a_watch_error_event_becomes_its_error(obj, expected, status) -> None:
    err = from_status(None, obj)
    assert type(err) is expected and err.status == status and err.object == obj
