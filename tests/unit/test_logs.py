"""``app.logs``: the debug switch the verbs check before building their per-call line."""

from __future__ import annotations

import pytest

from app.config.model import LoggingConfig
from app.logs import configure_logging, debug_enabled


@pytest.mark.parametrize(
    ("level", "debug"), [("debug", True), ("info", False), ("warning", False), ("error", False)]
)
def test_debug_is_enabled_only_at_the_debug_level(level: str, debug: bool) -> None:
    try:
        configure_logging(LoggingConfig(level=level))
        assert debug_enabled() is debug
    finally:
        configure_logging(LoggingConfig())
