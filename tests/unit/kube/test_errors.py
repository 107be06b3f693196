"""Typed API errors from Status bodies, and what the retry policy does with each."""

from __future__ import annotations

import pytest

from app.kube.errors import (
    AlreadyExists,
    ApiError,
    ApiUnavailable,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    Status,
    StatusDetails,
    Timeout,
    TooManyRequests,
    decode_status,
    error_from_status,
)
from app.kube.retry import Backoff, RetryPolicy, retrying, should_retry


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (504, "Timeout", Timeout),
        (500, "Timeout", Timeout),
        (403, "Forbidden", Forbidden),
        (401, "Unauthorized", ApiError),
    ],
)
def test_error_class_by_code_and_reason(code: int, reason: str, expected: type[ApiError]) -> None:
    err = error_from_status(code, Status(reason=reason, message="m", code=code))
    assert type(err) is expected and err.code == code and err.reason == reason


def test_message_retry_after_and_watch_status_code() -> None:
    body = (
        b'{"kind":"Status","code":429,"reason":"TooManyRequests","message":"slow",'
        b'"details":{"retryAfterSeconds":4}}'
    )
    err = error_from_status(429, decode_status(body), method="GET", path="/api/v1/pods")
    assert err.retry_after == 4.0
    assert str(err) == "GET /api/v1/pods: 429 TooManyRequests: slow"
    assert error_from_status(429, None, retry_after_header="2").retry_after == 2.0
    # A watch ERROR event arrives on a 200: the code inside the Status wins.
    assert isinstance(error_from_status(200, Status(code=410, reason="Expired")), Gone)
    assert decode_status(b"<html>bad gateway</html>") is None
    assert "HTTP 502" in str(error_from_status(502, None))
    assert StatusDetails(retryAfterSeconds=1).retryAfterSeconds == 1


@pytest.mark.parametrize(
    ("error", "idempotent", "on_conflict", "retried"),
    [
        (TooManyRequests(429, "x"), False, False, True),
        (ServerError(500, "x"), True, False, True),
        (ServerError(500, "x"), False, False, False),
        (ApiUnavailable("refused"), True, False, True),
        (Conflict(409, "x"), True, False, False),
        (Conflict(409, "x"), True, True, True),
        (NotFound(404, "x"), True, True, False),
        (Invalid(422, "x"), True, True, False),
    ],
)
def test_what_is_retried(
    error: Exception, idempotent: bool, on_conflict: bool, retried: bool
) -> None:
    assert should_retry(error, idempotent=idempotent, on_conflict=on_conflict) is retried


def test_backoff_is_jittered_and_capped() -> None:
    b = Backoff(base=1, cap=8)
    for attempt in range(10):
        d = b.delay(attempt)
        top = min(8, 2**attempt)
        assert top / 2 <= d <= top


async def test_conflicts_are_retried_when_the_call_rereads() -> None:
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise Conflict(409, "the object has been modified")
        return "ok"

    policy = RetryPolicy(total=10, backoff=Backoff(base=0.1, cap=1), sleep=sleep)
    assert await retrying(call, policy, idempotent=True, on_conflict=True) == "ok"
    assert calls == 3 and len(waits) == 2
