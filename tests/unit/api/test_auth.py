"""The auth guard without HTTP: config rules, modes, static tokens, a fake reviewer, caching.
The TokenReview/SubjectAccessReview calls themselves: tests/integration/kube/test_reviews.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.api.auth import (
    ANONYMOUS,
    Access,
    AuthError,
    AuthGuard,
    Identity,
    Permission,
    ReviewUnavailable,
    StaticTokens,
    bearer_token,
    read_namespaces,
    resolve_mode,
    unguarded_mutating_routes,
)
from app.config import ConfigError, parse_config
from app.config.security import AuthConfig
from app.server import create_app

GOOD = "a" * 32
OTHER = "b" * 32


def auth(**fields: Any) -> AuthConfig:
    return AuthConfig.model_validate(fields)


# --- config -----------------------------------------------------------------------------------


def test_defaults_are_auto_and_nothing_protected() -> None:
    cfg = parse_config({}).auth
    assert (cfg.mode, cfg.protect_read_only, cfg.protect_metrics) == ("auto", False, False)
    assert (cfg.sar.verb, cfg.sar.group, cfg.sar.resource) == ("update", "runway.dev", "workloads")
    assert cfg.cache_ttl == 10.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mode": "static"}, "mode static needs staticTokens or staticTokenFile"),
        ({"staticTokens": ["short"]}, "shorter than 16 characters"),
        ({"staticTokens": [f" {GOOD}"]}, "surrounding spaces"),
        ({"mode": "ldap"}, "auth.mode"),
        ({"cacheTTL": "-1s"}, "auth.cacheTTL"),
        ({"sar": {"verbs": "update"}}, "auth.sar.verbs"),
    ],
)
def test_bad_auth_config_names_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"auth": data})


def test_static_tokens_are_not_printed() -> None:
    cfg = parse_config({"auth": {"staticTokens": [GOOD]}})
    assert GOOD not in cfg.model_dump_json()
    assert GOOD not in repr(cfg)


@pytest.mark.parametrize(
    ("fields", "has_cluster", "mode"),
    [
        ({}, False, "none"),
        ({}, True, "kubernetes"),
        ({"staticTokens": [GOOD]}, True, "static"),
        ({"staticTokenFile": "/x"}, False, "static"),
        ({"mode": "none", "staticTokens": [GOOD]}, True, "none"),
        ({"mode": "kubernetes"}, False, "kubernetes"),
    ],
)
def test_auto_mode(fields: dict[str, Any], has_cluster: bool, mode: str) -> None:
    assert resolve_mode(auth(**fields), has_cluster) == mode


# --- header parsing and static tokens ---------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [(f"Bearer {GOOD}", GOOD), (f"bearer   {GOOD} ", GOOD), (f"BEARER {GOOD}", GOOD)],
)
def test_bearer_token(header: str, token: str) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer  ", f"Basic {GOOD}", GOOD])
def test_missing_or_malformed_header_is_401_with_challenge(header: str | None) -> None:
    with pytest.raises(AuthError) as err:
        bearer_token(header)
    assert err.value.status == 401
    assert err.value.headers["WWW-Authenticate"].startswith('Bearer realm="runway"')


def test_static_token_file_layout_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(f'# comment\n\n{GOOD},alice,uid-1,"ops,dev"\n{OTHER}\n')
    tokens = StaticTokens([], str(path))
    assert tokens.match(GOOD) == "alice"
    assert tokens.match(OTHER) == "token-file-line-4"
    assert tokens.match("c" * 32) is None
    path.write_text(f"{OTHER},bob\n")  # rotated Secret: GOOD is revoked
    assert tokens.match(GOOD) is None
    assert tokens.match(OTHER) == "bob"
    path.unlink()  # unreadable later: the last good tokens stay
    assert tokens.match(OTHER) == "bob"


def test_missing_static_token_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"auth\.staticTokenFile"):
        StaticTokens([], str(tmp_path / "absent"))


async def test_static_guard() -> None:
    guard = AuthGuard.build(auth(staticTokens=[GOOD, OTHER]))
    assert guard.mode == "static"
    principal = await guard.check(f"Bearer {OTHER}", "write")
    assert (principal.user, principal.via) == ("static-token-1", "static")
    for header in (None, f"Bearer {GOOD[:-1]}", f"Bearer {GOOD}x"):
        with pytest.raises(AuthError) as err:
            await guard.check(header, "write")
        assert err.value.status == 401


async def test_none_mode_lets_everyone_in() -> None:
    guard = AuthGuard.build(auth(mode="none"))
    assert await guard.check(None, "write") is ANONYMOUS
    assert guard.protects("GET", "/metrics") is None


@pytest.mark.parametrize(
    ("flags", "method", "path", "scope"),
    [
        ({}, "GET", "/metrics", None),
        ({}, "GET", "/v1/gate", None),
        ({"protectMetrics": True}, "GET", "/metrics", "metrics"),
        ({"protectMetrics": True}, "GET", "/v1/gate", None),
        ({"protectReadOnly": True}, "GET", "/v1/gate", "read"),
        ({"protectReadOnly": True}, "HEAD", "/v1/gate", "read"),
        ({"protectReadOnly": True}, "GET", "/metrics", None),
        ({"protectReadOnly": True}, "POST", "/v1/x", None),  # left to require_auth
        ({"protectReadOnly": True, "protectMetrics": True}, "GET", "/healthz", None),
        ({"protectReadOnly": True, "protectMetrics": True}, "GET", "/readyz", None),
        ({"protectReadOnly": True}, "POST", "/scheduler/filter", None),
    ],
)
def test_what_the_middleware_protects(
    flags: dict[str, Any], method: str, path: str, scope: str | None
) -> None:
    guard = AuthGuard.build(auth(staticTokens=[GOOD], **flags))
    assert guard.protects(method, path) == scope


# --- kubernetes mode with a fake reviewer -------------------------------------------------------


class FakeReviews:
    """A ``Reviewer`` answering from tables; records what was asked."""

    def __init__(self) -> None:
        self.users: dict[str, Identity] = {GOOD: Identity("alice", groups=("ops",))}
        self.grants: set[tuple[str, str]] = {("alice", "update")}
        self.asked: list[tuple[str, Any]] = []
        self.fail: ReviewUnavailable | None = None

    async def review(self, token: str) -> Identity | None:
        self.asked.append(("review", token))
        if self.fail is not None:
            raise self.fail
        return self.users.get(token)

    async def allowed(self, identity: Identity, permission: Permission) -> Access:
        self.asked.append(("allowed", permission))
        if self.fail is not None:
            raise self.fail
        ok = (identity.username, permission.verb) in self.grants
        return Access(ok, "" if ok else "no binding")


def kube_guard(fake: FakeReviews, now: list[float], **fields: Any) -> AuthGuard:
    return AuthGuard.build(auth(**fields), fake, monotonic=lambda: now[0])


async def test_kubernetes_accepts_and_caches_positive_answers() -> None:
    fake, now = FakeReviews(), [0.0]
    guard = kube_guard(fake, now)
    assert guard.mode == "kubernetes"
    principal = await guard.check(f"Bearer {GOOD}", "write")
    assert (principal.user, principal.groups, principal.via) == ("alice", ("ops",), "kubernetes")
    assert fake.asked == [
        ("review", GOOD),
        ("allowed", Permission("update", "runway.dev", "workloads")),
    ]
    now[0] = 9.9
    await guard.check(f"Bearer {GOOD}", "write")
    assert len(fake.asked) == 2  # both answers cached
    now[0] = 10.0
    await guard.check(f"Bearer {GOOD}", "write")
    assert len(fake.asked) == 4  # expired: asked again


async def test_cache_is_keyed_by_token_hash_and_permission() -> None:
    fake, now = FakeReviews(), [0.0]
    guard = kube_guard(fake, now)
    await guard.check(f"Bearer {GOOD}", "write")
    other = guard.permission("write", namespace="team-a", name="job-1")
    await guard.check(f"Bearer {GOOD}", "write", other)
    assert len(fake.asked) == 3  # the user is cached, the new permission is asked
    keys = list(guard.reviewer.cache.entries) if guard.reviewer else []
    assert all(GOOD not in repr(k) for k in keys)


async def test_rejected_token_is_401_and_remembered_briefly() -> None:
    """Issue #36: a rejection is cached for ``negativeCacheTTL`` (5 s) too."""
    fake, now = FakeReviews(), [0.0]
    guard = kube_guard(fake, now)
    for _ in range(2):
        with pytest.raises(AuthError) as err:
            await guard.check(f"Bearer {OTHER}", "write")
        assert err.value.status == 401
        assert 'error="invalid_token"' in err.value.headers["WWW-Authenticate"]
    assert len(fake.asked) == 1
    now[0] = 5.0
    with pytest.raises(AuthError):
        await guard.check(f"Bearer {OTHER}", "write")
    assert len(fake.asked) == 2
    fake.users[OTHER] = Identity("bob")  # becomes valid: seen once the rejection expired
    now[0] = 10.0
    fake.grants.add(("bob", "update"))
    assert (await guard.check(f"Bearer {OTHER}", "write")).user == "bob"


