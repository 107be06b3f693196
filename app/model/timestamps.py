"""Kubernetes timestamps (RFC 3339, ``2026-11-22T04:19:23Z``) to and from Unix seconds."""

from __future__ import annotations

import math
import time
from datetime import datetime
from functools import lru_cache


def parse_time(value: str | None) -> float | None:
    """Unix seconds of an RFC 3339 timestamp; None for None or an unparsable value."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(seconds: float) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix, second precision (as the API server writes it).
    ``ValueError`` for a time no RFC 3339 year (1-9999) can hold."""
    return _format_second(math.floor(seconds))


@lru_cache(maxsize=4096)
def _format_second(second: int) -> str:
    # time.gmtime and an f-string: half the cost of datetime.strftime, and a preemption's
    # decision record formats two times per victim (the same ones, call after call).
    try:
        t = time.gmtime(second)
    except (OverflowError, OSError) as exc:
        raise ValueError(f"time {second} out of range") from exc
    if not 1 <= t.tm_year <= 9999:
        raise ValueError(f"time {second} out of range")
    return (
        f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
        f"T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}Z"
    )


def format_optional_time(seconds: float | None) -> str | None:
    """``format_time`` for a time that may be unknown (None) or unbounded (infinite): None."""
    return format_time(seconds) if seconds is not None and math.isfinite(seconds) else None
