"""The filter verb's decision: may this pod be placed now, and on which of the offered nodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.model import Pod


@dataclass(frozen=True)
class Admission:
    """A filter verdict for one pod.

    runway's rules (backoff, gate, FIFO...) judge the pod, not the node, so a verdict applies to
    every offered node except that the gate may keep the pod's nominated node open.
    """

    allowed: bool
    only_nodes: frozenset[str] | None = None
    """When allowed: restrict to these nodes (the gate's nominated node); None = every node."""
    reason: str = ""
    """For rejected nodes: what, until when, and what to do — shown in the pod's events."""
    rule: str = ""
    """Short name of the rule that rejected (a metric label), empty when allowed."""


ADMIT = Admission(allowed=True)


def admit(pod: Pod) -> Admission:
    """Decide whether ``pod`` may be placed now.

    The requeue and gate rules (SPEC §4, §5) plug in here; until they are configured every pod
    is admitted everywhere.
    """
    del pod
    return ADMIT


@dataclass(frozen=True)
class NodeSplit:
    """How a verdict splits the offered nodes: passed (None = all), and rejected with reasons."""

    passed: list[str] | None
    unresolvable: dict[str, str]


def split_nodes(admission: Admission, offered: Sequence[str]) -> NodeSplit:
    """Apply a verdict to the offered nodes.

    Rejected nodes go to ``FailedAndUnresolvableNodes`` so kube-scheduler does not try to preempt
    on the pod's behalf: no victim would make a pod in backoff or in the gate schedulable.
    """
    if admission.allowed and admission.only_nodes is None:
        return NodeSplit(passed=None, unresolvable={})
    keep = admission.only_nodes if admission.allowed else frozenset()
    assert keep is not None
    passed = [n for n in offered if n in keep]
    return NodeSplit(
        passed=passed, unresolvable={n: admission.reason for n in offered if n not in keep}
    )
