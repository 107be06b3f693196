"""The preemption cross-check (policy/crosscheck.py): never delete on the word of a request."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.model import Pod
from app.policy.crosscheck import REASONS, check_preemptor, check_victims


def pod(
    name: str,
    *,
    node: str | None = None,
    priority: int = 0,
    scheduler: str | None = None,
    deleting: bool = False,
) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2027-01-01T00:00:00Z"
    spec: dict[str, Any] = {"priority": priority, "nodeName": node, "schedulerName": scheduler}
    return msgspec.convert({"metadata": meta, "spec": spec}, Pod)


NAMES = frozenset({"default-scheduler"})


@pytest.mark.parametrize(
    ("cached", "reason"),
    [
        (None, "preemptor-unknown"),
        (pod("p", node="n1"), "preemptor-bound"),
        (pod("p", deleting=True), "preemptor-deleting"),
        (pod("p", scheduler="someone-else"), "preemptor-scheduler"),
        (pod("p"), None),
        (pod("p", scheduler="default-scheduler"), None),
    ],
)
def test_check_preemptor(cached: Pod | None, reason: str | None) -> None:
    refusal = check_preemptor("uid-p", cached, NAMES)
    assert (refusal.reason if refusal else None) == reason
    if refusal is not None:
        assert refusal.reason in REASONS and refusal.message


@pytest.mark.parametrize(
    ("victim", "reason"),
    [
        (None, "victim-unknown"),
        (pod("v", node="n2", priority=1), "victim-elsewhere"),
        (pod("v", node=None, priority=1), "victim-elsewhere"),
        (pod("v", node="n1", priority=100), "victim-priority"),
        (pod("v", node="n1", priority=2_000_000_000), "victim-priority"),
        (pod("v", node="n1", priority=1), None),
        (pod("v", node="n1", priority=1, deleting=True), None),  # already going: a no-op delete
    ],
)
def test_check_victims(victim: Pod | None, reason: str | None) -> None:
    refusal = check_victims(100, "n1", [("uid-v", victim)])
    assert (refusal.reason if refusal else None) == reason
