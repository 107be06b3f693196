"""``kubectl runway`` against a runway served over real HTTP (uvicorn in a thread), directly
(``--url``) and behind a stand-in for the API server's service proxy (a kubeconfig user,
the proxy path, ``Authorization`` removed, 403/404/503 as the API server answers them)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.clock import ManualClock
from app.config import parse_config
from app.kubectl.cli import run
from app.kubectl.errors import (
    EXIT_FORBIDDEN,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.timestamps import format_time
from app.policy.workload import WorkloadKey
from app.server import create_app
from app.wiring import Runway
from tests.builders import pod as build_pod
from tests.builders import pod_obj, queued_pod, write_record
from tests.served import serve_in_thread

T0 = 1_800_000_000.0
TOKEN = "0123456789abcdef0123456789abcdef"
CONFIG = {
    "auth": {"mode": "static", "staticTokens": [TOKEN]},
    "queues": [
        {"name": "research", "preemptMinRuntime": "10m"},
        {"name": "strict", "parent": "research", "queueingStrategy": "StrictFIFO"},
        {
            "name": "open",
            "parent": "research",
            "preemptionBudget": {"maxPreemptions": 2, "window": "1h"},
        },
    ],
}


def add(runway: Runway, name: str, queue: str, *, ns: str = "team", **kw: float) -> None:
    runway.cache.upsert_pod(queued_pod(name, queue, namespace=ns, **kw))
    runway.cache.pods_synced = True


@pytest.fixture
def served() -> Iterator[tuple[str, Runway]]:
    app = create_app(parse_config(CONFIG), ManualClock(T0))
    runway: Runway = app.state.runway
    add(runway, "first", "strict", created=T0 - 100)
    add(runway, "second", "strict", created=T0 - 50)
    add(runway, "other", "open", ns="elsewhere", created=T0 - 10)
    add(runway, "running", "open", bound=T0 - 60)
    with serve_in_thread(app) as url:
        yield url, runway


def kubectl(*argv: str, **kw: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), stdout=out, stderr=err, clock=lambda: T0, **kw)
    return code, out.getvalue(), err.getvalue()


def test_queues_is_the_tree_with_resolved_settings_and_counts(served: tuple[str, Runway]) -> None:
    url, _ = served
    code, out, err = kubectl("queues", "--url", url)
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "NAME", "STRATEGY", "PREEMPT", "RECLAIM", "BUDGET", "PENDING", "ADMITTED", "BACKOFF",
        "DEACTIVATED",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert lines[1].startswith("research") and lines[2].startswith("  ")  # children indented
    assert rows["strict"][1:3] == ["StrictFIFO", "10m"] and rows["strict"][5] == "2"
    assert rows["open"][4] == "2/1h" and rows["open"][5:7] == ["1", "1"]
    code, wide, _ = kubectl("queues", "--url", url, "-o", "wide")
    assert code == EXIT_OK and "PREEMPT-FROM" in wide.splitlines()[0]


def test_workloads_in_a_namespace_and_in_all(served: tuple[str, Runway]) -> None:
    url, _ = served
    code, out, err = kubectl("workloads", "--url", url, "-n", "team")
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert lines[0].split()[:6] == ["NAME", "QUEUE", "STATE", "POS", "PRIORITY", "HELD-BY"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == ["running", "first", "second"]
    second = lines[3].split()
    assert second[:6] == ["second", "strict", "pending", "2", "0", "strict-fifo"]
    code, out, _ = kubectl("workloads", "--url", url, "-A", "-o", "json")
    items = json.loads(out)["items"]
    assert code == EXIT_OK and {w["namespace"] for w in items} == {"team", "elsewhere"}
    code, out, _ = kubectl("workloads", "--url", url, "-A")
    assert out.splitlines()[0].split()[0] == "NAMESPACE"


def test_workloads_pages_through_runway(served: tuple[str, Runway]) -> None:
    url, runway = served
    for i in range(7):
        add(runway, f"w{i}", "open", created=T0 - 500 + i)
    code, out, _ = kubectl("workloads", "--url", url, "-A", "-o", "yaml", "--chunk-size", "2")
    paged = yaml.safe_load(out)["items"]
    code2, out2, _ = kubectl("workloads", "--url", url, "-A", "-o", "yaml")
    assert code == code2 == EXIT_OK
    assert paged == yaml.safe_load(out2)["items"] and len(paged) == 11
    assert [w["name"] for w in paged if w["queue"] == "open"][:3] == ["w0", "w1", "w2"]
    code, _, err = kubectl("workloads", "--url", url, "--chunk-size", "0")
    assert code == EXIT_USAGE and "--chunk-size" in err


def test_explain_says_why_a_pod_waits_and_until_when_one_is_protected(
    served: tuple[str, Runway],
) -> None:
    url, _ = served
    code, out, err = kubectl("explain", "--url", url, "team/second")
    assert code == EXIT_OK, err
    assert "Held by:          strict-fifo" in out and "team/first" in out
    code, out, _ = kubectl("explain", "--url", url, "running", "-n", "team")
    assert "Held:             no (admitted)" in out
    assert f"Protected until:  {format_time(T0 - 60 + 600)}" in out
    code, out, _ = kubectl("explain", "--url", url, "-o", "json", "team/running")
    assert json.loads(out)["workload"]["protectedUntil"] == format_time(T0 + 540)


def test_activate_needs_a_token_and_resets_the_backoff(served: tuple[str, Runway]) -> None:
    url, runway = served
    key = WorkloadKey("team", "second", "label")
    record = EvictionRecord(
        PODS_READY_TIMEOUT, T0 - 5, count=3, requeue_at=T0 + 300, deactivated=True
    )
    asyncio.run(write_record(runway.records, key, record))
    runway.requeue.index.bump()
    code, _, err = kubectl("activate", "--url", url, "team/second")
    assert code == EXIT_FORBIDDEN and "runway refused" in err
    code, out, err = kubectl("activate", "--url", url, "--token", TOKEN, "second", "-n", "team")
    assert code == EXIT_OK, err
    assert out == "workload team/second activated (state: pending)\n"
    record = runway.records.read(key)
    assert record is not None and not record.deactivated and record.count == 0


def test_errors_have_exit_codes_a_script_can_rely_on(served: tuple[str, Runway]) -> None:
    url, _ = served
    code, _, err = kubectl("explain", "--url", url, "team/nope")
    assert code == EXIT_NOT_FOUND and "not in runway's cache" in err
    code, _, err = kubectl("activate", "--url", url, "--token", TOKEN, "team/nope")
    assert code == EXIT_NOT_FOUND and "no workload team/nope" in err
    code, _, err = kubectl("workloads", "--url", "http://127.0.0.1:9")
    assert code == EXIT_UNREACHABLE and "cannot reach runway" in err
    code, _, _ = kubectl("workloads", "--url", url, "--state", "sleeping")
    assert code == EXIT_USAGE
    code, _, err = kubectl("workloads", "--kubeconfig", "/nonexistent/kubeconfig")
    assert code == EXIT_UNREACHABLE and "kubeconfig" in err


def test_watch_prints_again_only_when_runway_answers_otherwise(served: tuple[str, Runway]) -> None:
    url, runway = served
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 2:  # between the second and third poll a workload arrives
            add(runway, "late", "open", created=T0)

    code, out, _ = kubectl(
        "workloads", "--url", url, "-n", "team", "-w", "--interval", "0.5", sleep=sleep, max_polls=4
    )
    assert code == EXIT_OK and polls == [0.5, 0.5, 0.5]
    tables = out.split("\n\n")
    assert len(tables) == 2, out
    assert "late" not in tables[0] and "late" in tables[1]


def test_config_prints_the_effective_config_as_yaml(served: tuple[str, Runway]) -> None:
    url, _ = served
    code, out, _ = kubectl("config", "--url", url)
    config = yaml.safe_load(out)
    assert code == EXIT_OK and config["auth"]["staticTokens"] == ["**********"]


# --- through a stand-in for the API server's service proxy ---------------------------------


PROXY = "/api/v1/namespaces/runway/services/http:runway-rest:rest/proxy"
USERS = {"viewer-token": ("viewer", {"GET"}), "admin-token": ("admin", {"GET", "POST"})}


def status(code: int, message: str) -> JSONResponse:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    return JSONResponse(body, status_code=code)


class FakeProxy:
    """What kube-apiserver does with a service-proxy request: authenticate the bearer token,
    authorize get/create on services/proxy, remove Authorization, forward the rest."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import httpx

        request = Request(scope, receive)
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in USERS:
            await status(401, "Unauthorized")(scope, receive, send)
            return
        user, verbs = USERS[token]
        path = request.url.path
        if not path.startswith(PROXY):
            await status(404, f'services "{path}" not found')(scope, receive, send)
            return
        if request.method not in verbs:
            verb = "create" if request.method == "POST" else "get"
            message = f'services "http:runway-rest:rest" is forbidden: User "{user}" cannot {verb}'
            await status(403, message + ' resource "services/proxy"')(scope, receive, send)
            return
        headers = {k: v for k, v in request.headers.items() if k not in ("authorization", "host")}
        self.seen.append(headers)
        async with httpx.AsyncClient(base_url=self.upstream) as client:
            answer = await client.request(
                request.method, path.removeprefix(PROXY), params=request.query_params,
                headers=headers, content=await request.body(),
            )  # fmt: skip
        await Response(answer.content, answer.status_code, media_type="application/json")(
            scope, receive, send
        )


