"""Kubernetes timestamps (RFC 3339, ``2026-11-22T04:19:23Z``) to and from Unix seconds."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Final

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

MAX_TIME: Final = 2.0**37
"""A time past this (year ~6325) is not one runway wrote."""


def parse_time(value: str | None) -> float | None:
    """Unix seconds of an RFC 3339 timestamp; None for None or an unparsable value."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse_stored_time(value: object) -> float | None:
    """A time runway could have written (RFC 3339, from 1970 to ``MAX_TIME``), else None: the
    one lenient reader of stored times (records, annotations), which never raises."""
    if not isinstance(value, str):
        return None
    parsed = parse_time(value.strip())
    if parsed is None or not math.isfinite(parsed) or not 0 <= parsed <= MAX_TIME:
        return None
    return parsed


def format_time(seconds: float) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix, second precision (as the API server writes it).
    ``ValueError`` for a time no RFC 3339 year (1-9999) can hold."""
    return _format_second(math.floor(seconds))


@lru_cache(maxsize=4096)
def _format_second(second: int) -> str:
    # Memoised per second (a preemption's decision record formats two times per victim, the
    # same ones call after call) and without strftime (half the cost). Not ``time.gmtime``:
    # policy code uses this module, and policy may not reach the clock's module.
    try:
        d = _EPOCH + timedelta(seconds=second)
    except OverflowError as exc:
        raise ValueError(f"time {second} out of range") from exc
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}Z"


def format_optional_time(seconds: float | None) -> str | None:
    """``format_time`` for a time that may be unknown (None) or unbounded (infinite): None."""
    return format_time(seconds) if seconds is not None and math.isfinite(seconds) else None
