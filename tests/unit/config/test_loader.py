"""The config loader: defaults, sources, and errors that name the field and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import ConfigError, RunwayConfig, load_config, parse_config, parse_duration
from app.config.durations import format_duration


def test_embedded_default_needs_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNWAY_CONFIG", raising=False)
    config = load_config(None)
    assert config == RunwayConfig()
    assert config.server.port == 8888
    assert config.server.url_prefix == "/scheduler"
    assert config.server.max_body_bytes == 64 * 1024 * 1024


def test_env_var_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("server:\n  port: 9999\n")
    monkeypatch.setenv("RUNWAY_CONFIG", str(path))
    assert load_config(None).server.port == 9999


def test_flag_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("server: {port: 1111}\n")
    b.write_text("server: {port: 2222}\n")
    monkeypatch.setenv("RUNWAY_CONFIG", str(a))
    assert load_config(b).server.port == 2222


def test_empty_file_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path) == RunwayConfig()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"server": {"port": "abc"}}, "server.port: Input should be a valid integer"),
        ({"server": {"port": 70000}}, "server.port: Input should be less than or equal to 65535"),
        ({"server": {"port": 70000}}, "(got 70000)"),
        ({"server": {"urlPrefix": "scheduler"}}, "server.urlPrefix: String should match"),
        ({"server": {"maxBodyBytes": 10}}, "server.maxBodyBytes"),
        ({"logging": {"level": "loud"}}, "logging.level: Input should be 'debug'"),
        ({"logging": {"level": "loud"}}, "(got 'loud')"),
        ({"sever": {}}, "sever: unknown field"),
        ({"server": {"prot": 1}}, "server.prot: unknown field; did you mean 'port'? (got 1)"),
        # a retired key says what to do instead
        (
            {"kubernetes": {"ownerKinds": [{"apiVersion": "batch/v1", "kind": "Job"}]}},
            "kubernetes.ownerKinds: retired: runway keeps each workload's state in its own "
            "WorkloadRecord resource",
        ),
        ({"queues": [{"name": "q", "namespaces": ["Team_A"]}]}, "'Team_A' is not a namespace"),
    ],
)
def test_errors_name_the_field_and_the_value(data: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data, "runway.yaml")
    assert expected in str(err.value)
    assert "runway.yaml: " in str(err.value)


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="top level must be a mapping, got list"):
        parse_config([1, 2])


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")


def test_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("server: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("2d", 172800),
        ("1w", 604800),
        ("1.5s", 1.5),
        ("500ms", 0.5),
        ("0s", 0),
        ("0", 0),
        ("2h45m15s", 9915),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "1h2", "abc", "1h-30m", "-5s", "", "s", "1y"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    "seconds", [0, 1, 59, 60, 90, 3600, 5400, 9915, 172800, 1.5, 0.02, 0.5, 0.0005]
)
def test_format_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


def test_sub_second_durations_are_written_in_milliseconds() -> None:
    assert format_duration(0.02) == "20ms" and format_duration(0.0005) == "0.0005s"


def test_configuration_reference_is_up_to_date() -> None:
    """docs/configuration.md is generated from the models: every key with its real default."""
    from app.config.reference import reference

    path = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
    assert path.read_text() == reference(), (
        "docs/configuration.md is stale: `python -m app config-reference > docs/configuration.md`"
    )


def test_every_config_field_is_documented() -> None:
    from app.config.reference import rows

    undocumented = [row.split("|")[1].strip() for row in rows() if row.endswith("|  |")]
    assert undocumented == []
