"""THE rule of pods runway never preempts, whatever a preempt request offers (issue #26).

kube-scheduler's dry run offers any pod of lower priority as a victim; runway's own replicas
(priority 0 without a priorityClassName) were once offered and deleted, leaving the scheduler with
"connection refused". A pod is shielded when it is

* in a namespace the operator protects (``preemption.protectedNamespaces``, ``kube-system`` by
  default): the control plane's pods;
* in runway's own namespace (``preemption.protectOwnNamespace``, on by default): its replicas and
  the bundled scheduler;
* in runway's own namespace and carrying every label of ``preemption.protectedPodLabels`` (the
  chart sets its release's labels): runway's release even where its namespace is not protected.

Labels count only inside runway's own namespace: a tenant may write any label on its own pods,
but only the operator creates pods in runway's namespace. Pure: the caller passes the pod's
namespace and labels and runway's namespace (``None`` outside a pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.config.preemption import PreemptionConfig


@dataclass(frozen=True)
class Shield:
    """Which pods are never victims: protected namespaces and runway's own release."""

    namespaces: frozenset[str] = frozenset()
    """Namespaces whose every pod is shielded (runway's own included when protected)."""
    own_namespace: str | None = None
    """runway's namespace; None outside a pod (the label rule then applies nowhere)."""
    own_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels that mark runway's release inside ``own_namespace``; empty: no label rule."""

    @classmethod
    def from_config(cls, section: PreemptionConfig, own_namespace: str | None) -> Shield:
        """The shield of ``preemption:`` for a runway running in ``own_namespace``."""
        names = set(section.protected_namespaces)
        if section.protect_own_namespace and own_namespace:
            names.add(own_namespace)
        return cls(frozenset(names), own_namespace or None, dict(section.protected_pod_labels))


NO_SHIELD = Shield()
"""Nothing is shielded (tests, and callers without a config)."""


def shielded(shield: Shield, namespace: str, labels: Mapping[str, str] | None) -> str:
    """Why a pod in ``namespace`` with ``labels`` may never be a preemption victim; empty when it
    may be one."""
    if namespace in shield.namespaces:
        own = " (runway's own namespace)" if namespace == shield.own_namespace else ""
        return f"is in protected namespace {namespace}{own}: runway never preempts it"
    if (
        shield.own_labels
        and shield.own_namespace is not None
        and namespace == shield.own_namespace
        and labels is not None
        and all(labels.get(k) == v for k, v in shield.own_labels.items())
    ):
        return (
            "is one of runway's own pods (preemption.protectedPodLabels): runway never preempts it"
        )
    return ""


__all__ = ["NO_SHIELD", "Shield", "shielded"]
