"""The extender over real HTTP: uvicorn on loopback, bad input, size cap, metrics, logging."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.reference import wire_cases
from tests.runway_process import RunwayProcess, run_runway

FILTER = next(c for c in wire_cases() if c["name"] == "nodecache-filter")["request"]
PREEMPT = next(c for c in wire_cases() if c["name"] == "nodecache-preempt")["request"]


@pytest.fixture(scope="module")
def runway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunwayProcess]:
    tmp = tmp_path_factory.mktemp("runway")
    config = tmp / "config.yaml"
    config.write_text("server:\n  maxBodyBytes: 100000\nlogging:\n  level: debug\n  format: json\n")
    with run_runway(tmp, ["--config", str(config)]) as proc:
        yield proc


def post(runway: RunwayProcess, verb: str, body: bytes | str) -> httpx.Response:
    content = body.encode() if isinstance(body, str) else body
    return httpx.post(
        f"{runway.url}/scheduler/{verb}",
        content=content,
        headers={"Content-Type": "application/json"},
        timeout=10,
    )


def test_filter_round_trip(runway: RunwayProcess) -> None:
    resp = post(runway, "filter", json.dumps(FILTER))
    assert resp.status_code == 200
    assert resp.json()["NodeNames"] == FILTER["NodeNames"]


BAD_REQUESTS = [
    ("filter", "{not json", "not valid JSON"),
    ("filter", "[]", "Expected `object`"),
    ("filter", '{"NodeNames": ["a"]}', "missing required field `Pod`"),
    ("filter", '{"Pod": null, "NodeNames": ["a"]}', "missing required field `Pod`"),
    ("filter", '{"Pod": {}, "Nodes": null, "NodeNames": null}', "one of `Nodes`"),
    ("filter", '{"Pod": {}, "Nodes": {"items": []}, "NodeNames": []}', "not both"),
    ("filter", '{"Pod": {}, "NodeNames": "node-0"}', "$.NodeNames"),
    ("filter", '{"Pod": {}, "NodeNames": [1, 2]}', "$.NodeNames[0]"),
    ("filter", '{"Pod": {}, "Nodes": 5}', "`Nodes` must be a NodeList"),
    ("filter", '{"Pod": {}, "Nodes": {"items": [1]}}', "`Nodes.items[0]` must be a Node"),
    ("filter", '{"Pod": {"spec": {"priority": "high"}}, "NodeNames": []}', "$.Pod.spec.priority"),
    ("filter", '{"Pod": "pod-a", "NodeNames": []}', "$.Pod"),
    ("prioritize", '{"Pod": {}}', "one of `Nodes`"),
    ("preempt", '{"Pod": {}}', "one of `NodeNameToVictims`"),
    ("preempt", '{"Pod": {}, "NodeNameToMetaVictims": {"n": {"Pods": [{}]}}}', "has no UID"),
    ("preempt", '{"Pod": {}, "NodeNameToMetaVictims": {"n": {"Pods": 3}}}', "Pods"),
    ("preempt", '{"Pod": {}, "NodeNameToMetaVictims": {}, "NodeNameToVictims": {}}', "not both"),
    ("preempt", "", "not valid JSON"),
]


@pytest.mark.parametrize(
    ("verb", "body", "message"), BAD_REQUESTS, ids=[f"{v}:{b[:40]}" for v, b, _ in BAD_REQUESTS]
)
def test_bad_input_is_a_400_that_says_what_is_wrong(
    runway: RunwayProcess, verb: str, body: str, message: str
) -> None:
    resp = post(runway, verb, body)
    assert resp.status_code == 400, resp.text
    assert message in resp.json()["error"]
    assert resp.json()["error"].startswith(f"{verb}: ")


def test_nodes_a_verb_does_not_read_are_not_judged(runway: RunwayProcess) -> None:
    """filter echoes NodeList items unparsed, and prioritize without a preference answers []
    without reading them: a malformed name in an item is neither's business."""
    body = '{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": 3}}]}}'
    assert post(runway, "prioritize", body).content == b"[]"
    assert post(runway, "filter", body).json()["Nodes"]["items"] == [{"metadata": {"name": 3}}]


def test_unknown_fields_are_ignored(runway: RunwayProcess) -> None:
    body = {**FILTER, "SomethingNew": {"x": 1}, "Pod": {**FILTER["Pod"], "newField": [1]}}
    assert post(runway, "filter", json.dumps(body)).status_code == 200


def test_unknown_verb_is_a_404_naming_the_verbs(runway: RunwayProcess) -> None:
    resp = post(runway, "bind", "{}")
    assert resp.status_code == 404
    assert "unknown extender verb 'bind'" in resp.json()["error"]


def test_body_over_the_cap_is_a_413(runway: RunwayProcess) -> None:
    big = json.dumps({**FILTER, "NodeNames": [f"node-{i}" for i in range(20000)]})
    resp = post(runway, "filter", big)
    assert resp.status_code == 413
    assert "maxBodyBytes" in resp.json()["error"]


