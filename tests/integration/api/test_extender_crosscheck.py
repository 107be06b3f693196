"""The preempt verb with a cluster cache (DESIGN §4.7 "never delete on the word of a request"): a
forged payload — a victim of higher priority, a made-up preemptor priority, a preemptor that does
not exist or is bound, a victim on another node — gets ``{}``, a counted refusal and no API call.
A genuine one is taken over: ``{}`` to kube-scheduler, a plan with the cache's priority."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import msgspec
import pytest

from app import metrics
from app.api.extender import handle_filter, plan_preempt
from app.clock import ManualClock
from app.config import parse_config
from app.model import Node, Pod
from app.model.gate import GateEntry, PodRef
from app.server import create_app
from app.wiring import Runway
from tests.feed import ArrivingFeed
from tests.integration.kube_fake import FakeApi
from tests.integration.kube_helpers import client

NOW = 1_800_000_000.0


def pod(name: str, *, node: str | None, priority: int, scheduler: str | None = None) -> Pod:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "prod", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node,
            "priority": priority,
            "schedulerName": scheduler,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    return msgspec.convert(raw, Pod)


PREEMPTOR = pod("batch-high", node=None, priority=1000)
VICTIM = pod("batch-low", node="n1", priority=10)
PAYMENTS = pod("payments-db-0", node="n1", priority=2_000_000_000)
BOUND = pod("already-bound", node="n2", priority=1000)
OTHER = pod("other-scheduler", node=None, priority=1000, scheduler="volcano")


def body(preemptor: dict[str, Any], victims: dict[str, list[str]]) -> bytes:
    return json.dumps(
        {
            "Pod": preemptor,
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
                for node, uids in victims.items()
            },
        }
    ).encode()


def as_payload(p: Pod, **spec: Any) -> dict[str, Any]:
    raw: dict[str, Any] = msgspec.to_builtins(p)
    raw["spec"].update(spec)
    return raw


@pytest.fixture
def runway() -> Runway:
    api = FakeApi()
    # One replica, no election: it decides preemptions (a follower would not, see below).
    config = parse_config({"kubernetes": {"leaderElection": {"enable": False}}})
    app = create_app(config, ManualClock(NOW), kube=client(api.transport))
    rt: Runway = app.state.runway
    rt.cache.replace_pods([PREEMPTOR, VICTIM, PAYMENTS, BOUND, OTHER])
    rt.cache.replace_nodes([])
    rt.api = api  # type: ignore[attr-defined]
    return rt


@pytest.mark.parametrize(
    ("payload", "victims", "reason"),
    [
        (
            {"metadata": {"name": "ghost", "namespace": "prod", "uid": "uid-ghost"}},
            {"n1": ["uid-batch-low"]},
            "preemptor-unknown",
        ),
        (as_payload(BOUND), {"n1": ["uid-batch-low"]}, "preemptor-bound"),
        (as_payload(OTHER), {"n1": ["uid-batch-low"]}, "preemptor-scheduler"),
        (as_payload(PREEMPTOR), {"n2": ["uid-batch-low"]}, "victim-elsewhere"),
        (as_payload(PREEMPTOR), {"n1": ["uid-nobody"]}, "victim-unknown"),
    ],
)
def test_a_forged_preemption_is_refused_without_an_api_call(
    runway: Runway, payload: dict[str, Any], victims: dict[str, list[str]], reason: str
) -> None:
    before = metrics.PREEMPTIONS_REFUSED.labels(reason)._value.get()
    reply, outcome = plan_preempt(runway.api_context(), body(payload, victims))
    assert json.loads(reply) == {"NodeNameToMetaVictims": {}}
    assert outcome.plan is None
    assert outcome.refusal is not None and outcome.refusal.reason == reason
    assert metrics.PREEMPTIONS_REFUSED.labels(reason)._value.get() == before + 1
    assert runway.api.requests == []  # type: ignore[attr-defined]
    assert len(runway.gate) == 0


def test_a_made_up_priority_never_makes_a_production_pod_a_victim(runway: Runway) -> None:
    # The attack: priority 2147483647 in the payload, prod/payments-db-0 as the victim.
    payload = as_payload(PREEMPTOR, priority=2_147_483_647)
    _, outcome = plan_preempt(runway.api_context(), body(payload, {"n1": ["uid-payments-db-0"]}))
    victims = [v.key for v in outcome.plan.victims] if outcome.plan is not None else []
    assert "prod/payments-db-0" not in victims
    assert outcome.plan is None or outcome.plan.priority == 1000  # the cache's, not the payload's


def test_a_genuine_preemption_is_taken_over_with_the_caches_priority(runway: Runway) -> None:
    # The payload understates the priority: the cache's value is the one used.
    payload = as_payload(PREEMPTOR, priority=5)
    reply, outcome = plan_preempt(runway.api_context(), body(payload, {"n1": ["uid-batch-low"]}))
    assert json.loads(reply) == {"NodeNameToMetaVictims": {}}  # kube-scheduler deletes nothing
    assert outcome.refusal is None and outcome.plan is not None
    assert outcome.plan.node == "n1" and outcome.plan.priority == 1000
    assert [v.key for v in outcome.plan.victims] == ["prod/batch-low"]


def test_a_claim_keeps_other_preemptors_and_lower_pods_off_the_node(runway: Runway) -> None:
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2"}}}
    runway.cache.replace_nodes([msgspec.convert(node, Node)])
    second = pod("batch-high-2", node=None, priority=1000)
    low = pod("filler", node=None, priority=0)
    runway.cache.upsert_pod(second)
    runway.cache.upsert_pod(low)
    ctx = runway.api_context()
    _, first = plan_preempt(ctx, body(as_payload(PREEMPTOR), {"n1": ["uid-batch-low"]}))
    assert first.plan is not None
    runway.executor.hold(first.plan)  # what submit() does before its task starts
    # Another preemptor is not given the claimed node...
    _, other = plan_preempt(ctx, body(as_payload(second), {"n1": ["uid-batch-low"]}))
    assert other.plan is None and other.decision is not None
    (dropped,) = other.decision.nodes
    assert "claimed by the preemption in flight of prod/batch-high" in dropped.reason
    # ...and filter keeps a lower-priority pod off it: 2 CPUs - payments 1 - preemptor 1 = 0.
    args = json.dumps({"Pod": as_payload(low), "NodeNames": ["n1", "n2"]}).encode()
    result = json.loads(handle_filter(ctx, args))
    assert result["NodeNames"] == ["n2"]
    assert "kept free for a preemption in flight" in result["FailedAndUnresolvableNodes"]["n1"]
    # The preemptor itself still passes its node.
    mine = json.dumps({"Pod": as_payload(PREEMPTOR), "NodeNames": ["n1", "n2"]}).encode()
    assert json.loads(handle_filter(ctx, mine))["NodeNames"] == ["n1"]


def test_preempt_reads_victims_with_every_event_that_has_arrived(runway: Runway) -> None:
    """Under load the pod watch applies events in batches: a victim bound a moment ago may
    still sit on the socket. preempt applies what has arrived before it reads the cache, so the
    victim is known (not refused as ``victim-unknown``)."""
    fresh = pod("batch-fresh", node="n1", priority=10)
    feed = ArrivingFeed(runway.cache)
    feed.arriving = [fresh]
    runway.cache.feed = feed
    payload = as_payload(PREEMPTOR)
    _, outcome = plan_preempt(runway.api_context(), body(payload, {"n1": ["uid-batch-fresh"]}))
    assert feed.calls == ["catch_up"]
    assert outcome.refusal is None and outcome.plan is not None
    assert [v.key for v in outcome.plan.victims] == ["prod/batch-fresh"]


def _in(namespace: str, p: Pod, labels: dict[str, str] | None = None) -> Pod:
    raw: dict[str, Any] = msgspec.to_builtins(p)
    raw["metadata"].update(namespace=namespace, uid=f"uid-{namespace}-{p.metadata.name}")
    raw["metadata"]["labels"] = labels or {}
    return msgspec.convert(raw, Pod)


@pytest.mark.parametrize(
    ("config", "namespace", "labels"),
    [
        ({}, "kube-system", None),  # the control plane (preemption.protectedNamespaces)
        ({}, "runway-system", None),  # runway's own namespace (POD_NAMESPACE)
        (  # its own release, even where the operator does not protect its namespace
            {"preemption": {"protectOwnNamespace": False, "protectedPodLabels": {"app": "rw"}}},
            "runway-system",
            {"app": "rw"},
        ),
    ],
)
def test_runway_never_preempts_itself_or_the_control_plane(
    monkeypatch: pytest.MonkeyPatch,
    config: dict[str, Any],
    namespace: str,
    labels: dict[str, str] | None,
) -> None:
    """Issue #26: kube-scheduler offered runway's own replicas (priority 0) as victims."""
    monkeypatch.setenv("POD_NAMESPACE", "runway-system")
    api = FakeApi()
    # one replica, no election: it decides preemptions
    config = {**config, "kubernetes": {"leaderElection": {"enable": False}}}
    app = create_app(parse_config(config), ManualClock(NOW), kube=client(api.transport))
    rt: Runway = app.state.runway
    shielded = _in(namespace, pod("runway-7d9", node="n1", priority=0), labels)
    tenant = pod("batch-low", node="n1", priority=10)
    rt.cache.replace_pods([PREEMPTOR, shielded, tenant])
    rt.cache.replace_nodes([])
    offer = {"n1": [shielded.metadata.uid]}
    _, outcome = plan_preempt(rt.api_context(), body(as_payload(PREEMPTOR), offer))
    # the shielded pod is dropped; the tenant's lower-priority pod on the node replaces it
    assert outcome.plan is not None
    assert [v.key for v in outcome.plan.victims] == ["prod/batch-low"]
    # offered alone on a node where nothing else may go: no preemption at all
    rt.cache.replace_pods([PREEMPTOR, shielded])
    _, outcome = plan_preempt(rt.api_context(), body(as_payload(PREEMPTOR), offer))
    assert outcome.plan is None and api.requests == []


