"""``app.logs``: the debug switch the verbs check before building their per-call line."""

from __future__ import annotations

import pytest

from app.config.model import LoggingConfig
from app.logs import RateLimitedWarnings, configure_logging, debug_enabled


@pytest.mark.parametrize(
    ("level", "debug"), [("debug", True), ("info", False), ("warning", False), ("error", False)]
)
def test_debug_is_enabled_only_at_the_debug_level(level: str, debug: bool) -> None:
    try:
        configure_logging(LoggingConfig(level=level))
        assert debug_enabled() is debug
    finally:
        configure_logging(LoggingConfig())


class _Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, object]]] = []

    def warning(self, event: str, **fields: object) -> None:
        self.lines.append((event, fields))


def test_rate_limited_warnings_log_once_per_interval_per_key_and_count_the_rest() -> None:
    now = [100.0]
    out = _Recorder()
    warn = RateLimitedWarnings(out, 10.0, monotonic=lambda: now[0])  # type: ignore[arg-type]
    assert warn.warning("filter:400", "refused", status=400)
    assert not warn.warning("filter:400", "refused", status=400)  # within 10 s: counted
    assert not warn.warning("filter:400", "refused", status=400)
    assert warn.warning("preempt:400", "refused", status=400)  # another key: its own budget
    now[0] = 110.0
    assert warn.warning("filter:400", "refused", status=400)
    assert out.lines == [
        ("refused", {"status": 400}),
        ("refused", {"status": 400}),
        ("refused", {"status": 400, "suppressed": 2}),
    ]
