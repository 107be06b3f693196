"""Every REST error answers JSON ``{"error": message}``: a route's 404, a bad query parameter
(400, never FastAPI's 422 ``detail``), 401/403 from the auth guard, the router's 404/405."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.api.auth import Access, AuthGuard, Identity, Permission
from app.config import parse_config
from app.server import create_app
from tests.asgi import asgi_client as client

GOOD = "g" * 40


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with client(create_app(parse_config({"auth": {"staticTokens": [GOOD]}}))) as http:
        yield http


def assert_error(resp: httpx.Response, status: int, *fragments: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    body = resp.json()
    assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"]
    for fragment in fragments:
        assert fragment in body["error"]


@pytest.mark.parametrize(
    ("path", "status", "fragment"),
    [
        ("/v1/workloads/team-a/nope", 404, "team-a/nope"),
        ("/v1/explain?preemptor=a/b&victim=c/d", 404, "not in runway's cache"),
        ("/v1/explain?preemptor=ab&victim=c/d", 400, "preemptor must be `namespace/name`"),
        ("/v1/explain?preemptor=a/b", 400, "invalid request: query.victim"),
        ("/v1/preemptions/decisions?limit=abc", 400, "invalid request: query.limit"),
        ("/v1/no-such-route", 404, "Not Found"),
    ],
)
async def test_get_errors(http: httpx.AsyncClient, path: str, status: int, fragment: str) -> None:
    assert_error(await http.get(path), status, fragment)


async def test_method_not_allowed(http: httpx.AsyncClient) -> None:
    resp = await http.delete("/v1/gate")
    assert_error(resp, 405, "Method Not Allowed")
    assert "GET" in resp.headers["allow"]


async def test_unauthenticated(http: httpx.AsyncClient) -> None:
    resp = await http.post("/v1/workloads/team-a/job-1:activate")
    assert_error(resp, 401, "missing bearer token")
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")


class Denies:
    """A ``Reviewer`` that knows every token and allows nothing."""

    async def review(self, token: str) -> Identity | None:
        return Identity("alice")

    async def allowed(self, identity: Identity, permission: Permission) -> Access:
        return Access(False, "no RoleBinding")


async def test_forbidden() -> None:
    config = parse_config({"auth": {"mode": "kubernetes"}})
    app = create_app(config)
    app.state.auth = AuthGuard.build(config.auth, Denies())
    async with client(app) as http:
        resp = await http.post(
            "/v1/workloads/team-a/job-1:activate", headers={"Authorization": f"Bearer {GOOD}"}
        )
    assert_error(resp, 403, "forbidden: user 'alice'", "no RoleBinding")


async def test_bad_verb_requests_are_logged_rate_limited(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 400 or 404 on a verb is counted and logged, at most once per 10 s per kind (a
    misconfigured scheduler sends one per cycle). The warnings are taken at the logger (where
    its output goes depends on what configured logging earlier in the session)."""
    from app.api import extender

    logged: list[tuple[str, dict[str, object]]] = []

    class Recorder:
        def warning(self, event: str, **fields: object) -> None:
            logged.append((event, fields))

    monkeypatch.setattr(extender.rejected, "logger", Recorder())
    extender.rejected._last.clear()
    for _ in range(3):
        assert (await http.post("/scheduler/filter", content=b"{not json")).status_code == 400
    assert (await http.post("/scheduler/bind", content=b"{}")).status_code == 404
    assert [event for event, _ in logged] == ["extender request refused"] * 2, logged
    errors = " ".join(str(fields.get("error", "")) for _, fields in logged)
    assert "filter: request bod" in errors and "unknown extender verb 'bind'" in errors