def test_body_over_the_cap_without_content_length_is_a_413(runway: RunwayProcess) -> None:
    chunk = b" " * 50_000

    def chunks() -> Iterator[bytes]:
        yield from (chunk for _ in range(4))

    resp = httpx.post(f"{runway.url}/scheduler/filter", content=chunks(), timeout=10)
    assert resp.status_code == 413


def test_process_survives_bad_input(runway: RunwayProcess) -> None:
    for verb, body, _ in BAD_REQUESTS:
        post(runway, verb, body)
    assert runway.proc.poll() is None
    assert httpx.get(f"{runway.url}/healthz").text == "ok"
    assert "Traceback" not in runway.logs()


def test_metrics_are_a_plain_route_with_verb_counts(runway: RunwayProcess) -> None:
    post(runway, "filter", json.dumps(FILTER))
    post(runway, "filter", "{bad")
    resp = httpx.get(f"{runway.url}/metrics", follow_redirects=False)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert 'runway_extender_requests_total{outcome="ok",verb="filter"}' in text
    assert 'runway_extender_requests_total{outcome="bad_request",verb="filter"}' in text
    assert 'runway_extender_request_duration_seconds_bucket{le="0.0001",verb="filter"}' in text


def test_probes(runway: RunwayProcess) -> None:
    assert httpx.get(f"{runway.url}/healthz").status_code == 200
    assert httpx.get(f"{runway.url}/readyz").status_code == 200


def test_json_logs_one_line_per_verb_call_at_debug(runway: RunwayProcess) -> None:
    post(runway, "preempt", json.dumps(PREEMPT))
    # The log is read while runway may still be writing (its preemption task logs after the
    # answer): only whole lines are parsed; the last piece may be a line half written.
    lines = [json.loads(line) for line in runway.logs().split("\n")[:-1] if line.startswith("{")]
    assert any(e.get("event") == "runway started" and e.get("level") == "info" for e in lines)
    calls = [e for e in lines if e.get("event") == "extender call" and e.get("verb") == "preempt"]
    assert calls and calls[-1]["outcome"] == "ok" and calls[-1]["level"] == "debug"


def test_url_prefix_is_configurable(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("server:\n  urlPrefix: /ext/v1\n")
    with run_runway(tmp_path, ["--config", str(config)]) as proc:
        resp = httpx.post(f"{proc.url}/ext/v1/filter", content=json.dumps(FILTER))
        assert resp.status_code == 200
        assert httpx.post(f"{proc.url}/scheduler/filter", content="{}").status_code == 404


def raw_exchange(runway: RunwayProcess, request: bytes, *, until_closed: bool = False) -> bytes:
    """Send raw bytes on a fresh connection; what came back (until closed, or one reply)."""
    import socket
    import time

    with socket.create_connection(("127.0.0.1", runway.port), timeout=5) as sock:
        sock.sendall(request)
        got = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                return got
            got += chunk
            head, _, body = got.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                None,
            )
            if not until_closed and length is not None and len(body) >= length:
                return got
        return got


def test_the_protocol_answers_verbs_itself_and_keeps_http_semantics(
    runway: RunwayProcess,
) -> None:
    """The verbs answered by the connection (app.connections.DirectVerbs): one reply per call,
    Connection: close honoured, HTTP/1.0, a query string and other paths through ASGI, same
    counters."""
    body = json.dumps(FILTER).encode()
    call = b"POST /scheduler/filter HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n" % len(body)
    ok = raw_exchange(runway, call + b"\r\n" + body)
    assert ok.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-type: application/json" in ok
    assert json.loads(ok.partition(b"\r\n\r\n")[2])["NodeNames"] == FILTER["NodeNames"]
    closed = raw_exchange(runway, call + b"connection: close\r\n\r\n" + body, until_closed=True)
    assert closed.startswith(b"HTTP/1.1 200 OK") and b"connection: close" in closed
    old = b"POST /scheduler/filter HTTP/1.0\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    assert raw_exchange(runway, old, until_closed=True).startswith(b"HTTP/1.1 200 OK")
    query = call.replace(b"/scheduler/filter", b"/scheduler/filter?trace=1")
    answered = raw_exchange(runway, query + b"\r\n" + body)  # through ASGI: the same answer
    assert json.loads(answered.partition(b"\r\n\r\n")[2])["NodeNames"] == FILTER["NodeNames"]
    bad = raw_exchange(
        runway, b"POST /scheduler/prioritize HTTP/1.1\r\ncontent-length: 3\r\n\r\n{x}"
    )
    assert bad.startswith(b"HTTP/1.1 400 Bad Request") and b'"error"' in bad
    metrics = httpx.get(f"{runway.url}/metrics", timeout=5).text
    assert 'runway_extender_requests_total{outcome="bad_request",verb="prioritize"}' in metrics
