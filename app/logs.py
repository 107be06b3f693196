"""Structured logging with structlog: human-readable text or one JSON object per line.

Every line goes through structlog's processors, stdlib loggers' too (uvicorn's, the
``kubernetes`` package's, Python warnings): their records are rendered by a
``structlog.stdlib.ProcessorFormatter`` on the root handler, so in JSON mode a log pipeline never
meets a plain-text line. uvicorn must then be started with ``log_config=None`` (it would install
its own text handlers otherwise).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

import structlog

from app.config import LoggingConfig

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (not at configure time): a replaced stderr,
    such as pytest's capture after an in-process CLI run, must not leave loggers pointing at a
    closed file."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _component_from_logger(
    _logger: object, _method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """A stdlib record's logger name as the ``component`` field runway's own lines carry."""
    record = event.get("_record")
    if record is not None:
        event.setdefault("component", record.name)
    return event


_debug = False


def debug_enabled() -> bool:
    """Whether debug lines are written: a hot path checks before it builds one (a disabled
    structlog call still costs a few µs through the lazy logger proxy)."""
    return _debug


def configure_logging(config: LoggingConfig) -> None:
    """Route structlog and stdlib loggers (uvicorn's...) to stderr at the configured level, all
    rendered alike (text or JSON)."""
    global _debug
    level = _LEVELS[config.level]
    _debug = level <= logging.DEBUG
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if config.format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamper,
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Filtering bound loggers make a disabled debug call nearly free on the hot path.
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.stdlib.add_log_level,
                _component_from_logger,
                timestamper,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(max(level, logging.INFO))
    # Python warnings become log records (one JSON line each, not two lines of text).
    logging.captureWarnings(config.format == "json")


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A logger bound to a component name."""
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(component=name)
    return logger


class RateLimitedWarnings:
    """Warn at most once per ``interval`` seconds per key; the next warning says how many were
    left out in between. For what clients can make happen at any rate (bad verb requests)."""

    def __init__(
        self,
        logger: structlog.typing.FilteringBoundLogger,
        interval: float = 10.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.monotonic = monotonic
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, event: str, **fields: object) -> bool:
        """Log ``event`` unless ``key`` was logged within ``interval``; whether it was logged."""
        now = self.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._last[key] = now
        left_out = self._suppressed.pop(key, 0)
        if left_out:
            fields["suppressed"] = left_out
        self.logger.warning(event, **fields)
        return True
