"""THE rule of which pods runway manages (DESIGN §2.0), as Kueue's ``manageJobsWithoutQueueName:
false`` with its namespace selector.

A pod is managed when all of these hold:

1. a scheduler runway serves schedules it (``preemption.schedulerNames``): kube-scheduler calls
   runway for its own pods only, but runway's watch sees every pod of the cluster;
2. its namespace is not one runway never manages: ``kube-system``, the operator's protected
   namespaces (``preemption.protectedNamespaces``) and runway's own;
3. its namespace's labels match ``scope.namespaceSelector`` (when set);
4. it names a queue by label, or its namespace is mapped to one (``scope.namespaceQueues``), or
   ``scope.manageWithoutQueue`` is on.

An unmanaged pod gets no WorkloadRecord, no hold (the filter passes it), no backoff and no
PodsReady eviction; it is a victim only as kube-scheduler offers one (the shield still applies),
and a victim runway does not manage has no min-runtime of runway's. Pure: the namespace's labels
are handed in (None: not readable, no selector matches; empty: not seen).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from app.config.scope import ScopeConfig
from app.model import Pod
from app.policy import selectors
from app.policy.selectors import Selector
from app.policy.workload import QUEUE_LABELS

NEVER_MANAGED = frozenset({"kube-system"})
"""Namespaces runway never manages, whatever the config says (the control plane's)."""

DEFAULT_SCHEDULER = "default-scheduler"
"""The scheduler of a pod whose ``spec.schedulerName`` is empty (the API server defaults it)."""


@dataclass(frozen=True)
class Scope:
    """Which pods runway manages: plain data built from the config once."""

    scheduler_names: frozenset[str]
    """The schedulers runway serves; empty: every scheduler (tests, tools)."""
    excluded: frozenset[str] = NEVER_MANAGED
    """Namespaces never managed (kube-system, the protected ones, runway's own)."""
    selector: Selector | None = None
    """Namespaces whose labels must match (None: every namespace)."""
    namespace_queues: tuple[tuple[str, str], ...] = ()
    """(namespace name or pattern, queue): exact names first, then patterns in file order."""
    manage_without_queue: bool = True

    @classmethod
    def from_config(
        cls,
        section: ScopeConfig,
        scheduler_names: Collection[str],
        protected_namespaces: Collection[str] = (),
        own_namespace: str | None = None,
    ) -> Scope:
        """The scope of ``scope:`` for schedulers ``scheduler_names``; ``own_namespace`` is
        runway's (None outside a pod)."""
        excluded = set(NEVER_MANAGED) | set(protected_namespaces)
        if own_namespace:
            excluded.add(own_namespace)
        mapping = section.namespace_queues.items()
        exact = [(ns, q) for ns, q in mapping if not any(c in ns for c in "*?")]
        patterns = [(ns, q) for ns, q in mapping if any(c in ns for c in "*?")]
        return cls(
            scheduler_names=frozenset(scheduler_names),
            excluded=frozenset(excluded),
            selector=selectors.from_config(section.namespace_selector),
            namespace_queues=(*exact, *patterns),
            manage_without_queue=section.manage_without_queue,
        )

    @property
    def uses_namespace_labels(self) -> bool:
        """Whether a namespace's labels decide (runway must watch Namespaces)."""
        return self.selector is not None


EVERY_POD = Scope(scheduler_names=frozenset(), excluded=frozenset())
"""Every pod is managed: the scope of tests and tools that handle pods without a config."""


def namespace_queue(scope: Scope, namespace: str) -> str | None:
    """The queue ``scope.namespaceQueues`` maps ``namespace`` to (None: none)."""
    for pattern, queue in scope.namespace_queues:
        if pattern == namespace or fnmatchcase(namespace, pattern):
            return queue
    return None


def names_queue(pod: Pod) -> bool:
    """Whether the pod names a queue by one of the labels runway reads."""
    return any(pod.label(key) for key in QUEUE_LABELS)


def unmanaged(scope: Scope, pod: Pod, namespace_labels: Mapping[str, str] | None) -> str:
    """Why runway does not manage ``pod`` (a sentence an operator can act on); empty when it
    does."""
    scheduler = pod.spec.schedulerName or DEFAULT_SCHEDULER
    if scope.scheduler_names and scheduler not in scope.scheduler_names:
        return (
            f"it is scheduled by {scheduler!r}, not by a scheduler runway serves "
            f"({', '.join(sorted(scope.scheduler_names))}: preemption.schedulerNames)"
        )
    namespace = pod.metadata.namespace
    if namespace in scope.excluded:
        return (
            f"namespace {namespace} is never managed (kube-system, "
            "preemption.protectedNamespaces and runway's own namespace)"
        )
    if scope.selector is not None and not scope.selector.matches(namespace_labels):
        shown = scope.selector.text or "{}"
        return (
            f"the labels of namespace {namespace} do not match scope.namespaceSelector "
            f"({shown}); label the namespace to have runway manage its pods"
        )
    if (
        not scope.manage_without_queue
        and not names_queue(pod)
        and namespace_queue(scope, namespace) is None
    ):
        return (
            "it names no queue (label runway.dev/queue) and its namespace is mapped to none "
            "(scope.namespaceQueues); label the pod, map the namespace, or set "
            "scope.manageWithoutQueue: true"
        )
    return ""


__all__ = [
    "EVERY_POD",
    "NEVER_MANAGED",
    "Scope",
    "names_queue",
    "namespace_queue",
    "unmanaged",
]
