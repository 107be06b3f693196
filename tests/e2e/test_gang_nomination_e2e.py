"""No preemption of nobody for a pending gang (issue #35, low) on a real kube-scheduler.

What the operator saw: "success" preemptions with 0 victims that nominated both pods of a
pending gang to one node. kube-scheduler offers runway a node whose only victim runway refuses
(protected by min-runtime), and by runway's count the node has room without evicting anyone:
before ``c799821`` runway then answered a preemption of nobody — nothing deleted, the preemptor
nominated to the node — once per gang pod. Now the node is dropped with the reason
(``policy/victims/decide._plan_node``): no preemption, no nomination.

Where the two counts part on the real scheduler: the node's pods are a protected low-priority
pod and a pod of the gang's priority that is shutting down (deleted, terminating until its
kubelet lets it go). kube-scheduler's cache counts the terminating pod's room until it is gone,
so the gang does not fit and the dry run offers the low pod (the only one of lower priority);
runway counts a terminating pod as going (it holds nothing to free), so once the protected
victim is dropped the node has room for both gang pods (the first one's nomination counted for
the second: ``state/preemption`` ``nominated``). The same disagreement comes from a filter
beyond resources (pod anti-affinity, host ports) that only the refused victim violates.

(The issue's first mechanism — the second pod's dry run counting the first one's nomination,
which runway did not count — is closed by ``c571d0b``: runway counts the pods nominated to a
node at the preemptor's priority or above, and drops such a node as "free only ...".)

Played here: the test is the kubelet (marks bound pods Running, lets the terminating pod go).
A user sees: a decision per gang pod with the node dropped and the reason
(``/v1/preemptions/decisions``), no preemption task for either (``/v1/preemptions``), no
``nominatedNodeName`` on either while they wait, and both bound to the node once the
terminating pod is gone, the protected pod untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import ControlPlane, RunwayHandle, poll
from tests.e2e.test_preemption_e2e import (
    SCHEDULER,
    bound_and_running,
    decisions_for,
    get_pod,
    kubelet_reap,
    pod,
    setup_ns,
)
from tests.e2e.webhook import gated_runway_scheduling

pytestmark = pytest.mark.e2e

GANG = ("g-0", "g-1")
NO_VICTIM_NEEDED = "no victim needed on {node} by runway's count"
"""How the node's record in a decision starts (``decide._plan_node``)."""


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, RunwayHandle]]:
    plane = dedicated_plane
    config = {
        "queues": [
            {"name": "org"},
            {"name": "team-b", "parent": "org"},
            {"name": "team-c", "parent": "org", "reclaimMinRuntime": "1h"},
        ],
        "kubernetes": {"leaderElection": {"enable": False}},
        # takeover on every release (auto lets kube-scheduler execute from 1.33: DESIGN §1.1):
        # a preemption of nobody was runway's own nomination
        "preemption": {"async": True, "gateTimeout": "60s", "schedulerNames": [SCHEDULER]},
        "logging": {"level": "info"},
    }
    with gated_runway_scheduling(
        plane,
        tmp_path_factory.mktemp("gang"),
        config,
        scheduler_name=SCHEDULER,
        priorities={"low": 100, "high": 1000},
        probe_namespace="gang-probe",
    ) as rw:
        yield plane, rw


def nominations(plane: ControlPlane, ns: str) -> dict[str, str]:
    """The gang pods' ``status.nominatedNodeName``, where set."""
    found = {}
    for name in GANG:
        p = get_pod(plane, ns, name)
        node = p and p["status"].get("nominatedNodeName")
        if node:
            found[name] = str(node)
    return found


def gang_tasks(rw: RunwayHandle, ns: str) -> list[dict[str, Any]]:
    """Preemption tasks (in flight or finished) of the gang's pods."""
    view = rw.get("/v1/preemptions")
    mine = {f"{ns}/{name}" for name in GANG}
    return [t for t in view["inFlight"] + view["recent"] if t["preemptor"] in mine]


