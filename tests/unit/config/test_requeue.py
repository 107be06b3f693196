"""waitForPodsReady / requeueStrategy config: Kueue's shapes, defaults, and errors."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from app.config import ConfigError, RunwayConfig, parse_config
from app.config.requeue import (
    RequeueStrategyConfig,
    RequeuingStrategyConfig,
    WaitForPodsReadyConfig,
    pods_ready_timeout_timestamp,
)

KUEUE_CONFIG = """
waitForPodsReady:
  enable: true
  timeout: 10m
  recoveryTimeout: 3m
  blockAdmission: true
  requeuingStrategy:
    timestamp: Creation
    backoffLimitCount: 5
    backoffLimitTimeout: 2h
    backoffBaseSeconds: 30
    backoffMaxSeconds: 1800
requeueStrategy:
  priorityPreemption: UseEvictionTimestamp
"""


def test_defaults_follow_the_design() -> None:
    """DESIGN §5.2, §5.3: base 60 s, max 3600 s; Eviction after a timeout, Creation after a
    preemption; blockAdmission off unless the file enables the feature (v1beta1 shape)."""
    c = RunwayConfig()
    w = c.wait_for_pods_ready
    assert (w.enable, w.timeout, w.recovery_timeout, w.block_admission) == (False, 300, None, False)
    r = w.requeuing_strategy
    assert (r.backoff_base_seconds, r.backoff_max_seconds) == (60, 3600)
    assert (r.backoff_limit_count, r.backoff_limit_timeout, r.timestamp) == (None, None, None)
    assert pods_ready_timeout_timestamp(w, c.requeue_strategy) == "Eviction"
    assert c.requeue_strategy.priority_preemption == "Creation"


def test_kueue_configuration_parses() -> None:
    c = parse_config(yaml.safe_load(KUEUE_CONFIG))
    w = c.wait_for_pods_ready
    assert (w.enable, w.timeout, w.recovery_timeout, w.block_admission) == (True, 600, 180, True)
    r = w.requeuing_strategy
    assert (r.timestamp, r.backoff_limit_count, r.backoff_limit_timeout) == ("Creation", 5, 7200)
    assert (r.backoff_base_seconds, r.backoff_max_seconds) == (30, 1800)
    assert c.requeue_strategy.priority_preemption == "Eviction"
    assert pods_ready_timeout_timestamp(w, c.requeue_strategy) == "Creation"


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        # Kueue v1beta1 SetDefaults_Configuration: enabled → blockAdmission defaults to true
        ({"enable": True}, True),
        ({"enable": True, "blockAdmission": False}, False),
        ({"enable": False}, False),
        ({"enable": False, "blockAdmission": True}, True),  # written: kept (and inert)
        # v1beta2 (no `enable`): false unless written
        ({"timeout": "5m"}, False),
        ({}, False),
        ({"blockAdmission": True}, True),
        (None, False),  # `waitForPodsReady: null` is off
    ],
)
def test_block_admission_defaults_per_shape(block: dict[str, Any] | None, expected: bool) -> None:
    c = parse_config({"waitForPodsReady": block})
    assert c.wait_for_pods_ready.block_admission is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Eviction", "Eviction"),
        ("Creation", "Creation"),
        ("UseEvictionTimestamp", "Eviction"),
        ("UseCreationTimestamp", "Creation"),
    ],
)
def test_both_spellings_of_the_timestamp(value: str, expected: str) -> None:
    c = parse_config({"requeueStrategy": {"podsReadyTimeout": value, "priorityPreemption": value}})
    assert c.requeue_strategy.pods_ready_timeout == expected
    assert c.requeue_strategy.priority_preemption == expected


def test_requeuing_strategy_timestamp_sets_pods_ready_timeout_only() -> None:
    c = parse_config({"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Eviction"}}})
    assert pods_ready_timeout_timestamp(c.wait_for_pods_ready, c.requeue_strategy) == "Eviction"
    assert c.requeue_strategy.priority_preemption == "Creation"
    same = parse_config(
        {
            "waitForPodsReady": {"requeuingStrategy": {"timestamp": "Creation"}},
            "requeueStrategy": {"podsReadyTimeout": "UseCreationTimestamp"},
        }
    )
    assert pods_ready_timeout_timestamp(same.wait_for_pods_ready, same.requeue_strategy) == (
        "Creation"
    )


def test_max_zero_means_no_cap_and_base_may_then_be_anything() -> None:
    c = parse_config(
        {
            "waitForPodsReady": {
                "requeuingStrategy": {"backoffBaseSeconds": 900, "backoffMaxSeconds": 0}
            }
        }
    )
    assert c.wait_for_pods_ready.requeuing_strategy.backoff_max_seconds == 0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {
                "waitForPodsReady": {
                    "requeuingStrategy": {"backoffBaseSeconds": 120, "backoffMaxSeconds": 60}
                }
            },
            "waitForPodsReady.requeuingStrategy: backoffBaseSeconds (120) is greater than "
            "backoffMaxSeconds (60)",
        ),
        (
            {
                "waitForPodsReady": {"requeuingStrategy": {"timestamp": "Creation"}},
                "requeueStrategy": {"podsReadyTimeout": "Eviction"},
            },
            "waitForPodsReady.requeuingStrategy.timestamp (Creation) and "
            "requeueStrategy.podsReadyTimeout (Eviction) disagree",
        ),
        ({"waitForPodsReady": {"timeout": "0s"}}, "waitForPodsReady.timeout"),
        ({"waitForPodsReady": {"timeout": "5 minutes"}}, "waitForPodsReady.timeout"),
        ({"waitForPodsReady": {"recoveryTimeout": "-1m"}}, "waitForPodsReady.recoveryTimeout"),
        (
            {"waitForPodsReady": {"requeuingStrategy": {"backoffLimitCount": -1}}},
            "waitForPodsReady.requeuingStrategy.backoffLimitCount",
        ),
        (
            {"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Front"}}},
            "(got 'Front')",
        ),
        (
            {"requeueStrategy": {"priorityPreemption": "Later"}},
            "requeueStrategy.priorityPreemption",
        ),
        ({"waitForPodsReady": {"enabled": True}}, "waitForPodsReady.enabled: unknown field"),
    ],
)
def test_errors_name_the_field(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data, "runway.yaml")
    assert expected in str(err.value)


def test_every_field_has_a_description() -> None:
    for model in (WaitForPodsReadyConfig, RequeuingStrategyConfig, RequeueStrategyConfig):
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name}"
