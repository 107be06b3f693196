"""The API calls of a preemption, made through the shared ``KubeClient``.

Implements ``app.tasks.preemption.PreemptionApi``. Retries (conflicts, 5xx, 429) happen inside
``KubeClient``; what reaches the executor is a failure it must act on.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from typing import Any, Protocol

import msgspec

from app.kube.client import KubeClient
from app.kube.errors import Conflict, NotFound
from app.kube.resources import PODS
from app.logs import get_logger
from app.model.timestamps import format_time
from app.policy.gate import GateEntry, PodRef
from app.state.gate import GATE_ANNOTATION, encode_entry

log = get_logger("preemption-api")

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_REASON = "PreemptionByScheduler"


class PreemptionRecorder(Protocol):
    """Writes the ``Preempted`` eviction record on a victim's workload (``app.kube.records``)."""

    async def record_preemption(
        self, victim_pod_uid: str, preemptor_uid: str, now: float, message: str | None = None
    ) -> object:
        """Read the workload's record, apply a ``Preempted`` eviction, write it back."""


class KubePreemptionApi:
    """Preemption calls against the API server."""

    def __init__(self, client: KubeClient, recorder: PreemptionRecorder | None) -> None:
        self._client = client
        self._recorder = recorder
        # A gang's pods share one record: write it once per (victim workload, preemptor).
        self._recorded: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def mirror_gate(self, preemptor: PodRef, entry: GateEntry | None) -> None:
        """Set or remove the gate annotation (JSON merge patch: ``null`` removes the key)."""
        value = encode_entry(entry) if entry is not None else None
        try:
            await self._patch(
                preemptor, {"metadata": {"annotations": {GATE_ANNOTATION: value}}}, "merge"
            )
        except NotFound:
            if entry is not None:
                raise  # the preemptor is gone: nothing to preempt for

    async def mark_disruption(self, victim: PodRef, message: str) -> None:
        """Add ``DisruptionTarget=True``. Strategic merge keys conditions by type, so the other
        conditions stay (a JSON merge patch would replace the whole list)."""
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_REASON,
            "message": message,
            "lastTransitionTime": format_time(time.time()),
        }
        with contextlib.suppress(NotFound):  # already gone: nothing left to mark
            await self._patch(
                victim, {"status": {"conditions": [condition]}}, "strategic", subresource="status"
            )

    async def record_eviction(self, victim: PodRef, preemptor: PodRef, now: float) -> None:
        """Write the eviction record on the victim's workload (once per workload and preemptor)."""
        if self._recorder is None:
            return
        key = (victim.uid, preemptor.uid)
        if key in self._recorded:
            return
        await self._recorder.record_preemption(victim.uid, preemptor.uid, now)
        self._recorded[key] = None
        while len(self._recorded) > 4096:
            self._recorded.popitem(last=False)

    async def delete_pod(self, victim: PodRef) -> None:
        """Delete with a UID precondition: a re-created pod of the same name is never hit."""
        try:
            await self._client.delete(PODS, victim.name, victim.namespace, uid=victim.uid)
        except NotFound:
            pass  # already gone: done
        except Conflict:
            # The UID precondition failed: the name now belongs to a new pod; ours is gone.
            log.info("victim already replaced", pod=victim.key, uid=victim.uid)

    async def nominate(self, preemptor: PodRef, node: str | None) -> None:
        """Set (or clear, with None) ``status.nominatedNodeName`` on the preemptor."""
        try:
            await self._patch(
                preemptor, {"status": {"nominatedNodeName": node}}, "merge", subresource="status"
            )
        except NotFound:
            if node is not None:
                raise

    async def _patch(
        self, pod: PodRef, body: dict[str, Any], patch_type: str, subresource: str | None = None
    ) -> None:
        await self._client.patch(
            PODS,
            pod.name,
            body,
            pod.namespace,
            into=msgspec.Raw,
            patch_type=patch_type,  # type: ignore[arg-type]
            subresource=subresource,
        )
