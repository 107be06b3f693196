"""Kubernetes timestamps (RFC 3339, ``2026-11-22T04:19:23Z``) to and from Unix seconds."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def parse_time(value: str | None) -> float | None:
    """Unix seconds of an RFC 3339 timestamp; None for None or an unparsable value."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(seconds: float) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix, second precision (as the API server writes it)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_optional_time(seconds: float | None) -> str | None:
    """``format_time`` for a time that may be unknown (None) or unbounded (infinite): None."""
    return format_time(seconds) if seconds is not None and math.isfinite(seconds) else None
