"""Values users write into the cluster, checked where objects enter runway's caches.

Every field runway reads from a pod has one tolerant parser (``parse_min_available``,
``owner_of``) that returns None/default for a bad value, so policy and the loops never raise on
it. This module reports those bad values once per object version (when the cache indexes a pod):
``runway_invalid_objects_total{field}`` and a warning, rate-limited per field. The annotations
earlier versions kept state in (``runway.dev/eviction-*``, ``runway.dev/workload-*``,
``runway.dev/preemption-gate``) are never read as state; one found on a pod is reported as
``state-annotation`` (written by a tenant, or left from before: docs/state.md, migration).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app import metrics
from app.logs import get_logger
from app.model import Pod
from app.model.owner import is_object_ref
from app.model.record import RETIRED_ANNOTATIONS
from app.policy.workload import MIN_AVAILABLE_ANNOTATION, parse_min_available

log = get_logger("state.validation")

WARN_EVERY = 60.0
"""Seconds between two warnings about the same field (the counter counts every object)."""


def invalid_pod_fields(pod: Pod) -> list[str]:
    """The fields of ``pod`` whose value runway ignores (empty when all are usable)."""
    bad: list[str] = []
    if pod.metadata.annotations:
        raw = pod.annotation(MIN_AVAILABLE_ANNOTATION)
        if raw is not None and parse_min_available(raw) is None:
            bad.append("min-available")
        if any(k in RETIRED_ANNOTATIONS for k in pod.metadata.annotations):
            bad.append("state-annotation")
    refs = pod.metadata.ownerReferences or ()
    controllers = [r for r in refs if r.controller]
    if len(controllers) > 1 or any(not is_object_ref(r) for r in controllers):
        bad.append("owner-reference")
    return bad


class InvalidObjects:
    """Counts and reports (rate-limited) objects carrying values runway ignores."""

    def __init__(
        self, *, warn_every: float = WARN_EVERY, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.warn_every = warn_every
        self.monotonic = monotonic
        self._last_warned: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def report(self, kind: str, key: str, fields: list[str]) -> None:
        """``kind`` ``key`` carries the bad ``fields``: count each, warn unless warned lately."""
        now = self.monotonic()
        for field in fields:
            metrics.INVALID_OBJECTS.labels(field).inc()
            last = self._last_warned.get(field)
            if last is not None and now - last < self.warn_every:
                self._suppressed[field] = self._suppressed.get(field, 0) + 1
                continue
            self._last_warned[field] = now
            log.warning(
                "ignoring an invalid value",
                object=f"{kind} {key}",
                field=field,
                similar_since_last_warning=self._suppressed.pop(field, 0),
            )

    def check_pod(self, pod: Pod, old: Pod | None) -> None:
        """Report ``pod``'s bad fields, unless ``old`` is the same version (already reported)."""
        if old is not None and old.metadata.resourceVersion == pod.metadata.resourceVersion:
            return
        bad = invalid_pod_fields(pod)
        if bad:
            self.report("pod", pod.key, bad)
