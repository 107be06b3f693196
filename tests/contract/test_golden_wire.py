"""Replay every golden kube-scheduler payload and check what the Go client requires of a reply.

kube-scheduler's extender client (k8s.io/kubernetes/pkg/scheduler/framework/extender.go) fails the
call when a reply names a node it did not send, and for preempt when a node was not offered or a
UID is not a victim on that node. Keys are decoded case-insensitively by Go, but runway replies with
the exact capitalised names.

The payloads come from three releases (tests/data/README.md; ``bench/capture_wire.py`` re-captures
them): 1.20.2 (``wire/*.json``), 1.34.4 and 1.37.2 (``wire/RELEASE/*.json``), the same scenario.
What differs between them, read off the captures:

- The envelope is the same on all three: ``ExtenderArgs`` {Pod, Nodes, NodeNames} and
  ``ExtenderPreemptionArgs`` {Pod, NodeNameToVictims, NodeNameToMetaVictims}, one mode's field
  null; ``Content-Type: application/json``, ``User-Agent: Go-http-client/1.1``.
- 1.34 and 1.37 pods carry ``metadata.generation`` (the preemptor's and, with a NodeList, every
  victim's) and ``status.conditions[].observedGeneration`` (PodObservedGenerationTracking, on from
  1.34); 1.20 pods have neither. runway reads neither.
- The PodScheduled message of a preemptor differs (1.34/1.37 append the preemption's outcome:
  ``preemption: not eligible due to a terminating pod on the nominated node.``).
- 1.37 may start a cycle's node list at any node (the rotating start index): its nodecache filter
  and prioritize were sent ``node-2, node-0, node-1``; 1.20 and 1.34 sent them in name order here.
  Nothing here depends on the order.
- On every release, prioritize is sent the very request filter was sent, and after preemption the
  preemptor's filter is sent its nominated node alone (``*-filter-nominated-node``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.extender import handle_filter, handle_preempt, handle_prioritize
from app.config import RunwayConfig
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.policy.workload import workload_of
from app.server import create_app
from app.wiring import build
from tests.builders import pod as lean_pod
from tests.builders import pool_node, write_record
from tests.reference import wire_cases

CASES = wire_cases()
PRIORITIZE = [c for c in CASES if c["verb"] == "prioritize"]
HANDLERS = {"filter": handle_filter, "prioritize": handle_prioritize, "preempt": handle_preempt}


def sent_node_names(request: dict[str, Any]) -> list[str]:
    if request.get("NodeNames") is not None:
        return list(request["NodeNames"])
    return [n["metadata"]["name"] for n in request["Nodes"]["items"]]


def check_filter(request: dict[str, Any], reply: dict[str, Any], node_cache: bool) -> None:
    assert set(reply) >= {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    assert reply["Error"] == ""
    sent = sent_node_names(request)
    if node_cache:
        assert reply["Nodes"] is None
        returned = reply["NodeNames"]
        assert isinstance(returned, list)
    else:
        assert reply["NodeNames"] is None
        returned = [n["metadata"]["name"] for n in reply["Nodes"]["items"]]
        # Accepted nodes go back as the very objects that were sent.
        by_name = {n["metadata"]["name"]: n for n in request["Nodes"]["items"]}
        for item in reply["Nodes"]["items"]:
            assert item == by_name[item["metadata"]["name"]]
    assert set(returned) <= set(sent)
    assert set(reply["FailedNodes"]) <= set(sent)
    assert set(reply["FailedAndUnresolvableNodes"]) <= set(sent)


def check_prioritize(request: dict[str, Any], reply: list[dict[str, Any]]) -> None:
    sent = set(sent_node_names(request))
    assert isinstance(reply, list)
    hosts = [entry["Host"] for entry in reply]
    assert len(hosts) == len(set(hosts))
    assert set(hosts) <= sent
    for entry in reply:
        assert set(entry) == {"Host", "Score"}
        assert isinstance(entry["Score"], int) and not isinstance(entry["Score"], bool)
        assert 0 <= entry["Score"] <= 10


def offered_victims(request: dict[str, Any]) -> dict[str, set[str]]:
    if request.get("NodeNameToMetaVictims") is not None:
        return {
            node: {p["UID"] for p in (v["Pods"] or [])}
            for node, v in request["NodeNameToMetaVictims"].items()
        }
    return {
        node: {p["metadata"]["uid"] for p in (v["Pods"] or [])}
        for node, v in request["NodeNameToVictims"].items()
    }


def check_preempt(request: dict[str, Any], reply: dict[str, Any]) -> None:
    assert set(reply) == {"NodeNameToMetaVictims"}
    offered = offered_victims(request)
    for node, victims in reply["NodeNameToMetaVictims"].items():
        assert node in offered, f"node {node} was not offered"
        assert set(victims) == {"Pods", "NumPDBViolations"}
        assert isinstance(victims["NumPDBViolations"], int)
        for pod in victims["Pods"]:
            assert set(pod) == {"UID"}
            assert pod["UID"] in offered[node], f"UID {pod['UID']} not offered on {node}"


def check(case: dict[str, Any], reply: Any) -> None:
    request = case["request"]
    if case["verb"] == "filter":
        check_filter(request, reply, case["nodeCacheCapable"])
    elif case["verb"] == "prioritize":
        check_prioritize(request, reply)
    else:
        check_preempt(request, reply)


RELEASES = sorted({c["release"] for c in CASES})


@pytest.mark.parametrize("release", RELEASES)
def test_every_verb_and_mode_is_covered(release: str) -> None:
    seen = {(c["verb"], c["nodeCacheCapable"]) for c in CASES if c["release"] == release}
    assert seen == {(v, m) for v in HANDLERS for m in (True, False)}


def test_releases_captured() -> None:
    """The oldest release runway supports, a 1.34 and the newest the project builds."""
    assert RELEASES == ["1.20.2", "1.34.4", "1.37.2"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_reply_satisfies_the_go_client(case: dict[str, Any]) -> None:
    body = json.dumps(case["request"]).encode()
    reply = json.loads(HANDLERS[case["verb"]](build(RunwayConfig()).api_context(), body))
    check(case, reply)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_accepted_response_shape_matches(case: dict[str, Any]) -> None:
    """With no policy configured, runway's reply carries what the captured reply carried."""
    body = json.dumps(case["request"]).encode()
    reply = json.loads(HANDLERS[case["verb"]](build(RunwayConfig()).api_context(), body))
    accepted = case["accepted_response"]
    if case["verb"] == "filter":
        key = "NodeNames" if case["nodeCacheCapable"] else "Nodes"
        names = (
            reply[key]
            if case["nodeCacheCapable"]
            else [n["metadata"]["name"] for n in reply["Nodes"]["items"]]
        )
        want = (
            accepted[key]
            if case["nodeCacheCapable"]
            else [n["metadata"]["name"] for n in accepted["Nodes"]["items"]]
        )
        assert names == want
    elif case["verb"] == "prioritize":
        # No policy, no preference: the empty list (every node's score unchanged), which ranks
        # the nodes as any uniform list would. A reply with a preference is checked below.
        assert reply == []
    else:
        # Accepted replies are pass-through; runway returns at most one of these nodes.
        assert set(reply["NodeNameToMetaVictims"]) <= set(accepted["NodeNameToMetaVictims"])