# --- replicas (issue #27 item 3): only the leader decides preemptions -------------------------


class _Follower:
    """The cluster facts of a replica that is not the leader."""

    leadership = False


def test_a_follower_answers_preempt_with_nothing_and_decides_nothing(runway: Runway) -> None:
    ctx = dataclasses.replace(runway.api_context(), cluster=_Follower())  # type: ignore[arg-type]
    before = metrics.PREEMPTIONS_REFUSED.labels("not-leader")._value.get()
    reply, outcome = plan_preempt(ctx, body(as_payload(PREEMPTOR), {"n1": ["uid-batch-low"]}))
    assert json.loads(reply) == {"NodeNameToMetaVictims": {}}
    assert outcome.plan is None and outcome.decision is None
    assert outcome.refusal is not None and outcome.refusal.reason == "not-leader"
    assert metrics.PREEMPTIONS_REFUSED.labels("not-leader")._value.get() == before + 1
    assert len(runway.gate) == 0 and runway.decisions.about("prod/batch-high", "") is None
    # The leader (the same request on the same state) decides and plans.
    _, leader = plan_preempt(
        runway.api_context(), body(as_payload(PREEMPTOR), {"n1": ["uid-batch-low"]})
    )
    assert leader.plan is not None


def test_a_follower_holds_a_preemptor_the_leader_mirrored_on_its_record(runway: Runway) -> None:
    """Gate and claim hold whatever replica a filter call reaches: the follower reads them from
    the preemptor's WorkloadRecord (``set_mirrored``), as far as its cache confirms them."""
    entry = GateEntry(
        PodRef.of(PREEMPTOR), "n1", (PodRef.of(VICTIM),), since=NOW, deadline=NOW + 60
    )
    runway.gate.set_mirrored(PREEMPTOR.uid, entry)
    ctx = dataclasses.replace(runway.api_context(), cluster=_Follower())  # type: ignore[arg-type]
    args = json.dumps({"Pod": as_payload(PREEMPTOR), "NodeNames": ["n1", "n2"]}).encode()
    result = json.loads(handle_filter(ctx, args))
    assert result["NodeNames"] == ["n1"]  # only its nominated node