async def test_a_denial_is_remembered_briefly_and_a_grant_seen_after() -> None:
    fake, now = FakeReviews(), [0.0]
    fake.grants.clear()
    guard = kube_guard(fake, now)
    for _ in range(3):
        with pytest.raises(AuthError) as err:
            await guard.check(f"Bearer {GOOD}", "write")
        assert err.value.status == 403 and "no binding" in err.value.message
    assert [a for a, _ in fake.asked] == ["review", "allowed"]
    fake.grants.add(("alice", "update"))
    now[0] = 5.0
    assert (await guard.check(f"Bearer {GOOD}", "write")).user == "alice"


async def test_made_up_tokens_cost_a_bounded_number_of_reviews_per_source() -> None:
    """Issue #36: 300 made-up tokens from one address were 300 TokenReviews; now the source's
    budget (burst 20, 1/s back) answers 429 past it, without asking, while a known token and
    another source still pass."""
    fake, now = FakeReviews(), [0.0]
    guard = kube_guard(fake, now)
    await guard.check(f"Bearer {GOOD}", "write", source="10.0.0.9")  # cached before the storm
    statuses = []
    for i in range(300):
        with pytest.raises(AuthError) as err:
            await guard.check(f"Bearer made-up-{i:04d}", "write", source="10.0.0.7")
        statuses.append(err.value.status)
    assert statuses.count(401) == 20 and statuses.count(429) == 280
    assert sum(1 for a, _ in fake.asked if a == "review") == 21
    with pytest.raises(AuthError) as err:
        await guard.check("Bearer made-up-x", "write", source="10.0.0.7")
    assert err.value.headers["Retry-After"] == "1"
    assert (await guard.check(f"Bearer {GOOD}", "write", source="10.0.0.7")).user == "alice"
    with pytest.raises(AuthError) as err:
        await guard.check("Bearer made-up-y", "write", source="10.0.0.8")
    assert err.value.status == 401  # another source has its own budget
    now[0] = 2.0  # two failures earned back
    for expected in (401, 401, 429):
        with pytest.raises(AuthError) as err:
            await guard.check(
                f"Bearer late-{expected}-{now[0]}-{len(fake.asked)}", "write", source="10.0.0.7"
            )
        assert err.value.status == expected


