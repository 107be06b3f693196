"""Make cached pods small: keep only what runway reads, share what repeats across pods.

A decoded pod is ~70 small Python objects. The labels and annotations runway never reads are
dropped (it reads a handful of label keys and its own ``runway.dev/`` annotations:
``policy.workload.READ_LABELS``); most of the rest (namespace, Job names, condition types and
times, quantities, scheduler and priority class names, whole condition and ownerReference lists)
is equal across many pods and shared. Values unique per pod (name, uid, resourceVersion) are
left alone. 150,000 pods: bench/ingest.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from app.model import (
    Container,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)
from app.policy.workload import READ_ANNOTATION_PREFIX, READ_LABELS

_LONG = 128  # longer strings are rarely shared: not worth a table entry

_intern = sys.intern


class Compactor:
    """Shares equal sub-objects between the pods it has seen (tables bounded by ``limit``)."""

    def __init__(self, limit: int = 200_000, keep_labels: Iterable[str] = ()) -> None:
        self.limit = limit
        self._shared: dict[object, object] = {}
        self.read_labels = READ_LABELS | frozenset(keep_labels)
        """The labels kept: runway's own, and the config's (preemption.protectedPodLabels)."""

    def _share(self, value: object) -> object:
        found = self._shared.get(value)
        if found is not None:
            return found
        if len(self._shared) >= self.limit:
            self._shared.clear()  # old entries stay shared by the pods holding them
        self._shared[value] = value
        return value

    def _str(self, value: str | None) -> str | None:
        if value is None or len(value) > _LONG:
            return value
        return _intern(value)

    def _map(self, values: dict[str, str] | None) -> dict[str, str] | None:
        if not values:
            return values
        return {_intern(k): (_intern(v) if len(v) <= _LONG else v) for k, v in values.items()}

    def _labels(self, labels: dict[str, str] | None) -> dict[str, str] | None:
        if not labels:
            return None
        return self._shared_map({k: v for k, v in labels.items() if k in self.read_labels})

    def _annotations(self, annotations: dict[str, str] | None) -> dict[str, str] | None:
        if not annotations:
            return None
        return self._shared_map(
            {k: v for k, v in annotations.items() if k.startswith(READ_ANNOTATION_PREFIX)}
        )

    def _shared_map(self, values: dict[str, str]) -> dict[str, str] | None:
        """One dict object for every pod with equal (short) items: a queue's pods share their
        queue label (never mutated: pods are frozen)."""
        if not values:
            return None
        if any(len(v) > _LONG for v in values.values()):
            return self._map(values)
        key = ("map", tuple(sorted(values.items())))
        found = self._shared.get(key)
        if isinstance(found, dict):
            return found
        made = self._map(values)
        if len(self._shared) >= self.limit:
            self._shared.clear()
        self._shared[key] = made
        return made

    def _shared_tuple(self, items: tuple[Any, ...]) -> tuple[Any, ...]:
        """One tuple object for every pod with equal items."""
        key = ("tuple", items)
        found = self._shared.get(key)
        if isinstance(found, tuple):
            return found
        if len(self._shared) >= self.limit:
            self._shared.clear()
        self._shared[key] = items
        return items

    def pod(self, pod: Pod, previous: Pod | None = None) -> Pod:
        """An equal pod made of shared parts. ``previous``: the cached version of the same pod,
        whose unchanged parts are reused as they are (most watch events change the status only,
        so the spec and the labels are not compacted again)."""
        m = pod.metadata
        pm = previous.metadata if previous is not None else None
        meta = ObjectMeta(
            name=m.name,
            namespace=_intern(m.namespace),
            uid=m.uid,
            resourceVersion=m.resourceVersion,
            creationTimestamp=self._str(m.creationTimestamp),
            deletionTimestamp=self._str(m.deletionTimestamp),
            labels=self._labels(m.labels),
            annotations=self._annotations(m.annotations),
            ownerReferences=pm.ownerReferences
            if pm is not None and m.ownerReferences == pm.ownerReferences
            else self._shared_tuple(tuple(self._owner(o) for o in m.ownerReferences))
            if m.ownerReferences
            else m.ownerReferences,
        )
        ps = previous.spec if previous is not None else None
        if ps is not None and pod.spec == ps:
            return Pod(metadata=meta, spec=ps, status=self._status(pod.status))
        return Pod(metadata=meta, spec=self._spec(pod.spec, ps), status=self._status(pod.status))

    def _spec(self, s: PodSpec, previous: PodSpec | None = None) -> PodSpec:
        # A bind changes nodeName only: the containers (most of a spec's objects) are reused.
        return PodSpec(
            nodeName=self._str(s.nodeName),
            priority=s.priority,
            priorityClassName=self._str(s.priorityClassName),
            schedulerName=self._str(s.schedulerName),
            preemptionPolicy=self._str(s.preemptionPolicy),
            containers=self._containers(s.containers, previous.containers if previous else None),
            initContainers=self._containers(
                s.initContainers, previous.initContainers if previous else None
            ),
            overhead=self._map(s.overhead),
            schedulingGates=self._shared_tuple(s.schedulingGates) if s.schedulingGates else None,
        )

    def _containers(
        self, containers: tuple[Container, ...] | None, previous: tuple[Container, ...] | None
    ) -> tuple[Container, ...] | None:
        if not containers:
            return None
        if previous is not None and containers == previous:
            return previous
        return tuple(self._container(c) for c in containers)

    def _status(self, st: PodStatus) -> PodStatus:
        return PodStatus(
            phase=self._str(st.phase),
            nominatedNodeName=self._str(st.nominatedNodeName),
            startTime=self._str(st.startTime),
            conditions=self._shared_tuple(tuple(self._condition(c) for c in st.conditions))
            if st.conditions
            else None,
        )

    def _owner(self, ref: OwnerReference) -> OwnerReference:
        shared = self._share(ref)
        assert isinstance(shared, OwnerReference)
        return shared

    def _condition(self, cond: PodCondition) -> PodCondition:
        shared = self._share(cond)
        assert isinstance(shared, PodCondition)
        return shared

    def _container(self, c: Container) -> Container:
        r = c.resources
        resources = (
            ResourceRequirements(requests=self._map(r.requests), limits=self._map(r.limits))
            if r is not None
            else None
        )
        key = (c.name, _freeze(resources))
        found = self._shared.get(key)
        if isinstance(found, Container):
            return found
        container = Container(name=_intern(c.name), resources=resources)
        self._shared[key] = container
        return container


def _freeze(r: ResourceRequirements | None) -> object:
    if r is None:
        return None
    return (
        tuple(sorted(r.requests.items())) if r.requests else None,
        tuple(sorted(r.limits.items())) if r.limits else None,
    )
