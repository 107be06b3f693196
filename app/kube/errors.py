"""Typed Kubernetes API errors, built from the ``Status`` body the API server sends back.

Callers catch what they can act on (``NotFound`` on delete means done, ``Conflict`` means re-read,
``Gone`` means relist) instead of comparing status codes.
"""

from __future__ import annotations

import msgspec


class StatusDetails(msgspec.Struct, frozen=True, omit_defaults=True):
    """``Status.details``: which object the error is about (``retryAfterSeconds`` for 429/5xx)."""

    name: str | None = None
    kind: str | None = None
    retryAfterSeconds: int | None = None


class Status(msgspec.Struct, frozen=True, omit_defaults=True):
    """The ``metav1.Status`` body of a failed call (also the object of a watch ERROR event)."""

    status: str | None = None
    message: str | None = None
    reason: str | None = None
    code: int | None = None
    details: StatusDetails | None = None


class KubeError(Exception):
    """Any failure talking to the API server."""


class ApiUnavailable(KubeError):
    """The API server could not be reached (connection refused, reset, TLS failure)."""


class ApiError(KubeError):
    """The API server answered with an error status."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str = "",
        *,
        retry_after: float | None = None,
        method: str = "",
        path: str = "",
    ) -> None:
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{code} {reason or 'Error'}: {message}")


class Forbidden(ApiError):
    """403: runway's identity may not do this (RBAC); retrying the same call will not help."""


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: a resourceVersion/UID precondition failed, or the object already exists."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: create of an object that is already there."""


class Gone(ApiError):
    """410: the resourceVersion is too old (relist), or a continue token expired."""


class Invalid(ApiError):
    """422: the object or patch failed validation; retrying the same call will not help."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness; wait ``retry_after`` seconds."""


class ServerError(ApiError):
    """5xx: the API server or etcd failed; idempotent calls may be retried."""


class Timeout(ServerError):
    """504 / reason Timeout, or the request timed out on our side."""


_BY_CODE: dict[int, type[ApiError]] = {
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    504: Timeout,
}

_status_decoder = msgspec.json.Decoder(Status)


def decode_status(body: bytes) -> Status | None:
    """The ``Status`` in ``body``, or None when the body is not one (an HTML proxy page...)."""
    try:
        return _status_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # the HTTP-date form is not used by the API server
    return max(seconds, 0.0)


def error_from_status(
    code: int,
    status: Status | None,
    *,
    retry_after_header: str | None = None,
    method: str = "",
    path: str = "",
    fallback_message: str = "",
) -> ApiError:
    """The typed error for HTTP ``code`` with the decoded ``Status`` (if any)."""
    reason = (status.reason if status else None) or ""
    message = (status.message if status else None) or fallback_message or f"HTTP {code}"
    # A watch ERROR event carries the code only in the Status (the HTTP answer was a 200).
    if status is not None and status.code:
        code = status.code
    retry_after = _parse_retry_after(retry_after_header)
    if retry_after is None and status and status.details and status.details.retryAfterSeconds:
        retry_after = float(status.details.retryAfterSeconds)
    cls: type[ApiError]
    if code == 409 and reason == "AlreadyExists":
        cls = AlreadyExists
    elif reason == "Timeout" or code == 504:
        cls = Timeout
    elif code in _BY_CODE:
        cls = _BY_CODE[code]
    elif code >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(code, message, reason, retry_after=retry_after, method=method, path=path)