@pytest.mark.parametrize("case", PRIORITIZE, ids=[c["name"] for c in PRIORITIZE])
async def test_prioritize_with_a_preference_lists_every_accepted_host(case: dict[str, Any]) -> None:
    """The pod's workload last failed readiness in pool b: the reply carries what the captured
    reply carried (every offered host, in order), node-2 (pool b) scoring low."""
    runtime = build(RunwayConfig.model_validate({"prioritize": {"poolPreference": True}}))
    for name, pool in (("node-0", "a"), ("node-1", "a"), ("node-2", "b")):
        runtime.cache.upsert_node(pool_node(name, pool))  # nodeCacheCapable: labels from here
    request = case["request"]
    record = EvictionRecord(PODS_READY_TIMEOUT, 1_800_000_000.0, count=1, failed_pools=("b",))
    await write_record(runtime.records, workload_of(lean_pod(request["Pod"])), record)
    reply = json.loads(handle_prioritize(runtime.api_context(), json.dumps(request).encode()))
    check_prioritize(request, reply)
    assert [e["Host"] for e in reply] == [e["Host"] for e in case["accepted_response"]]
    # In the order the scheduler sent the nodes (1.37 may start the list at any node).
    assert {e["Host"]: e["Score"] for e in reply} == {"node-0": 10, "node-1": 10, "node-2": 0}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_over_http_with_the_schedulers_headers(
    case: dict[str, Any], asgi: Callable[[FastAPI], httpx.AsyncClient]
) -> None:
    async with asgi(create_app(RunwayConfig())) as client:
        resp = await client.post(
            f"/scheduler/{case['verb']}",
            content=json.dumps(case["request"]).encode(),
            headers={"Content-Type": "application/json", "User-Agent": "Go-http-client/1.1"},
        )
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    check(case, resp.json())


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("mode", ["nodecache", "nodelist"])
def test_prioritize_is_sent_the_request_filter_was_sent(mode: str, release: str) -> None:
    """What ``wire.ArgsReader`` rests on: in one cycle, after a filter that kept every node,
    kube-scheduler (1.20, 1.34 and 1.37 alike) sends prioritize the very request it sent filter
    (the same pod, the nodes in the order filter returned them). Go marshals a value the same way
    twice, so the bytes are equal too, and prioritize's decode is answered from memory (a
    NodeList body is over the memo's bound in production; this 3-node one is not)."""
    by_name = {(c["release"], c["name"].rsplit("/", 1)[-1]): c for c in CASES}
    sent = by_name[release, f"{mode}-filter"]["request"]
    again = by_name[release, f"{mode}-prioritize"]["request"]
    assert again == sent
    ctx = build(RunwayConfig()).api_context()
    filter_reply = json.loads(handle_filter(ctx, json.dumps(sent).encode()))
    check_filter(sent, filter_reply, node_cache=mode == "nodecache")
    decoded = ctx.read_args(json.dumps(sent).encode())
    assert ctx.read_args(json.dumps(again).encode()) is decoded


NOMINATED = [c for c in CASES if c["name"].endswith("filter-nominated-node")]


@pytest.mark.parametrize("case", NOMINATED, ids=[c["name"] for c in NOMINATED])
def test_a_preemptor_is_filtered_on_its_nominated_node_alone(case: dict[str, Any]) -> None:
    """On every release, the preemptor's next filter is sent the node it was nominated to (and
    runway keeps it: no policy, no refusal)."""
    request = case["request"]
    nominated = request["Pod"]["status"]["nominatedNodeName"]
    assert sent_node_names(request) == [nominated]
    reply = json.loads(
        handle_filter(build(RunwayConfig()).api_context(), json.dumps(request).encode())
    )
    check_filter(request, reply, case["nodeCacheCapable"])