def kubeconfig(tmp_path: Path, server: str, token: str) -> str:
    path = tmp_path / f"kubeconfig-{token}"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [
                    {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team"}}
                ],
                "current-context": "x",
            }
        )
    )
    return str(path)


def test_through_the_service_proxy_as_the_kubeconfig_user(
    served: tuple[str, Runway], tmp_path: Path
) -> None:
    url, _ = served
    proxy = FakeProxy(url)
    flags = ["--scheme", "http", "--runway-namespace", "runway"]
    with serve_in_thread(proxy) as apiserver:
        viewer = kubeconfig(tmp_path, apiserver, "viewer-token")
        code, out, err = kubectl("workloads", "--kubeconfig", viewer, *flags)
        assert code == EXIT_OK, err
        # The context's namespace is the default: team's workloads only.
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["running", "first", "second"]
        # The token travels on in X-Runway-Authorization (Authorization is removed).
        assert proxy.seen[-1]["x-runway-authorization"] == "Bearer viewer-token"
        code, _, err = kubectl("activate", "--kubeconfig", viewer, *flags, "second")
        assert code == EXIT_FORBIDDEN and "the API server refused" in err
        assert "runway-admin" in err
        stranger = kubeconfig(tmp_path, apiserver, "stranger")
        code, _, err = kubectl("queues", "--kubeconfig", stranger, *flags)
        assert code == EXIT_FORBIDDEN
        code, _, err = kubectl("queues", "--kubeconfig", viewer, *flags, "--service", "nope")
        assert code == EXIT_UNREACHABLE and "is runway installed there?" in err


