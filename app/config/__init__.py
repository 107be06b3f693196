"""Configuration: the pydantic model of the YAML file, its loader and the duration type."""

from app.config.durations import Duration, format_duration, parse_duration
from app.config.loader import (
    ENV_VAR,
    ConfigError,
    ConfigUnreadable,
    load_config,
    parse_config,
    with_overrides,
)
from app.config.model import LoggingConfig, RunwayConfig, ServerConfig
from app.config.section import Section

__all__ = [
    "ENV_VAR",
    "ConfigError",
    "ConfigUnreadable",
    "Duration",
    "LoggingConfig",
    "RunwayConfig",
    "Section",
    "ServerConfig",
    "format_duration",
    "load_config",
    "parse_config",
    "parse_duration",
    "with_overrides",
]
