"""Preemption in runway's default mode (``preemption.async: auto``, DESIGN §4.3, §4.4) on each
release: takeover on 1.20 (runway deletes), kube-scheduler executes from 1.33 (it deletes the
victims runway's ``preempt`` names, off its cycle).

A victim whose DELETE is refused (a webhook) must not strand the preemptor: once the refusal
lifts, the preemptor binds within seconds on every release. Before runway opened its gate on the
scheduler's failure, 1.37.2 bound it 307 s after the lift: runway's gate answered the
scheduler's retry ``{}`` (held), which parks the pod as unschedulable by NodeResourcesFit, and
from 1.32 nothing but a resource event or the 5-minute flush re-queues such a pod.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.policy.releases import release_of
from tests.e2e.conftest import ControlPlane, RunwayHandle, poll
from tests.e2e.test_preemption_e2e import (
    SCHEDULER,
    bound_and_running,
    kubelet_reap,
    pod,
    running_victims,
    runway_samples,
    setup_ns,
)
from tests.e2e.webhook import UNDELETABLE, DeleteWebhook, gated_runway_scheduling

pytestmark = pytest.mark.e2e

LIFTED_BAR_S = 15.0
"""The preemptor binds within this of the refusal's end: above runway's failure back-off at
the test's second refusal (takeover: 2 s, then a wake-up), below every release's flush (60 s on
1.20, 5 minutes from 1.32)."""


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, RunwayHandle]]:
    config = {
        "queues": [{"name": "org"}, {"name": "team-b", "parent": "org"}],
        "kubernetes": {"leaderElection": {"enable": False}},
        # preemption.async left at its default (auto): the mode is the release's
        "preemption": {"gateTimeout": "60s", "schedulerNames": [SCHEDULER]},
        "logging": {"level": "info"},
    }
    with gated_runway_scheduling(
        dedicated_plane,
        tmp_path_factory.mktemp("default-mode"),
        config,
        scheduler_name=SCHEDULER,
        priorities={"low": 100, "high": 1000},
        probe_namespace="pre-probe",
    ) as rw:
        yield dedicated_plane, rw


@pytest.fixture
def hook(stack: tuple[ControlPlane, RunwayHandle]) -> Iterator[DeleteWebhook]:
    plane, _ = stack
    with DeleteWebhook(delay_s=0.0) as webhook:
        webhook.register(plane)
        yield webhook


def test_a_refused_victim_does_not_strand_the_preemptor(
    stack: tuple[ControlPlane, RunwayHandle], hook: DeleteWebhook
) -> None:
    plane, rw = stack
    takeover = release_of(plane.release, "test").takeover("auto")
    deleter = "runway" if takeover else "scheduler"
    ns, (node,) = setup_ns(plane, 1, "2")
    running_victims(plane, ns, 1, labels={UNDELETABLE: "true"})  # low-0
    pod(plane, ns, "low-1", queue="team-b", cpu="1", priority="low")
    poll(lambda: bound_and_running(plane, ns, "low-1"), within=60, what="low-1")
    pod(plane, ns, "high", queue="team-b", cpu="2", priority="high")

    def refused() -> list[float]:
        return [
            c.at
            for c in hook.calls_in(ns)
            if c.name == "low-0" and not c.allowed and c.caller == deleter
        ]

    # The refusal lasts: the preemption is retried (kube-scheduler's own retry when it executes,
    # runway's after its back-off in takeover), not given up.
    def refused_twice() -> bool:
        kubelet_reap(plane, ns)  # the kubelet: a victim the scheduler did delete goes
        return len(refused()) >= 2

    poll(refused_twice, within=60, what=f"two refused DELETEs of low-0 ({deleter})")
    if not takeover:
        left = sum(v for _, v in runway_samples(rw, "runway_preemptions_left_by_scheduler_total"))
        assert left >= 1, "runway saw the scheduler's preemption fail and decided again"

    plane.api.patch(
        f"/api/v1/namespaces/{ns}/pods/low-0",
        json={"metadata": {"labels": {UNDELETABLE: None}}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).raise_for_status()
    lifted = time.monotonic()

    def high_bound() -> bool:
        kubelet_reap(plane, ns)  # the kubelet: a deleted victim goes once asked
        return bound_and_running(plane, ns, "high") == node

    poll(high_bound, within=LIFTED_BAR_S, every=0.2, what="the preemptor bound after the lift")
    took = time.monotonic() - lifted
    assert took <= LIFTED_BAR_S, took
    # Each victim deleted by whoever executes the mode, never by the other.
    allowed = {c.caller for c in hook.calls_in(ns) if c.allowed and c.name.startswith("low-")}
    assert allowed <= {deleter, "kubelet"}, allowed
