"""Structured logging with structlog: human-readable text or one JSON object per line."""

from __future__ import annotations

import logging
import sys

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


def configure_logging(config: LoggingConfig) -> None:
    """Route structlog (and stdlib loggers such as uvicorn's) to stderr at the configured level."""
    level = _LEVELS[config.level]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if config.format == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        # Filtering bound loggers make a disabled debug call nearly free on the hot path.
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=max(level, logging.INFO), stream=sys.stderr, format="%(message)s", force=True
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A logger bound to a component name."""
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(component=name)
    return logger
