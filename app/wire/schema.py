"""Documentation models of the extender wire (OpenAPI only: the hot path never builds them).

Field names are the Go struct field names, capitalised, exactly as kube-scheduler sends them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(BaseModel):
    """Every 4xx/5xx body: what was wrong."""

    error: str


class MetaPod(_Wire):
    """A victim named by UID only."""

    UID: str


class MetaVictims(_Wire):
    """Victims on one node, by UID."""

    Pods: list[MetaPod] | None = None
    NumPDBViolations: int = 0


class Victims(_Wire):
    """Victims on one node, as full Pod objects (nodeCacheCapable: false)."""

    Pods: list[dict[str, Any]] | None = None
    NumPDBViolations: int = 0


class ExtenderArgs(_Wire):
    """Request of filter and prioritize. Exactly one of ``Nodes`` and ``NodeNames`` is non-null."""

    Pod: dict[str, Any] = Field(description="The v1.Pod being scheduled.")
    Nodes: dict[str, Any] | None = Field(
        None, description="v1.NodeList of candidate nodes (nodeCacheCapable: false)."
    )
    NodeNames: list[str] | None = Field(
        None, description="Candidate node names (nodeCacheCapable: true)."
    )


class ExtenderFilterResult(_Wire):
    """Reply of filter. Only nodes that were sent may be returned."""

    Nodes: dict[str, Any] | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = Field(
        default_factory=dict, description="Nodes that failed; preemption may still help there."
    )
    FailedAndUnresolvableNodes: dict[str, str] = Field(
        default_factory=dict, description="Nodes that failed; preemption cannot help."
    )
    Error: str = ""


class HostPriority(_Wire):
    """One node's score, an integer 0..10."""

    Host: str
    Score: int = Field(ge=0, le=10)


class ExtenderPreemptionArgs(_Wire):
    """Request of preempt: the preemptor and its candidate victims per node."""

    Pod: dict[str, Any]
    NodeNameToVictims: dict[str, Victims] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class ExtenderPreemptionResult(_Wire):
    """Reply of preempt: always by UID. ``{}`` vetoes preemption this cycle."""

    NodeNameToMetaVictims: dict[str, MetaVictims] = Field(default_factory=dict)


REQUEST_MODELS: tuple[type[BaseModel], ...] = (ExtenderArgs, ExtenderPreemptionArgs)
