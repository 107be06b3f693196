"""Bearer-token authentication and authorization of the REST API.

* ``require_auth(scope)`` is the FastAPI dependency a route adds; every mutating ``/v1`` route
  must carry it (``unguarded_mutating_routes`` lists those that do not)::

      @router.post("/workloads/{namespace}/{name}:activate")
      async def activate(
          principal: Annotated[Principal, Depends(require_auth("write"))], ...
      ) -> ...: ...

  With path parameters ``namespace``/``name`` the SubjectAccessReview is asked for that object,
  so a namespaced Role can grant it.
* ``install_auth`` puts the ``AuthGuard`` at ``app.state.auth`` and, when configured, guards
  read-only ``/v1`` GETs (``auth.protectReadOnly``) and ``/metrics`` (``auth.protectMetrics``)
  with a small ASGI middleware, so routes added later are covered without touching them.
  A read about one namespace's workloads (``read_namespaces``: ``/v1/workloads/NS/...``,
  ``/v1/workloads?namespace=NS``, ``/v1/explain`` of a pair) is authorised in that namespace,
  so a team's ``view`` RoleBinding (the chart's viewer role aggregates into it) reads its own
  namespace and no other; every other read asks the permission cluster-wide (issue #35).

Modes: ``static`` compares the token in constant time with the configured ones; ``kubernetes``
asks a ``Reviewer`` (``app.kube.reviews``: TokenReview, then SubjectAccessReview, wired by
``app.server``) and remembers positive answers for ``cacheTTL``, keyed by a hash of the token
(the token itself is never stored or logged), and rejections and denials for
``negativeCacheTTL``; failed checks are limited per source address (``auth.failureLimit``), so
made-up tokens cost the API server a bounded number of TokenReviews.
Answers: 401 + ``WWW-Authenticate: Bearer`` (no or bad token), 403 naming the missing
permission, 429 when a source caused too many failed checks, 503 when the API server cannot be
asked.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import os
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import parse_qs

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app import metrics
from app.api.errors import error_response
from app.config import ConfigError
from app.config.security import MIN_STATIC_TOKEN_LENGTH, AuthConfig
from app.logs import get_logger
from app.model.auth import Access, Identity, Permission, ReviewUnavailable
from app.policy.rate import TokenBucket

log = get_logger("auth")

Scope = Literal["write", "read", "metrics"]
Mode = Literal["none", "static", "kubernetes"]

_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CACHE_MAX = 4096


# --- outcomes ---------------------------------------------------------------------------------


class AuthError(Exception):
    """A refused request: ``status`` 401/403/503 with an operator-readable ``message``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        """The API's one error body shape, ``{"error": message}``."""
        return error_response(self.status, self.message, self.headers)


def _unauthenticated(message: str, error: str | None = None) -> AuthError:
    challenge = 'Bearer realm="runway"' + (f', error="{error}"' if error else "")
    return AuthError(401, message, {"WWW-Authenticate": challenge})


@dataclass(frozen=True)
class Principal:
    """Who made an authenticated request."""

    user: str
    groups: tuple[str, ...] = ()
    via: Mode = "none"


ANONYMOUS = Principal("system:anonymous")