def readme_examples() -> dict[tuple[str, ...], str]:
    """``$ kubectl runway ARGS`` in the README → the output shown under it (when any)."""
    text = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    start = text.index("## See what runway is doing")
    block = text[text.index("```console\n", start) + 11 :]
    block = block[: block.index("```")]
    examples: dict[tuple[str, ...], str] = {}
    args: tuple[str, ...] | None = None
    for line in block.splitlines():
        if line.startswith("$ kubectl runway"):
            args = tuple(line.split("#")[0].split()[3:])
            examples[args] = ""
        elif line and args is not None:
            examples[args] += line + "\n"
        else:
            args = None
    return {a: out for a, out in examples.items() if out}


def test_the_readmes_examples_are_what_the_plugin_prints(served: tuple[str, Runway]) -> None:
    url, _ = served
    examples = readme_examples()
    assert len(examples) >= 2
    for args, shown in examples.items():
        code, out, err = kubectl(*args, "--url", url)
        assert code == EXIT_OK, err
        assert out == shown, f"README's `kubectl runway {' '.join(args)}` is stale:\n{out}"


def test_deactivate_holds_a_workload_until_activated(served: tuple[str, Runway]) -> None:
    url, _ = served
    code, out, err = kubectl("deactivate", "--url", url, "--token", TOKEN, "team/second")
    assert code == EXIT_OK, err
    assert out == "workload team/second deactivated (state: deactivated)\n"
    code, out, _ = kubectl("workloads", "--url", url, "-n", "team", "-o", "json")
    second = next(w for w in json.loads(out)["items"] if w["name"] == "second")
    assert second["state"] == "deactivated" and second["rule"] == "deactivated"
    code, out, _ = kubectl("activate", "--url", url, "--token", TOKEN, "team/second")
    assert code == EXIT_OK and "(state: pending)" in out
    code, _, _ = kubectl("deactivate", "--url", url, "team/second")
    assert code == EXIT_FORBIDDEN
    code, _, err = kubectl("deactivate", "--url", url, "--token", TOKEN, "team/nope")
    assert code == EXIT_NOT_FOUND, err