def test_a_follower_closes_the_connection_after_preempt(runway: Runway) -> None:
    """kube-scheduler keeps one connection, and a Service balances connections: closed after a
    follower's refusal, the next one may reach the leader (direct path and ASGI route alike)."""
    from app.api.extender import closes_after

    follower = dataclasses.replace(runway.api_context(), cluster=_Follower())  # type: ignore[arg-type]
    assert closes_after(follower, "preempt")
    assert not closes_after(follower, "filter")
    assert not closes_after(runway.api_context(), "preempt")  # the leader keeps it


async def test_a_preemption_whose_records_cannot_be_written_still_frees_the_node() -> None:
    """Issue #36: a victim (or preemptor) whose WorkloadRecord the API server refuses is not
    protected by the refusal: the victim is deleted, the preemption succeeds."""
    api = FakeApi()
    config = parse_config(
        {
            "kubernetes": {"leaderElection": {"enable": False}},
            "scope": {"manageWithoutQueue": True},  # the victim is managed: it has a record
        }
    )
    runway: Runway = create_app(config, ManualClock(NOW), kube=client(api.transport)).state.runway
    runway.cache.replace_pods([PREEMPTOR, VICTIM])
    runway.cache.replace_nodes([])
    for p in (PREEMPTOR, VICTIM):
        raw: dict[str, Any] = msgspec.to_builtins(p)
        raw["metadata"]["resourceVersion"] = "1"
        api.pods[p.key] = raw
    api.record_refusal = (422, "Invalid")
    _, outcome = plan_preempt(
        runway.api_context(), body(as_payload(PREEMPTOR), {"n1": ["uid-batch-low"]})
    )
    assert outcome.plan is not None
    done = await runway.executor.run(outcome.plan)
    assert done.result == "success", done.error
    assert VICTIM.key not in api.pods
    assert not api.records  # nothing written; the eviction is kept in memory
    victim_key = runway.records.cache.workload_keys()
    assert any(runway.records.read(k) is not None for k in victim_key)
