"""The preemption budget (issue #16) on a real kube-scheduler + kube-apiserver.

A bare-pod workload in queue team-a (``preemptionBudget: {maxPreemptions: 1, window: 1h}``, no
min-runtime) carries a preemption history of one preemption a minute ago: runway refuses to
preempt it for a high-priority pod of team-b, and ``/v1/explain`` names the budget. Once the
history is removed (as if the window had passed), the next preempt call takes it, and runway
writes the new preemption into ``status.eviction.preemptionHistory`` of the victim's
WorkloadRecord. The history is seeded on the record (``pod.low``), where only runway and
administrators write; the same history in annotations on the pod, which a tenant writes, is
not read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.model.timestamps import format_time
from tests.e2e.conftest import (
    ControlPlane,
    RunwayHandle,
    poll,
    runway_scheduling,
)
from tests.e2e.test_preemption_e2e import (
    SCHEDULER,
    bound_and_running,
    decisions_for,
    get_pod,
    nudge,
    pod,
    setup_ns,
)

pytestmark = pytest.mark.e2e

RETIRED_HISTORY = "runway.dev/preemption-history"
"""Where earlier versions kept the history: a tenant's annotation, never read any more."""


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, RunwayHandle]]:
    plane = dedicated_plane
    config = {
        "queues": [
            {"name": "org"},
            {
                "name": "team-a",
                "parent": "org",
                "preemptionBudget": {"maxPreemptions": 1, "window": "1h"},
            },
            {"name": "team-b", "parent": "org"},
        ],
        "kubernetes": {"leaderElection": {"enable": False}},
        "preemption": {"gateTimeout": "60s", "schedulerNames": [SCHEDULER]},
        "logging": {"level": "info"},
    }
    with runway_scheduling(
        plane,
        tmp_path_factory.mktemp("budget"),
        config,
        scheduler_name=SCHEDULER,
        priorities={"low": 100, "high": 1000},
    ) as rw:
        yield plane, rw


def test_exhausted_budget_protects_then_the_history_grows(
    stack: tuple[ControlPlane, RunwayHandle],
) -> None:
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "2")
    earlier = format_time(time.time() - 60)
    # The victim is a bare pod labelled runway.dev/workload=low: its record is wl.low.
    record = plane.write_record(
        ns,
        "low",
        "label",
        {"eviction": {"reason": "Preempted", "time": earlier, "preemptionHistory": [earlier]}},
    )
    assert record["metadata"]["name"] == "wl.low"
    pod(plane, ns, "low", queue="team-a", cpu="2", priority="low")
    assert poll(lambda: bound_and_running(plane, ns, "low"), within=60, what="low bound") == node
    pod(plane, ns, "high", queue="team-b", cpu="2", priority="high")

    def refused_by_budget() -> bool:
        for d in decisions_for(rw, f"{ns}/high"):
            for n in d["nodes"]:
                for v in n["pods"]:
                    if v["pod"] == f"{ns}/low" and v["protectedBy"] == "budget":
                        return d["chosenNode"] is None
        return False

    poll(refused_by_budget, within=30, what="runway refuses: low's budget is exhausted")
    why = rw.get(f"/v1/explain?preemptor={ns}/high&victim={ns}/low")
    assert why["protectedBy"] == "budget" and not why["eligible"]
    text = "preempted 1 time in the last 1h (budget of queue team-a: 1 per 1h)"
    assert text in why["explanation"]
    low = get_pod(plane, ns, "low")
    assert low is not None and not low["metadata"].get("deletionTimestamp")

    # The window "passes": the history goes; the next preempt call takes the victim.
    r = plane.api.patch(
        f"/apis/runway.dev/v1alpha1/namespaces/{ns}/workloadrecords/wl.low/status",
        json={"status": {"eviction": {"preemptionHistory": None}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    before = time.time()

    def new_history() -> list[str] | None:
        nudge(plane, node)
        value = plane.record_status(ns, "wl.low", "eviction").get("preemptionHistory")
        return list(value) if value else None

    written = poll(new_history, within=60, every=1, what="the new preemption in the history")
    assert len(written) == 1, written  # a budget of 1 keeps the last preemption only
    assert written[0] >= format_time(before - 1)
    eviction = plane.record_status(ns, "wl.low", "eviction")
    assert eviction["reason"] == "Preempted"
    assert eviction["preemptorUID"] == (get_pod(plane, ns, "high") or {})["metadata"]["uid"]
    low = get_pod(plane, ns, "low")
    assert low is None or bool(low["metadata"].get("deletionTimestamp"))


def test_a_history_written_by_the_tenant_is_not_read(
    stack: tuple[ControlPlane, RunwayHandle],
) -> None:
    """The retired annotations on a pod are a tenant's words: an exhausted "history" there
    protects nothing."""
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "2")
    earlier = format_time(time.time() - 60)
    forged = {
        "runway.dev/eviction-reason": "Preempted",
        "runway.dev/eviction-time": earlier,
        RETIRED_HISTORY: earlier,
    }
    pod(plane, ns, "low", queue="team-a", cpu="2", priority="low", annotations=forged)
    assert poll(lambda: bound_and_running(plane, ns, "low"), within=60, what="low bound") == node
    pod(plane, ns, "high", queue="team-b", cpu="2", priority="high")

    def preempted() -> bool:
        nudge(plane, node)
        p = get_pod(plane, ns, "low")
        return p is None or bool(p["metadata"].get("deletionTimestamp"))

    poll(preempted, within=60, every=1, what="the victim is preempted despite its annotations")
    for d in decisions_for(rw, f"{ns}/high"):
        for n in d["nodes"]:
            assert all(v["protectedBy"] != "budget" for v in n["pods"]), d
    history = poll(
        lambda: plane.record_status(ns, "wl.low", "eviction").get("preemptionHistory"),
        within=30,
        what="runway's own history of the preemption",
    )
    assert history != [earlier] and len(history) == 1
