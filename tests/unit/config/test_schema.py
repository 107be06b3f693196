"""The config's JSON schema in the chart: generated from the models, and Helm refuses what
runway would refuse, before anything is installed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from app.config import ConfigError, parse_config
from app.config.schema import chart_config_schema, config_schema, render_values_schema
from tests.helm_chart import CHART

VALUES_SCHEMA = Path(CHART) / "values.schema.json"


def test_chart_schema_is_generated_from_the_models() -> None:
    on_disk = json.loads(VALUES_SCHEMA.read_text())
    assert on_disk["properties"]["config"] == chart_config_schema(), (
        "helm/runway/values.schema.json is stale: "
        "`python -m app config-schema --chart helm/runway/values.schema.json`"
    )
    # regenerating changes nothing else in the file (byte for byte)
    assert render_values_schema(VALUES_SCHEMA.read_text()) == VALUES_SCHEMA.read_text()


def test_schema_is_self_contained_and_lists_every_spelling() -> None:
    text = json.dumps(config_schema())
    assert "$ref" not in text and "$defs" not in text
    queue = config_schema()["properties"]["queues"]["items"]["properties"]
    assert {"parent", "parentQueue", "preemptMinRuntime"} <= set(queue)
    wait = config_schema()["properties"]["waitForPodsReady"]["properties"]
    assert wait["timeout"]["default"] == "5m"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"auth": {"mode": "tokenreview"}}, "/config/auth/mode"),
        ({"waitForPodsReady": {"timeout": 300}}, "/config/waitForPodsReady/timeout"),
        ({"waitForPodsReady": {"timeout": "5 minutes"}}, "/config/waitForPodsReady/timeout"),
        ({"waitForPodReady": {"timeout": "5m"}}, "waitForPodReady"),
        ({"server": {"port": 99999}}, "/config/server/port"),
        ({"queues": [{"parent": "a"}]}, "/config/queues/0"),
    ],
)
def test_helm_refuses_a_config_runway_would_refuse(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError):
        parse_config(config)
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as err:
        chart.validate_schema({"config": config})
    assert field in str(err.value)


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"waitForPodsReady": {"timeout": "10m", "recoveryTimeout": "0s"}},
        {"queues": [{"name": "a", "parentQueue": "b"}, {"name": "b", "reclaimMinRuntime": "0"}]},
        {"minRuntime": {"preemptMinRuntime": "1h", "pools": {"a100": {"reclaimMinRuntime": "2d"}}}},
        {"auth": {"mode": "static", "staticTokens": ["0123456789abcdef0123"], "cacheTTL": "1m"}},
        {"server": {"tls": {"certFile": "c", "keyFile": "k", "clientCAFile": "ca"}}},
    ],
)
def test_helm_accepts_what_runway_accepts(config: dict[str, Any]) -> None:
    parse_config(config)
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema({"config": config})


def test_duration_pattern_agrees_with_the_parser() -> None:
    pattern = re.compile(
        config_schema()["properties"]["kubernetes"]["properties"]["retryTimeout"]["pattern"]
    )
    for text in ("90s", "1h30m", "1.5s", ".5s", "2d", "1w", "0", "+5m", "100ms", "3µs"):
        assert pattern.match(text), text
        parse_config(yaml.safe_load(f"kubernetes: {{retryTimeout: '{text}'}}"))
    for text in ("5", "5 minutes", "-1s", "1h2", "", "s"):
        assert not pattern.match(text), text