def test_a_pending_gang_is_not_nominated_by_a_preemption_of_nobody(
    stack: tuple[ControlPlane, RunwayHandle],
) -> None:
    plane, rw = stack
    ns, (node,) = setup_ns(plane, 1, "4")

    # The node: a low-priority pod protected for an hour (team-c's reclaimMinRuntime: the gang
    # is in team-b), and a pod of the gang's priority that is shutting down.
    pod(plane, ns, "low", queue="team-c", cpu="2", priority="low")
    assert poll(lambda: bound_and_running(plane, ns, "low"), within=60, what="low") == node
    pod(plane, ns, "old", queue="team-b", cpu="2", priority="high")
    assert poll(lambda: bound_and_running(plane, ns, "old"), within=60, what="old") == node
    r = plane.api.delete(f"/api/v1/namespaces/{ns}/pods/old")  # its grace period: 30 s
    assert r.status_code == 200, r.text
    old = get_pod(plane, ns, "old")
    assert old is not None and old["metadata"].get("deletionTimestamp"), old

    # The gang: two pods of 1 CPU that run only together. kube-scheduler sees no room (low and
    # the terminating old fill the node) and offers low; runway refuses it (protected).
    for name in GANG:
        pod(
            plane,
            ns,
            name,
            queue="team-b",
            cpu="1",
            priority="high",
            workload="g",
            annotations={"runway.dev/min-available": "2"},
        )

    def decided() -> dict[str, list[dict[str, Any]]] | None:
        found = {name: decisions_for(rw, f"{ns}/{name}") for name in GANG}
        return found if all(found.values()) else None

    decisions = poll(decided, within=60, what="runway's decision for each gang pod")

    # What a user sees while the gang waits: no preemption of nobody...
    for name, made in decisions.items():
        chosen = [d for d in made if d["chosenNode"] is not None]
        assert not chosen, (
            f"{name}: runway preempted "
            f"{', '.join(str(len(d['victims'])) for d in chosen)} victim(s) on "
            f"{', '.join(d['chosenNode'] for d in chosen)} (a preemption of nobody nominates the "
            f"pod there): {chosen}"
        )
        records = [n for d in made for n in d["nodes"] if n["node"] == node]
        assert records, (name, made)
        assert all(n["outcome"] == "dropped" for n in records), (name, records)
        assert any(n["reason"].startswith(NO_VICTIM_NEEDED.format(node=node)) for n in records), (
            name,
            records,
        )
        offered = {p["pod"]: p for n in records for p in n["pods"]}
        assert offered[f"{ns}/low"]["protected"], offered
        assert offered[f"{ns}/low"]["outcome"] == "dropped", offered
    assert gang_tasks(rw, ns) == []
    assert nominations(plane, ns) == {}
    # ... and it stays so while kube-scheduler retries them (a node update re-queues both).
    seen = sum(len(made) for made in decisions.values())

    def retried() -> bool:
        plane.nudge_node(node)
        return sum(len(decisions_for(rw, f"{ns}/{name}")) for name in GANG) > seen

    poll(retried, within=30, every=1, what="kube-scheduler retries the gang's preemption")
    assert gang_tasks(rw, ns) == []
    assert nominations(plane, ns) == {}
    assert all(d["chosenNode"] is None for name in GANG for d in decisions_for(rw, f"{ns}/{name}"))

    # Room really exists once the kubelet lets the old pod go: the gang binds there together
    # (kube-scheduler retries both on the pod's deletion), and the protected pod stays.
    assert kubelet_reap(plane, ns) == ["old"]

    def gang_bound() -> bool:
        return all(bound_and_running(plane, ns, name) == node for name in GANG)

    poll(gang_bound, within=60, every=0.5, what="both gang pods bind to the node")
    low = get_pod(plane, ns, "low")
    assert low is not None and not low["metadata"].get("deletionTimestamp"), low
    assert gang_tasks(rw, ns) == []