async def test_denied_sar_is_403_naming_the_permission() -> None:
    fake, now = FakeReviews(), [0.0]
    fake.grants.clear()
    guard = kube_guard(fake, now)
    perm = guard.permission("write", namespace="team-a", name="job-1")
    with pytest.raises(AuthError) as err:
        await guard.check(f"Bearer {GOOD}", "write", perm)
    assert err.value.status == 403
    assert "alice" in err.value.message
    assert "update workloads.runway.dev named 'job-1' in namespace 'team-a'" in err.value.message
    assert "no binding" in err.value.message


@pytest.mark.parametrize("retry_after", ["5", None])
async def test_reviewer_trouble_is_503(retry_after: str | None) -> None:
    fake, now = FakeReviews(), [0.0]
    fake.fail = ReviewUnavailable("cannot check the token: down", retry_after=retry_after)
    guard = kube_guard(fake, now)
    with pytest.raises(AuthError) as err:
        await guard.check(f"Bearer {GOOD}", "write")
    assert err.value.status == 503
    assert err.value.message == "cannot check the token: down"
    assert err.value.headers.get("Retry-After") == retry_after


async def test_kubernetes_mode_without_a_cluster_is_503() -> None:
    guard = AuthGuard.build(auth(mode="kubernetes"))
    with pytest.raises(AuthError) as err:
        await guard.check(f"Bearer {GOOD}", "write")
    assert err.value.status == 503 and "no API server" in err.value.message


async def test_read_and_metrics_permissions() -> None:
    fake, now = FakeReviews(), [0.0]
    fake.grants = {("alice", "get")}
    guard = kube_guard(fake, now, sar={"readVerb": "get"})
    await guard.check(f"Bearer {GOOD}", "read")
    await guard.check(f"Bearer {GOOD}", "metrics")
    assert fake.asked[1:] == [
        ("allowed", Permission("get", "runway.dev", "workloads")),
        ("allowed", Permission("get", path="/metrics")),
    ]


def test_permission_descriptions() -> None:
    assert Permission("get", path="/metrics").describe() == "get on the non-resource URL /metrics"
    assert Permission("update", "", "pods").describe() == "update pods"


# --- the app -----------------------------------------------------------------------------------


def test_every_mutating_rest_route_requires_auth() -> None:
    # A POST/PUT/PATCH/DELETE under /v1 must add Depends(require_auth("write")).
    assert unguarded_mutating_routes(create_app()) == []


@pytest.mark.parametrize(
    ("path", "query", "namespaces"),
    [
        ("/v1/workloads/team-a/etl", "", ("team-a",)),
        ("/v1/workloads", "namespace=team-a", ("team-a",)),
        ("/v1/workloads", "namespace=team-a&pod=p-0", ("team-a",)),
        ("/v1/workloads/", "namespace=team-a", ("team-a",)),
        # every namespace, two of them, or an empty one: cluster-wide
        ("/v1/workloads", "", ()),
        ("/v1/workloads", "namespace=", ()),
        ("/v1/workloads", "namespace=a&namespace=b", ()),
        ("/v1/workloads/team-a", "", ()),
        # a pair: both namespaces; half a pair: cluster-wide
        ("/v1/explain", "preemptor=b/x&victim=a/y", ("a", "b")),
        ("/v1/explain", "preemptor=a/x&victim=a/y", ("a",)),
        ("/v1/explain", "preemptor=x&victim=a/y", ()),
        # what spans namespaces
        ("/v1/preemptions/decisions", "preemptor=a/x", ()),
        ("/v1/queues", "namespace=a", ()),
    ],
)
def test_read_namespaces(path: str, query: str, namespaces: tuple[str, ...]) -> None:
    """Issue #35 item 4: which namespaces a protected read is authorised in (none: the
    permission cluster-wide)."""
    assert read_namespaces(path, query) == namespaces
