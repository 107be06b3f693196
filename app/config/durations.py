"""Durations written the Go way (``"90s"``, ``"1h30m"``, ``"1.5s"``), plus ``d`` and ``w``.

KAI's plugin arguments use go-str2duration (Go's ``time.ParseDuration`` with days and weeks), so
runway accepts the same strings. Unlike KAI, a bad or negative value is a config error, not a
silent ``0s``: an administrator who typed ``"1h2"`` should learn it at startup.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, ValidationInfo, WithJsonSchema

from app.config.section import written

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w)")


def _bare_number_hint(value: float) -> str:
    text = f"{value:g}"
    return (
        f'a duration needs a unit, as Kueue and KAI write them: write "{text}s" for {text} '
        'seconds (or "5m", "1h30m")'
    )


def parse_duration(text: str) -> float:
    """Parse a Go-style duration into seconds; raises ``ValueError`` naming the bad input.

    ``"0"`` is accepted as zero (as Go does); every other number needs a unit.
    """
    s = text.strip()
    if s in ("0", "+0"):
        return 0.0
    if s.startswith("-"):
        raise ValueError(f'duration {text!r} is negative; use a positive value or "0s"')
    body = s[1:] if s.startswith("+") else s
    if not body:
        raise ValueError(f"invalid duration {text!r}: empty")
    pos, total = 0, 0.0
    while pos < len(body):
        m = _PART.match(body, pos)
        if not m and re.fullmatch(r"\d+(\.\d*)?|\.\d+", body):
            raise ValueError(f"invalid duration {text!r}: {_bare_number_hint(float(body))}")
        if not m:
            raise ValueError(
                f"invalid duration {text!r}: expected <number><unit> with unit one of "
                'ns, us, ms, s, m, h, d, w (e.g. "90s", "1h30m", "2d")'
            )
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


def format_duration(seconds: float) -> str:
    """Format seconds as a Go-style duration (``"1h30m0s"`` style, trimmed): ``5400 -> "1h30m"``."""
    if seconds == 0:
        return "0s"
    out, rest = [], seconds
    for unit, size in (("h", 3600.0), ("m", 60.0)):
        n = int(rest // size)
        if n:
            out.append(f"{n}{unit}")
            rest -= n * size
    if not out and rest < 1 and round(rest * 1000, 6).is_integer():
        return f"{round(rest * 1000)}ms"  # sub-second settings read as Go writes them: "20ms"
    if rest or not out:
        out.append(f"{rest:g}s")
    return "".join(out)


def _coerce(value: Any, info: ValidationInfo) -> float:
    if isinstance(value, bool):
        raise ValueError(f'expected a duration string such as "90s", got {value!r}')
    if isinstance(value, int | float):
        if written(info):
            raise ValueError(_bare_number_hint(value))
        if value < 0:
            raise ValueError(f"duration {value!r} is negative")
        return float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, str):
        return parse_duration(value)
    raise ValueError(f'expected a duration string such as "90s", got {value!r}')


# A Go duration (go-str2duration: Go's units plus d and w), or "0"; the schema the Helm chart
# checks values against uses it too.
DURATION_PATTERN = r"^([+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w))+|[+]?0)$"

Duration = Annotated[
    float,
    BeforeValidator(_coerce),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": DURATION_PATTERN,
            "examples": ["90s", "10m", "1h30m", "2d", "1w"],
        }
    ),
]
"""A duration field in the config: written as a Go duration string, held as seconds.

Python code may pass seconds (a number); a file may not (``section.WRITTEN``)."""
