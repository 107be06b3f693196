"""app.kubectl.render: kubectl's table layout and its ages; Go-style setting durations."""

from __future__ import annotations

from typing import Any

import pytest

from app.kubectl import render
from app.kubectl.cli import _held_by
from app.model.timestamps import format_time


def test_table_aligns_columns_three_spaces_apart_with_capital_headers() -> None:
    text = render.table(["name", "state"], [["a-long-name", "pending"], ["b", None]])
    assert text == "NAME          STATE\na-long-name   pending\nb\n"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (0, "0s"), (119, "119s"), (150, "2m30s"), (600, "10m"), (3 * 3600, "3h"),
     (3 * 3600 + 120, "3h2m"), (50 * 3600, "2d2h"), (-30, "30s")],
)  # fmt: skip
def test_duration_is_kubectls_age(seconds: float | None, shown: str) -> None:
    assert render.duration(seconds) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0s"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m"), (0.5, "0.5s")]
)
def test_setting_is_a_go_duration(seconds: float, shown: str) -> None:
    assert render.setting(seconds) == shown


def test_relative_times_say_in_or_ago() -> None:
    now = 1_800_000_000.0
    assert render.relative(format_time(now + 300), now) == "in 5m"
    assert render.relative(format_time(now - 30), now) == "30s ago"
    assert render.relative(None, now) == "-"


def test_clip_keeps_short_text_and_cuts_long_text() -> None:
    assert render.clip("a  b\nc", 10) == "a b c"
    assert render.clip("x" * 20, 5) == "xxxx…"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain-name", "plain-name"),
        ("Ünïcödé ok", "Ünïcödé ok"),
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # the window title
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # OSC 52: the clipboard
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen
        ("a\nforged   row", "a\\x0aforged   row"),  # a table row of its own
        ("evil\u202egnp.exe", "evil\\u202egnp.exe"),  # bidi override
        ("x\u2066y\u2069", "x\\u2066y\\u2069"),
        ("\x9b31m", "\\x9b31m"),  # C1 CSI
        ("a\u2028b", "a\\u2028b"),
    ],
)
def test_human_output_escapes_control_and_bidi_characters(raw: str, shown: str) -> None:
    """Issue #36: names come from tenants (an owner's name is anything the API server takes)."""
    assert render.escape(raw) == shown
    data = {"items": [{"name": raw, raw: [raw]}]}
    assert render.escaped(data) == {"items": [{"name": shown, shown: [shown]}]}


@pytest.mark.parametrize(
    ("workload", "shown"),
    [
        ({"rule": "backoff", "holdBy": "schedulingGate"}, "backoff (gate)"),
        ({"rule": "backoff", "holdBy": "filter"}, "backoff"),
        ({"rule": "", "holdBy": "schedulingGate"}, "(gate)"),  # admitted: its gate goes next
        ({"rule": ""}, "-"),  # an older runway says nothing of gates
    ],
)
def test_held_by_says_when_a_scheduling_gate_holds(workload: dict[str, Any], shown: str) -> None:
    assert _held_by(workload) == shown
