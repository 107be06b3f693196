"""What the background tasks need from the Kubernetes layer, as protocols: ``app.kube`` implements
them (``KubePodWriter``, ``DryRunPodWriter``), ``app.wiring`` plugs them in, tests fake them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from app.model.event import EventNote
from app.model.gate import GateEntry, PodRef


class PodApi(Protocol):
    """Every pod write a task makes."""

    async def add_condition(
        self, pod: PodRef, type_: str, reason: str, message: str, now: float
    ) -> bool:
        """Add condition ``type_``=True with ``reason``/``message``; False when the pod is gone."""

    async def delete(self, pod: PodRef) -> bool:
        """Delete with a UID precondition; False when it was gone already."""

    async def nominate(self, pod: PodRef, node: str | None) -> None:
        """Set (or with None, clear) ``status.nominatedNodeName``."""

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> bool:
        """Merge-patch annotations (None removes a key) with a UID precondition; False when the
        pod is gone or its name belongs to a re-created pod."""

    async def ungate(self, pod: PodRef, patch: Sequence[Mapping[str, Any]]) -> bool:
        """Remove a scheduling gate with a JSONPatch whose ``test`` ops are its precondition;
        False when the pod is gone or not as the patch expects."""


class PreemptionRecorder(Protocol):
    """Writes the ``Preempted`` eviction record and mirrors the gate on the preemptor's
    workload record (``app.state.records.RecordBook``)."""

    async def record_preemption(
        self, victim_pod_uid: str, preemptor_uid: str, now: float, message: str | None = None
    ) -> object:
        """Read the victim's workload record, apply a ``Preempted`` eviction, write it back."""

    async def mirror_gate(self, entry: GateEntry) -> bool:
        """Record the preemption in flight; False when the preemptor is gone."""

    async def unmirror_gate(self, preemptor: PodRef) -> None:
        """Remove the preemption of ``preemptor`` from its record."""


class EventSink(Protocol):
    """Records Kubernetes Events (``app.kube.events.KubeEventRecorder``; dry-run: logged).

    ``emit`` returns at once and never raises: Events are written in the background,
    deduplicated and rate-limited, so they never slow or fail the work they describe."""

    def emit(self, note: EventNote) -> None:
        """Queue one Event."""


class NoEvents:
    """An ``EventSink`` that drops everything (tests and parts built without one)."""

    def emit(self, note: EventNote) -> None:
        """Drop ``note``."""
        del note
