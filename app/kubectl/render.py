"""Output like kubectl's: aligned tables (``-o wide`` adds columns), JSON, YAML; times as ages."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any

import yaml

from app.model.timestamps import parse_time

Row = Sequence[object]


def escape(text: str) -> str:
    """``text`` safe to print on a terminal: control characters (an ESC that sets the window
    title, writes the clipboard (OSC 52) or clears the screen; a newline that forges a table
    row), format characters (bidi overrides that reorder what is shown) and line separators
    written as escapes (``\\x1b``, ``\\u202e``), as ``-o json`` does. Names and reasons come from
    whoever may create pods and owners: none of them reaches the terminal raw."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    if unicodedata.category(ch) == "Zs":  # a space of another width: shown, harmless
        return ch
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def escaped(data: Any) -> Any:
    """``data`` (a JSON answer) with every string ``escape``d, keys too: what the human
    formats (tables, ``explain``) print from."""
    if isinstance(data, str):
        return escape(data)
    if isinstance(data, list):
        return [escaped(v) for v in data]
    if isinstance(data, dict):
        return {escape(k) if isinstance(k, str) else k: escaped(v) for k, v in data.items()}
    return data


def table(headers: Sequence[str], rows: Sequence[Row]) -> str:
    """Columns left-aligned and three spaces apart, headers in capitals (kubectl's layout)."""
    cells = [[str(h).upper() for h in headers]] + [
        ["" if c is None else str(c) for c in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines) + "\n"


def as_json(data: Any) -> str:
    """Indented JSON, keys in the API's order."""
    return json.dumps(data, indent=2) + "\n"


def as_yaml(data: Any) -> str:
    """Block YAML, keys in the API's order."""
    text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return text


def duration(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3h5m``, ``2d4h`` (kubectl's AGE style); ``-`` for None."""
    if seconds is None:
        return "-"
    s = int(abs(seconds))
    if s < 120:
        return f"{s}s"
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 600:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if d < 2:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    return f"{d}d{h % 24}h" if h % 24 else f"{d}d"


def setting(seconds: float) -> str:
    """A configured duration as Go writes it, exactly: ``1h30m``, ``10m``, ``45s``, ``0s``."""
    s = round(seconds, 3)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    out = (f"{int(h)}h" if h else "") + (f"{int(m)}m" if m else "")
    if sec or not out:
        out += f"{sec:g}s"
    return out


def relative(when: str | None, now: float) -> str:
    """An RFC 3339 time as ``in 5m`` or ``5m ago``; ``-`` when absent."""
    t = parse_time(when)
    if t is None:
        return "-"
    if t >= now:
        return f"in {duration(t - now)}"
    return f"{duration(now - t)} ago"


def age(when: float | str | None, now: float) -> str:
    """How long ago (Unix seconds or RFC 3339); ``-`` when absent."""
    t = parse_time(when) if isinstance(when, str) else when
    return duration(max(now - t, 0.0)) if t is not None else "-"


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
