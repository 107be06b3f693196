"""Every write runway makes to a pod, in one place (implements ``app.tasks.ports.PodApi``).

A condition is added with a strategic-merge patch of ``pods/status`` (conditions are keyed by type,
so the others stay; a JSON merge patch would replace the list). Deletes and annotation patches
carry the pod's UID as a precondition, so a re-created pod of the same name is never hit. Retries
(5xx, 429, timeouts) happen inside ``KubeClient`` through ``app.kube.retry``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from app.kube.client import KubeClient
from app.kube.errors import Conflict, Invalid, NotFound
from app.kube.resources import PODS
from app.logs import get_logger
from app.model import Pod
from app.model.gate import PodRef
from app.model.timestamps import format_time

log = get_logger("kube.pods")


def condition_patch(
    type_: str, reason: str, message: str, now: float, status: str = "True"
) -> dict[str, Any]:
    """The strategic-merge body adding one condition to ``status.conditions``."""
    condition = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": format_time(now),
    }
    return {"status": {"conditions": [condition]}}


def replaced(exc: Conflict | Invalid) -> bool:
    """The call's UID precondition failed: the name belongs to another pod now. A DELETE's
    precondition answers 409; a patch carrying ``metadata.uid`` answers 422 "field is
    immutable" (kube-apiserver 1.20, checked on the real plane)."""
    return isinstance(exc, Conflict) or "metadata.uid" in exc.message


class KubePodWriter:
    """Pod writes through the shared client."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def add_condition(
        self, pod: PodRef, type_: str, reason: str, message: str, now: float
    ) -> bool:
        """Add (or update) condition ``type_``=True with a UID precondition; False when the pod
        is gone or its name now belongs to another pod (409): a condition is never written on a
        pod that is not the one meant."""
        body = condition_patch(type_, reason, message, now)
        body["metadata"] = {"uid": pod.uid}
        try:
            await self._patch(pod, body, "strategic", "status")
        except NotFound:
            return False
        except (Conflict, Invalid) as exc:
            if not replaced(exc):
                raise
            log.info("pod replaced: condition not written", pod=pod.key, uid=pod.uid)
            return False
        return True

    async def delete(self, pod: PodRef) -> bool:
        """Delete with a UID precondition; False when it was gone already (404), or the name now
        belongs to a re-created pod (409): either way ours is gone."""
        # Logged before the call: a process that dies with the DELETE in flight still says so
        # (the audit trail of who evicted what, replica by replica).
        log.info("deleting pod", pod=pod.key, uid=pod.uid)
        try:
            await self._client.delete(PODS, pod.name, pod.namespace, uid=pod.uid)
        except NotFound:
            return False
        except Conflict:
            log.info("pod already replaced", pod=pod.key, uid=pod.uid)
            return False
        return True

    async def nominate(self, pod: PodRef, node: str | None) -> None:
        """Set (or clear, with None) ``status.nominatedNodeName``. Clearing a gone pod's is done;
        nominating a gone pod raises ``NotFound``."""
        try:
            await self._patch(pod, {"status": {"nominatedNodeName": node}}, "merge", "status")
        except NotFound:
            if node is not None:
                raise

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> bool:
        """JSON merge patch of annotations (None removes a key) with a UID precondition; False
        when the pod is gone or its name belongs to a re-created pod."""
        try:
            await self.patch_annotations(pod, annotations)
        except NotFound:
            return False
        except (Conflict, Invalid) as exc:
            if not replaced(exc):
                raise
            return False
        return True

    async def ungate(self, pod: PodRef, patch: Sequence[Mapping[str, Any]]) -> bool:
        """Remove a scheduling gate with ``patch`` (``policy.schedgate.ungate_patch``: a JSONPatch
        whose ``test`` ops check the UID and the gate's place). False when the pod is gone (404)
        or is not as the patch expects (422: replaced, or its gates changed; the next pass
        reads the pod again). Safe to retry: an applied patch's ``test`` fails the second time.
        The API server allows removing a gate at any time; adding one after creation it
        refuses."""
        try:
            await self._client.patch(
                PODS,
                pod.name,
                list(patch),
                pod.namespace,
                into=msgspec.Raw,
                patch_type="json",
                idempotent=True,
            )
        except NotFound:
            return False
        except Invalid as exc:
            log.info("pod changed: gate not removed", pod=pod.key, uid=pod.uid, why=exc.message)
            return False
        return True

    async def patch_annotations(self, pod: PodRef, annotations: Mapping[str, str | None]) -> Pod:
        """``annotate`` that returns the patched pod and raises ``NotFound``/``Conflict``."""
        body = {"metadata": {"uid": pod.uid, "annotations": dict(annotations)}}
        patched: Pod = await self._client.patch(
            PODS, pod.name, body, pod.namespace, into=Pod, patch_type="merge"
        )
        return patched

    async def _patch(
        self, pod: PodRef, body: dict[str, Any], patch_type: str, subresource: str | None
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
