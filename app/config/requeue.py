"""Requeue configuration (DESIGN §5), written exactly as a Kueue ``Configuration`` writes it.

Two shapes of the queue-order timestamp are accepted, one per seed::

    waitForPodsReady:
      enable: true
      timeout: 5m
      recoveryTimeout: 3m            # unset = no recovery timeout
      blockAdmission: true           # unset = true with enable: true (v1beta1), false in v1beta2
      requeuingStrategy:
        timestamp: Eviction          # PodsReadyTimeout evictions only (KEP-1282)
        backoffLimitCount: 5         # null = requeue forever
        backoffLimitTimeout: 2h      # runway: null = no time limit (KEP-1282 "Alternatives")
        backoffBaseSeconds: 60
        backoffMaxSeconds: 3600      # 0 = no cap
    requeueStrategy:                 # the KEP-1282 draft shape, per eviction reason
      podsReadyTimeout: Eviction     # or Creation / UseEvictionTimestamp / UseCreationTimestamp
      priorityPreemption: Creation
      antiFlappingTimeout: 60s       # runway: hold a victim behind its pending preemptor

``backoffLimitTimeout`` lives under ``requeuingStrategy`` beside ``backoffLimitCount``, where the
KEP's "Alternatives" section sketched it: once the workload's *first* PodsReadyTimeout eviction
(since it was last activated) is older than this, the next eviction deactivates it instead of
backing off. Both limits may be set; whichever is hit first deactivates.

Setting the PodsReadyTimeout strategy in both places with different values is a config error.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    BeforeValidator,
    Field,
    ModelWrapValidatorHandler,
    ValidationInfo,
    model_validator,
)

from app.config.durations import Duration
from app.config.section import Section, written

TimestampName = Literal["Eviction", "Creation"]

_ALIASES = {"UseEvictionTimestamp": "Eviction", "UseCreationTimestamp": "Creation"}


def _timestamp_alias(value: Any) -> Any:
    # The KEP-1282 draft spells the values UseEvictionTimestamp/UseCreationTimestamp.
    return _ALIASES.get(value, value) if isinstance(value, str) else value


Timestamp = Annotated[TimestampName, BeforeValidator(_timestamp_alias)]
"""``Eviction`` (back of the queue) or ``Creation`` (front); ``Use*Timestamp`` also accepted."""

DEFAULT_PODS_READY_TIMEOUT_TIMESTAMP: TimestampName = "Eviction"
DEFAULT_PREEMPTION_TIMESTAMP: TimestampName = "Creation"


class RequeuingStrategyConfig(Section):
    """``waitForPodsReady.requeuingStrategy``: order and backoff after a PodsReadyTimeout."""

    timestamp: Timestamp | None = Field(
        None,
        description="Queue-order timestamp of workloads evicted by PodsReadyTimeout: `Eviction` "
        "(back of the queue) or `Creation` (front: the workload's *created* fact, which "
        "re-created pods never change). Applies to PodsReadyTimeout only; unset = "
        "`requeueStrategy.podsReadyTimeout`, else `Eviction`.",
    )
    backoff_limit_count: int | None = Field(
        None,
        ge=0,
        description="Maximum number of requeues after PodsReadyTimeout evictions; the eviction "
        "that would exceed it deactivates the workload (eviction reason Deactivated, cause "
        "RequeuingLimitExceeded; reactivated, it is ordered by its creation, as Kueue). "
        "null = requeue forever.",
    )
    backoff_limit_timeout: Duration | None = Field(
        None,
        description="Time-based limit (runway): once the first PodsReadyTimeout eviction since "
        "activation is older than this, the next eviction deactivates the workload. "
        "null = no time limit.",
    )
    backoff_base_seconds: int = Field(
        60,
        ge=0,
        description="Base of the exponential backoff: the n-th requeue waits "
        "min(base * 2^(n-1), max) seconds (plus up to 0.01% jitter).",
    )
    backoff_max_seconds: int = Field(
        3600,
        ge=0,
        description="Cap of the backoff wait in seconds; 0 = no cap (as Kueue). Must not be "
        "below backoffBaseSeconds.",
    )

    @model_validator(mode="after")
    def _base_within_max(self) -> Self:
        # Kueue returns the uncapped base on the first requeue when base > max; runway refuses
        # the ambiguity at startup instead (DESIGN §5).
        if self.backoff_max_seconds > 0 and self.backoff_base_seconds > self.backoff_max_seconds:
            raise ValueError(
                f"backoffBaseSeconds ({self.backoff_base_seconds}) is greater than "
                f"backoffMaxSeconds ({self.backoff_max_seconds}); raise backoffMaxSeconds, lower "
                "backoffBaseSeconds, or set backoffMaxSeconds: 0 for no cap"
            )
        return self


class WaitForPodsReadyConfig(Section):
    """``waitForPodsReady``: all-or-nothing timeouts (Kueue KEP-349) and requeue backoff.

    Two shapes, told apart by ``enable`` (DESIGN §5): with ``enable`` (Kueue v1beta1) the fields
    mean what they say and an unset ``recoveryTimeout`` is off. Without it (Kueue v1beta2) the
    block's presence enables the feature, ``recoveryTimeout`` defaults to ``timeout`` and ``0s``
    turns it off. ``blockAdmission`` defaults as Kueue defaults it per shape: ``true`` with
    ``enable: true`` (v1beta1's ``SetDefaults_Configuration``), ``false`` in v1beta2. A block
    written in a file is never silently off.
    """

    enable: bool = Field(
        False,
        description="Evict admitted workloads that do not reach PodsReady (ready + succeeded "
        "members >= the workload's size: minAvailable, else the owner Job's parallelism, else "
        "the most members it has had) in time, and apply the requeue backoff. Kueue v1beta2 "
        "shape: a block without `enable` is enabled (its presence enables the feature).",
    )
    timeout: Duration = Field(
        300.0,
        gt=0,
        description="Time from admission (the workload's *admitted* fact: the first bind of any "
        "of its pods, so a gang only partly scheduled times out too) to PodsReady before the "
        "workload is evicted with reason PodsReadyTimeout. Applies until the workload as a "
        "whole has been PodsReady (one pod Ready, then crashed, is not).",
    )
    recovery_timeout: Duration | None = Field(
        None,
        description="Time from PodsReady turning false (after it was true: a pod failed, or was "
        "deleted and its replacement is awaited) to recovery before the workload is evicted; "
        "counted from the *last* such loss (the `lost` fact, persisted: a pod that failed before "
        "the workload recovered is not it; a restart keeps the clock). Failed pods are not "
        "members and do not count against PodsReady. With `enable` written "
        "(v1beta1): unset = no recovery timeout. Without `enable` (v1beta2): unset = `timeout`, "
        "`0s` = no recovery timeout.",
    )
    block_admission: bool = Field(
        False,
        description="While an admitted workload (at least one pod bound) is not PodsReady — "
        "waiting for its start, or recovering from a lost pod (as Kueue; without a "
        "recoveryTimeout until it recovers) — and has not timed out, filter rejects every other "
        "workload. Only honoured "
        "when enable is true. Unset, it defaults as Kueue defaults it per shape: `true` with "
        "`enable: true` written (v1beta1), `false` without `enable` (v1beta2) or when off.",
    )
    requeuing_strategy: RequeuingStrategyConfig = Field(
        default_factory=RequeuingStrategyConfig,
        description="Queue order and backoff of workloads evicted by PodsReadyTimeout.",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _kueue_v1beta2(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        if not written(info):
            return handler(data)
        if data is None:  # Kueue: `waitForPodsReady: null` is off
            return cls()
        if not isinstance(data, dict):
            return handler(data)
        if "enable" in data:
            config = handler(data)
            if not any(k in data for k in ("blockAdmission", "block_admission")):
                # Kueue v1beta1 SetDefaults_Configuration: blockAdmission defaults to true
                # when waitForPodsReady is enabled.
                return config.model_copy(update={"block_admission": config.enable})
            return config
        recovery = [data[k] for k in ("recoveryTimeout", "recovery_timeout") if k in data]
        config = handler({**data, "enable": True})
        if not recovery or recovery[0] is None:
            return config.model_copy(update={"recovery_timeout": config.timeout})
        if config.recovery_timeout == 0:
            return config.model_copy(update={"recovery_timeout": None})
        return config


class RequeueStrategyConfig(Section):
    """``requeueStrategy``: the queue-order timestamp per eviction reason (KEP-1282 draft)."""

    pods_ready_timeout: Timestamp | None = Field(
        None,
        description="Queue-order timestamp after a PodsReadyTimeout eviction: `Eviction` or "
        "`Creation` (the workload's *created* fact). Unset = "
        "waitForPodsReady.requeuingStrategy.timestamp, else `Eviction`.",
    )
    priority_preemption: Timestamp = Field(
        DEFAULT_PREEMPTION_TIMESTAMP,
        description="Queue-order timestamp after a preemption: `Creation` (default, as Kueue: "
        "front of its priority band, by the workload's *created* fact; its pending preemptor "
        "still goes just before it) or `Eviction`.",
    )
    anti_flapping_timeout: Duration = Field(
        60.0,
        ge=0,
        description="Anti-flapping: a workload preempted by a pod that is still pending is held "
        "by filter until that preemptor is scheduled, at most this long after the eviction "
        "(runway). 0 = off.",
    )


def pods_ready_timeout_timestamp(
    wait: WaitForPodsReadyConfig, strategy: RequeueStrategyConfig
) -> TimestampName:
    """The effective PodsReadyTimeout strategy: either shape, else ``Eviction``."""
    return (
        strategy.pods_ready_timeout
        or wait.requeuing_strategy.timestamp
        or DEFAULT_PODS_READY_TIMEOUT_TIMESTAMP
    )


def check_timestamps_agree(wait: WaitForPodsReadyConfig, strategy: RequeueStrategyConfig) -> None:
    """Raise ``ValueError`` when both shapes set the PodsReadyTimeout strategy differently."""
    a, b = wait.requeuing_strategy.timestamp, strategy.pods_ready_timeout
    if a is not None and b is not None and a != b:
        raise ValueError(
            f"waitForPodsReady.requeuingStrategy.timestamp ({a}) and "
            f"requeueStrategy.podsReadyTimeout ({b}) disagree; both set the order after a "
            "PodsReadyTimeout eviction — keep one of them"
        )
