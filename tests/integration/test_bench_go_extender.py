"""``bench/go_extender``, the floor ``bench.throughput`` measures as ``go-floor``: built with the
machine's Go and started as the bench starts it (``build_go_floor``, ``go_floor_server``), it
answers kube-scheduler's own filter requests (the golden ``tests/data/wire/`` payloads of every
release, both cache modes) with every node it was given, as kube-scheduler accepts a reply."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.throughput import build_go_floor, go_floor_server
from tests.reference import wire_cases

FILTERS = [c for c in wire_cases() if c["verb"] == "filter"]


@pytest.fixture(scope="module")
def floor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Go floor's URL; the test is skipped where the machine has no Go."""
    tmp = tmp_path_factory.mktemp("go-floor")
    binary = build_go_floor(tmp)
    if binary is None:
        pytest.skip("no Go on this machine (neither `go` on PATH nor /usr/local/go/bin/go)")
    with go_floor_server(binary, tmp) as (url, _pid):
        yield url


def names(nodes: dict[str, Any] | None) -> list[str] | None:
    return None if nodes is None else [n["metadata"]["name"] for n in nodes["items"]]


@pytest.mark.parametrize("case", FILTERS, ids=[c["name"] for c in FILTERS])
def test_filter_passes_every_node_it_was_given(floor: str, case: dict[str, Any]) -> None:
    request = case["request"]
    r = httpx.post(f"{floor}/scheduler/filter", json=request, timeout=10)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["NodeNames"] == request["NodeNames"]
    assert names(reply["Nodes"]) == names(request["Nodes"])
    assert reply["FailedNodes"] == {} and reply["FailedAndUnresolvableNodes"] == {}
    assert reply["Error"] == ""
    if case["nodeCacheCapable"]:  # every node passed: exactly what runway's accepted reply was
        assert reply == case["accepted_response"]


def test_prioritize_and_probes(floor: str) -> None:
    r = httpx.post(f"{floor}/scheduler/prioritize", json={"Pod": {}, "NodeNames": ["a"]})
    assert (r.status_code, r.json()) == (200, [])
    for probe in ("/healthz", "/readyz"):
        assert httpx.get(f"{floor}{probe}").text == "ok"