class _Follower:
    """The cluster facts of a replica that is not the leader."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster
        self.leadership, self.identity = False, "runway-1"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


def test_an_answer_a_follower_gave_itself_is_said_once_on_stderr() -> None:
    # A replica that is not the leader and could not ask it (issue #35 item 5): what only the
    # leader holds may be missing; the plugin says so, the output stays the answer.
    app = create_app(parse_config(CONFIG), ManualClock(T0))
    add(app.state.runway, "first", "strict", created=T0 - 100)
    ctx = app.state.context
    app.state.context = dataclasses.replace(ctx, cluster=_Follower(ctx.cluster))
    with serve_in_thread(app) as url:
        code, out, err = kubectl("preemptions", "--url", url)
        assert code == EXIT_OK and out == "No preemptions in flight or recently finished.\n"
        assert err.count("warning:") == 1 and "(follower (no leader))" in err, err
        code, out, err = kubectl("explain", "--url", url, "team/first")  # several reads
        assert code == EXIT_OK and err.count("warning:") == 1, err
        code, _, err = kubectl("queues", "--url", url)  # every replica answers it alike
        assert code == EXIT_OK and err == ""


def test_human_output_never_prints_a_tenants_escape_sequences(served: tuple[str, Runway]) -> None:
    """Issue #36: an owner name with terminal escapes (window title, OSC 52, clear screen) and
    a bidi override is printed escaped by the tables and ``explain``; ``-o json`` escapes it
    its own way."""
    url, runway = served
    evil = "\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J\u202eevil"
    obj = pod_obj("evil-0", labels={"runway.dev/queue": "open"})
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "x/v1", "kind": "Job", "name": evil, "uid": "u", "controller": True}
    ]
    runway.cache.upsert_pod(build_pod(obj))
    for argv in (
        ("workloads", "-A"),
        ("workloads", "-A", "-o", "wide"),
        ("explain", "team/evil-0"),
    ):
        code, out, err = kubectl(*argv, "--url", url)
        assert code == EXIT_OK, err
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
        assert "\\x1b]0;pwned\\x07" in out
    code, out, _ = kubectl("workloads", "-A", "-o", "json", "--url", url)
    assert "\x1b" not in out and evil in {w["name"] for w in json.loads(out)["items"]}