# --- static tokens ----------------------------------------------------------------------------


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class StaticTokens:
    """Tokens from the config and/or a token file (re-read when the file changes)."""

    def __init__(self, tokens: list[str], path: str | None) -> None:
        # Compare fixed-length digests: compare_digest on the raw strings leaks their length.
        self.inline = [(_digest(t), f"static-token-{i}") for i, t in enumerate(tokens)]
        self.path = path
        self.from_file: list[tuple[bytes, str]] = []
        self._stamp: tuple[int, int, int] | None = None
        self._failed: tuple[int, int, int] | None = None
        """The file version that could not be read (not re-read on every request)."""
        if path is not None:
            try:
                self._reload()
            except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
                raise ConfigError(f"auth.staticTokenFile: cannot read {path!r}: {exc}") from None

    def _reload(self) -> None:
        assert self.path is not None
        st = os.stat(self.path)
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp or stamp == self._failed:
            return
        entries: list[tuple[bytes, str]] = []
        short: list[int] = []
        try:
            with open(self.path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    token, _, rest = line.partition(",")
                    token = token.strip()
                    if len(token) < MIN_STATIC_TOKEN_LENGTH:  # the rule of inline tokens
                        short.append(lineno)
                        continue
                    user = rest.split(",", 1)[0].strip().strip('"') or f"token-file-line-{lineno}"
                    entries.append((_digest(token), user))
        except (OSError, ValueError):
            self._failed = stamp
            raise
        if short:
            log.warning(
                "static token file: tokens shorter than the minimum ignored",
                path=self.path,
                minimum=MIN_STATIC_TOKEN_LENGTH,
                lines=short[:20],
            )
        self.from_file, self._stamp, self._failed = entries, stamp, None
        log.info("static token file loaded", path=self.path, tokens=len(entries))

    def match(self, token: str) -> str | None:
        """The user of ``token``, or None. Compares against every token (constant time)."""
        if self.path is not None:
            try:
                self._reload()
            except (OSError, ValueError) as exc:  # keep the last good tokens
                log.warning(
                    "cannot re-read the static token file; keeping the last good tokens",
                    path=self.path,
                    error=str(exc),
                )
        probe = _digest(token)
        found: str | None = None
        for digest, user in (*self.inline, *self.from_file):
            if hmac.compare_digest(digest, probe) and found is None:
                found = user
        return found


# --- where the credentials are -----------------------------------------------------------------

FORWARDED_AUTHORIZATION = "x-runway-authorization"
"""The header ``kubectl runway`` also sends its user's bearer token in: the API server's service
proxy authenticates the user and then removes ``Authorization`` before forwarding the request,
but passes other headers on."""


def presented_authorization(headers: Mapping[str, str]) -> str | None:
    """``Authorization``, else ``X-Runway-Authorization`` (what came through the service proxy;
    checked the same way: TokenReview + SubjectAccessReview, or the static tokens)."""
    return headers.get("authorization") or headers.get(FORWARDED_AUTHORIZATION)


# --- the reviewer port (``auth.mode: kubernetes``; implemented by app.kube.reviews) ----------


class Reviewer(Protocol):
    """Who a token is and what it may do (TokenReview + SubjectAccessReview in a cluster)."""

    async def review(self, token: str) -> Identity | None:
        """The identity of ``token``; None when it is not valid. Raises ``ReviewUnavailable``."""
        ...

    async def allowed(self, identity: Identity, permission: Permission) -> Access:
        """Whether ``identity`` holds ``permission``. Raises ``ReviewUnavailable``."""
        ...


class _TTLCache:
    """Answers for ``ttl`` seconds (or a ``ttl`` of their own), bounded in size."""

    def __init__(self, ttl: float, monotonic: Callable[[], float]) -> None:
        self.ttl = ttl
        self.monotonic = monotonic
        self.entries: MutableMapping[tuple[Any, ...], tuple[float, Any]] = {}

    def get(self, key: tuple[Any, ...]) -> Any:
        hit = self.entries.get(key)
        if hit is None:
            return None
        if hit[0] <= self.monotonic():
            del self.entries[key]
            return None
        return hit[1]

    def put(self, key: tuple[Any, ...], value: Any, ttl: float | None = None) -> None:
        ttl = self.ttl if ttl is None else ttl
        if ttl <= 0:
            return
        now = self.monotonic()
        if len(self.entries) >= _CACHE_MAX:
            for k in [k for k, (exp, _) in self.entries.items() if exp <= now]:
                del self.entries[k]
            while len(self.entries) >= _CACHE_MAX:  # still full: drop the oldest
                del self.entries[next(iter(self.entries))]
        self.entries[key] = (now + ttl, value)


REJECTED = "rejected"
"""What the cache holds for a token the reviewer rejected, or a permission it denied."""
_SOURCES_MAX = 4096


class FailureLimiter:
    """Failed token checks per source address (``auth.failureLimit``): a token bucket each
    (``policy.rate``), bounded in number (a full bucket is forgotten first: it says nothing)."""

    def __init__(
        self, burst: int, per_second: float, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst = burst
        self.per_second = per_second
        self.monotonic = monotonic
        self.buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def wait(self, source: str) -> float:
        """Seconds before ``source`` may cause another check (0: now)."""
        bucket = self.buckets.get(source)
        return 0.0 if bucket is None else bucket.next_token_in(self.monotonic())

    def failed(self, source: str) -> None:
        """One more failed check from ``source``."""
        now = self.monotonic()
        bucket = self.buckets.get(source)
        if bucket is None:
            if len(self.buckets) >= _SOURCES_MAX:
                full = [k for k, b in self.buckets.items() if b.next_token_in(now) == 0.0]
                for k in full[: max(1, len(full) // 2)]:
                    del self.buckets[k]
                while len(self.buckets) >= _SOURCES_MAX:
                    self.buckets.popitem(last=False)
            bucket = self.buckets[source] = TokenBucket(self.per_second, self.burst)
        self.buckets.move_to_end(source)
        bucket.take(now, 1)


class CachedReviewer:
    """Asks the ``Reviewer`` and remembers its answers, keyed by a hash of the token: accepted
    ones for ``cache_ttl`` seconds, rejections and denials for ``negative_ttl``; limits the
    failed checks per source (``FailureLimiter``); maps the answers to 401/403/429/503."""

    def __init__(
        self,
        reviewer: Reviewer | None,
        cache_ttl: float,
        monotonic: Callable[[], float] = time.monotonic,
        *,
        negative_ttl: float = 0.0,
        failures: FailureLimiter | None = None,
    ) -> None:
        self.reviewer = reviewer
        self.cache = _TTLCache(cache_ttl, monotonic)
        self.negative_ttl = negative_ttl
        self.failures = failures
        self.reviews = 0
        """TokenReviews asked (tests and the log)."""

    def _reviewer(self) -> Reviewer:
        if self.reviewer is None:
            raise AuthError(
                503,
                "auth.mode is kubernetes but runway has no API server to ask (no kubeconfig, not "
                "in a pod); set auth.mode to static or run runway with cluster access",
            )
        return self.reviewer

    async def authenticate(self, token: str, key: bytes, source: str = "") -> Identity:
        """The identity of ``token`` (raises 401 when not authenticated, 429 when ``source``
        caused too many failed checks lately)."""
        cached: Identity | str | None = self.cache.get(("user", key))
        if cached == REJECTED:
            raise _unauthenticated("invalid or expired bearer token", "invalid_token")
        if isinstance(cached, Identity):
            return cached
        limiter = self.failures
        if limiter is not None:
            wait = limiter.wait(source)
            if wait > 0:
                raise AuthError(
                    429,
                    f"too many failed token checks from {source or 'this source'}: unknown "
                    f"tokens are not checked for {math.ceil(wait)}s",
                    {"Retry-After": str(math.ceil(wait))},
                )
        try:
            self.reviews += 1
            identity = await self._reviewer().review(token)
        except ReviewUnavailable as exc:
            if limiter is not None:
                limiter.failed(source)
            raise _unavailable(exc) from None
        if identity is None:
            if limiter is not None:
                limiter.failed(source)
            self.cache.put(("user", key), REJECTED, self.negative_ttl)
            raise _unauthenticated("invalid or expired bearer token", "invalid_token")
        self.cache.put(("user", key), identity)
        return identity

    async def authorize(self, identity: Identity, key: bytes, permission: Permission) -> None:
        """Raise 403 unless the reviewer allows ``permission`` for ``identity``."""
        cached = self.cache.get(("allowed", key, permission))
        if cached is True:
            return
        if cached is None:
            try:
                access = await self._reviewer().allowed(identity, permission)
            except ReviewUnavailable as exc:
                raise _unavailable(exc) from None
            if access.allowed:
                self.cache.put(("allowed", key, permission), True)
                return
            cached = access.reason or "no RBAC rule allows it"
            self.cache.put(("allowed", key, permission), cached, self.negative_ttl)
        raise AuthError(
            403,
            f"forbidden: user {identity.username!r} may not {permission.describe()} ({cached}); "
            "grant it with a Role or ClusterRole",
        )


def _unavailable(exc: ReviewUnavailable) -> AuthError:
    return AuthError(
        503, exc.message, {"Retry-After": exc.retry_after} if exc.retry_after else None
    )


# --- the guard --------------------------------------------------------------------------------


def resolve_mode(config: AuthConfig, has_cluster: bool) -> Mode:
    """The effective mode: ``auto`` is static with tokens, kubernetes with a cluster, else none."""
    if config.mode != "auto":
        return config.mode
    if config.static_tokens or config.static_token_file is not None:
        return "static"
    return "kubernetes" if has_cluster else "none"


@dataclass
class AuthGuard:
    """Checks bearer tokens per ``auth``; held at ``app.state.auth``."""

    config: AuthConfig
    mode: Mode
    static: StaticTokens | None = None
    reviewer: CachedReviewer | None = None

    @classmethod
    def build(
        cls,
        config: AuthConfig,
        reviewer: Reviewer | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> AuthGuard:
        """The guard for ``config``; ``reviewer`` asks the cluster (None: no cluster)."""
        mode = resolve_mode(config, reviewer is not None)
        guard = cls(config, mode)
        if mode == "static":
            guard.static = StaticTokens(
                [t.get_secret_value() for t in config.static_tokens], config.static_token_file
            )
        elif mode == "kubernetes":
            limit = config.failure_limit
            guard.reviewer = CachedReviewer(
                reviewer,
                config.cache_ttl,
                monotonic,
                negative_ttl=config.negative_cache_ttl,
                failures=FailureLimiter(limit.burst, limit.per_second, monotonic),
            )
        return guard

    def protects(self, method: str, path: str) -> Scope | None:
        """Which scope the middleware checks for this request (None: left to the route)."""
        if self.mode == "none" or method not in ("GET", "HEAD"):
            return None
        if self.config.protect_metrics and path.rstrip("/") == "/metrics":
            return "metrics"
        if self.config.protect_read_only and path.startswith("/v1/"):
            return "read"
        return None

    def permission(
        self,
        scope: Scope,
        *,
        verb: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> Permission:
        """The RBAC permission ``scope`` needs in kubernetes mode."""
        sar = self.config.sar
        if scope == "metrics":
            return Permission(verb or "get", path="/metrics")
        default = sar.verb if scope == "write" else sar.read_verb
        return Permission(verb or default, sar.group, sar.resource, namespace, name)

    async def check(
        self,
        authorization: str | None,
        scope: Scope,
        permission: Permission | None = None,
        *,
        source: str = "",
    ) -> Principal:
        """The caller of a request with header ``authorization`` from address ``source``, or
        raise ``AuthError``."""
        try:
            principal = await self._check(authorization, scope, permission, source)
        except AuthError as exc:
            result = {401: "unauthenticated", 403: "forbidden", 429: "limited"}.get(
                exc.status, "unavailable"
            )
            metrics.AUTH_DECISIONS.labels(scope, result).inc()
            raise
        metrics.AUTH_DECISIONS.labels(scope, "allowed").inc()
        return principal

    async def _check(
        self, authorization: str | None, scope: Scope, permission: Permission | None, source: str
    ) -> Principal:
        if self.mode == "none":
            return ANONYMOUS
        token = bearer_token(authorization)
        if self.static is not None:
            user = self.static.match(token)
            if user is None:
                raise _unauthenticated("invalid bearer token", "invalid_token")
            return Principal(user, via="static")
        assert self.reviewer is not None
        key = _digest(token)
        identity = await self.reviewer.authenticate(token, key, source)
        await self.reviewer.authorize(identity, key, permission or self.permission(scope))
        return Principal(identity.username, identity.groups, via="kubernetes")


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (raise 401 otherwise)."""
    if not authorization:
        raise _unauthenticated("missing bearer token: send `Authorization: Bearer <token>`")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthenticated(
            "unsupported Authorization header: send `Authorization: Bearer <token>`",
            "invalid_request",
        )
    return token


# --- FastAPI integration ----------------------------------------------------------------------

# Declares the bearer scheme in the OpenAPI document; the header is parsed by the guard itself.
_bearer = HTTPBearer(
    auto_error=False,
    description="A runway token (auth.mode static) or a "
    "Kubernetes bearer token (auth.mode kubernetes).",
)


def _guard_of(request: Request) -> AuthGuard:
    guard: AuthGuard | None = getattr(request.app.state, "auth", None)
    if guard is None:  # fail closed: a route asked for auth in an app that never set it up
        raise AuthError(500, "authentication is not set up in this app (install_auth not called)")
    return guard


def require_auth(
    scope: Scope = "write", *, verb: str | None = None
) -> Callable[..., Awaitable[Principal]]:
    """The dependency a route adds to require an authenticated, authorized caller.

    ``scope`` "write" asks ``auth.sar.verb`` (or ``verb``) on ``auth.sar.resource``, for the
    object named by the route's ``namespace``/``name`` path parameters when it has them.
    """

    async def dependency(
        request: Request,
        _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        guard = _guard_of(request)
        params = request.path_params
        permission = guard.permission(
            scope, verb=verb, namespace=params.get("namespace"), name=params.get("name")
        )
        principal = await guard.check(
            presented_authorization(request.headers),
            scope,
            permission,
            source=request.client.host if request.client else "",
        )
        if principal is not ANONYMOUS:
            log.info("authorized", user=principal.user, scope=scope, path=request.url.path)
        return principal

    dependency.__runway_auth_scope__ = scope  # type: ignore[attr-defined]
    return dependency


async def require_operator(request: Request, why: str) -> Principal:
    """The caller of ``request`` as an operator: allowed ``auth.sar.verb`` on ``auth.sar``'s
    resource cluster-wide (no namespace: a ClusterRoleBinding, not a namespace's RoleBinding),
    or any static token; raises ``AuthError`` (403 saying ``why``) otherwise."""
    guard = _guard_of(request)
    try:
        principal = await guard.check(
            presented_authorization(request.headers),
            "write",
            guard.permission("write"),
            source=request.client.host if request.client else "",
        )
    except AuthError as exc:
        if exc.status != 403:
            raise
        sar = guard.config.sar
        raise AuthError(
            403,
            f"{why}: only an operator may, one allowed {sar.verb} on {sar.resource}."
            f"{sar.group} in every namespace (a ClusterRoleBinding, e.g. of the chart's "
            "RELEASE-runway-admin through peopleRoles.admins); a namespace's RoleBinding is not "
            "enough",
        ) from None
    return principal


_WORKLOAD_PATH = re.compile(r"^/v1/workloads/([^/:]+)/[^/]")


def read_namespaces(path: str, query: str) -> tuple[str, ...]:
    """The namespaces a protected read is about, each authorised on its own (a
    SubjectAccessReview in that namespace: a RoleBinding there grants it): one workload
    (``/v1/workloads/NS/NAME``), one namespace's list (``/v1/workloads?namespace=NS``), a
    preemptor/victim pair (``/v1/explain``: both namespaces). Empty: the read spans namespaces
    (every other route, a list with ``-A``) and asks the permission cluster-wide."""
    found = _WORKLOAD_PATH.match(path)
    if found:
        return (found.group(1),)
    params = parse_qs(query, keep_blank_values=True)
    if path.rstrip("/") == "/v1/workloads":
        namespace = params.get("namespace", [""])
        return (namespace[0],) if len(namespace) == 1 and namespace[0] else ()
    if path.rstrip("/") == "/v1/explain":
        pair = [params.get(k, [""]) for k in ("preemptor", "victim")]
        if all(len(v) == 1 and "/" in v[0] for v in pair):
            return tuple(sorted({v[0].partition("/")[0] for v in pair}))
    return ()


class AuthMiddleware:
    """Guards read-only ``/v1`` GETs (``protectReadOnly``) and ``/metrics`` (``protectMetrics``)."""

    def __init__(self, app: Any, guard: AuthGuard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """ASGI entry point."""
        if scope["type"] == "http":
            needed = self.guard.protects(scope["method"], scope["path"])
            if needed is not None:
                request = Request(scope)
                namespaces: tuple[str | None, ...] = (None,)
                if needed == "read":
                    query = scope.get("query_string", b"").decode("latin-1")
                    namespaces = read_namespaces(scope["path"], query) or (None,)
                try:
                    for namespace in namespaces:
                        await self.guard.check(
                            presented_authorization(request.headers),
                            needed,
                            self.guard.permission(needed, namespace=namespace),
                            source=request.client.host if request.client else "",
                        )
                except AuthError as exc:
                    await exc.response()(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def install_auth(
    app: FastAPI,
    config: AuthConfig,
    reviewer: Reviewer | None = None,
    *,
    host: str = "127.0.0.1",
    monotonic: Callable[[], float] = time.monotonic,
) -> AuthGuard:
    """Build the guard, hold it at ``app.state.auth``, add the read/metrics middleware.
    ``reviewer`` answers ``auth.mode: kubernetes`` (None: no cluster)."""
    guard = AuthGuard.build(config, reviewer, monotonic=monotonic)
    app.state.auth = guard

    async def refused(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AuthError)
        return exc.response()

    app.add_exception_handler(AuthError, refused)
    if config.protect_read_only or config.protect_metrics:
        app.add_middleware(AuthMiddleware, guard=guard)
    if guard.mode == "none":
        if not _is_loopback(host):
            log.warning(
                "REST endpoints that change state are NOT authenticated (auth.mode none) and "
                "runway listens beyond loopback; set auth.mode static or kubernetes",
                host=host,
            )
        if config.protect_read_only or config.protect_metrics:
            log.warning("auth.protectReadOnly/protectMetrics have no effect with auth.mode none")
    elif guard.mode == "kubernetes" and reviewer is None:
        log.error(
            "auth.mode is kubernetes but there is no API server: authenticated requests get 503"
        )
    log.info(
        "REST authentication",
        mode=guard.mode,
        configured=config.mode,
        protect_read_only=config.protect_read_only,
        protect_metrics=config.protect_metrics,
    )
    return guard


def _auth_scopes(dependant: Any) -> set[str]:
    found: set[str] = set()
    for dep in dependant.dependencies:
        scope = getattr(dep.call, "__runway_auth_scope__", None)
        if scope is not None:
            found.add(scope)
        found |= _auth_scopes(dep)
    return found


def unguarded_mutating_routes(app: FastAPI) -> list[str]:
    """``METHOD path`` of every ``/v1`` route that changes state without ``require_auth``."""
    out: list[str] = []
    for route in app.routes:
        if not isinstance(route, APIRoute) or not route.path.startswith("/v1/"):
            continue
        mutating = sorted((route.methods or set()) & _MUTATING)
        if mutating and "write" not in _auth_scopes(route.dependant):
            out.extend(f"{m} {route.path}" for m in mutating)
    return out
