"""The Kubernetes API client: every call over ONE shared ``httpx.AsyncClient``.

``KubeClient`` (transport injectable: tests hand it a respx router or ``httpx.MockTransport``)
asks ``ClusterAccess`` (``app.kube.access``) for the Authorization header on every request,
raises the typed errors of ``app.kube.errors``, retries through ``app.kube.retry``, keeps to
the client-side QPS limit (``app.kube.ratelimit``) and counts every call in ``runway_kube_api_*``.
Resources are ``app.kube.resources``; the watch query and event decoding ``app.kube.watch``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx
import msgspec

import app as package
from app import metrics
from app.config.kubernetes import KubernetesConfig
from app.config.loader import ConfigError
from app.kube.access import ClusterAccess, KubeConfigError, load_access
from app.kube.errors import (
    ApiError,
    ApiUnavailable,
    Timeout,
    decode_status,
    error_from_status,
)
from app.kube.ratelimit import RateLimiter
from app.kube.resources import Resource
from app.kube.retry import RetryPolicy, retrying
from app.kube.stream import StreamBroken, WatchSocket, open_watch
from app.kube.watch import LineSplitter, watch_params
from app.logs import get_logger

T = TypeVar("T")
DEFAULT_HEADERS = {"Accept": "application/json", "User-Agent": f"runway/{package.__version__}"}
"""Sent with every call (the httpx client's defaults; the socket watch adds them itself)."""

WatchBatch = list[bytes]
"""Watch event lines (JSON, one event each) read together (``KubeClient.watch``)."""

log = get_logger("kube.client")
# httpx logs every request at INFO: one line per lease renewal is noise; our metrics count them.
logging.getLogger("httpx").setLevel(logging.WARNING)

_READ = httpx.ByteStream(b"")
"""What a read response's stream is replaced with (``request``)."""

PatchType = Literal["strategic", "merge", "json", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


# --- the client -------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()


def _encode(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    return _encoder.encode(body)


@dataclass
class KubeClient:
    """The verb-family API over one shared ``httpx.AsyncClient``."""

    access: ClusterAccess
    transport: httpx.AsyncBaseTransport | None = None
    request_timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    qps: float | None = None
    burst: int = 10
    http: httpx.AsyncClient = field(init=False)
    _limiter: RateLimiter | None = field(init=False, default=None)
    _ssl: ssl.SSLContext | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._ssl = self.access.ssl_context() if self.transport is None else None
        self.http = httpx.AsyncClient(
            base_url=self.access.host,
            verify=self._ssl if self._ssl is not None else True,
            transport=self.transport,
            timeout=httpx.Timeout(self.request_timeout),
            headers=DEFAULT_HEADERS,
            # Watches are long-lived connections; leave room for them next to normal calls.
            limits=httpx.Limits(max_connections=50, max_keepalive_connections=10),
            trust_env=False,
        )
        if self.qps:
            self._limiter = RateLimiter(self.qps, self.burst)

    async def aclose(self) -> None:
        """Close the shared connection pool."""
        await self.http.aclose()

    # -- one request -----------------------------------------------------------------------

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        auth = self.access.authorization()
        if auth:
            headers["Authorization"] = auth
        return headers

    def _extensions(self) -> dict[str, Any]:
        sni = self.access.tls_server_name
        return {"sni_hostname": sni} if sni else {}

    async def request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: str,
        params: Mapping[str, str | int] | None = None,
        content: bytes | None = None,
        content_type: str | None = None,
        timeout_s: float | None = None,
    ) -> httpx.Response:
        """One HTTP call, no retry: raises a typed error for any status >= 400."""
        if self._limiter is not None:
            await self._limiter.acquire()
        headers = self._headers({"Content-Type": content_type} if content_type else None)
        start = time.perf_counter()
        code = "error"
        try:
            resp = await self.http.request(
                method,
                path,
                params=dict(params) if params else None,
                content=content,
                headers=headers,
                timeout=timeout_s if timeout_s is not None else httpx.USE_CLIENT_DEFAULT,
                extensions=self._extensions(),
            )
            code = str(resp.status_code)
            # httpx's Response and its stream refer to each other, so a read response waits
            # for the cyclic GC to be freed: a resync's 300 LIST pages (4 MB bodies each)
            # piled up to 600 MB (bench.scale). The body is read and the stream closed.
            resp.stream = _READ
        except httpx.TimeoutException as exc:
            code = "timeout"
            raise Timeout(
                504,
                f"no answer within the request timeout ({exc!r})",
                "Timeout",
                method=method,
                path=path,
            ) from None
        except httpx.TransportError as exc:
            raise ApiUnavailable(f"{method} {path}: API server unreachable: {exc!r}") from None
        finally:
            metrics.KUBE_API_REQUESTS.labels(verb, resource, code).inc()
            metrics.KUBE_API_DURATION.labels(verb, resource).observe(time.perf_counter() - start)
        if resp.status_code >= 400:
            raise error_from_status(
                resp.status_code,
                decode_status(resp.content),
                retry_after_header=resp.headers.get("Retry-After"),
                method=method,
                path=path,
                fallback_message=resp.text[:200],
            )
        return resp

    async def _call(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        resource: str,
        idempotent: bool,
        params: Mapping[str, str | int] | None = None,
        content: bytes | None = None,
        content_type: str | None = None,
    ) -> httpx.Response:
        async def once() -> httpx.Response:
            return await self.request(
                method,
                path,
                verb=verb,
                resource=resource,
                params=params,
                content=content,
                content_type=content_type,
            )

        return await retrying(once, self.retry, idempotent=idempotent, what=f"{method} {path}")

    # -- verbs -----------------------------------------------------------------------------

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        into: type[T],
        subresource: str | None = None,
    ) -> T:
        """GET one object, decoded into ``into`` (a msgspec struct or ``dict[str, Any]``)."""
        resp = await self._call(
            "GET",
            resource.path(namespace, name, subresource),
            verb="get",
            resource=resource.label(subresource),
            idempotent=True,
        )
        return msgspec.json.decode(resp.content, type=into)

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        into: type[T],
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> T:
        """LIST one page of a collection (all namespaces when ``namespace`` is None)."""
        params: dict[str, str | int] = {}
        if limit:
            params["limit"] = limit
        if continue_:
            params["continue"] = continue_
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        resp = await self._call(
            "GET",
            resource.path(namespace),
            verb="list",
            resource=resource.label(),
            idempotent=True,
            params=params,
        )
        return msgspec.json.decode(resp.content, type=into)

    async def create(
        self,
        resource: Resource,
        body: Any,
        namespace: str | None = None,
        *,
        into: type[T],
        name: str | None = None,
        subresource: str | None = None,
    ) -> T:
        """POST a new object (or a subresource such as ``pods/binding``). Not retried on 5xx:
        the first attempt may have been applied."""
        resp = await self._call(
            "POST",
            resource.path(namespace, name, subresource),
            verb="create",
            resource=resource.label(subresource),
            idempotent=False,
            content=_encode(body),
            content_type="application/json",
        )
        return msgspec.json.decode(resp.content, type=into)

    async def replace(
        self,
        resource: Resource,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        into: type[T],
        subresource: str | None = None,
    ) -> T:
        """PUT an object; with ``metadata.resourceVersion`` set it is compare-and-swap (409)."""
        resp = await self._call(
            "PUT",
            resource.path(namespace, name, subresource),
            verb="update",
            resource=resource.label(subresource),
            idempotent=True,
            content=_encode(body),
            content_type="application/json",
        )
        return msgspec.json.decode(resp.content, type=into)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        into: type[T],
        patch_type: PatchType = "strategic",
        subresource: str | None = None,
        idempotent: bool | None = None,
    ) -> T:
        """PATCH an object. Use ``strategic`` to add a pod condition (a merge patch would replace
        the whole list). JSON patches are not retried unless ``idempotent=True``."""
        resp = await self._call(
            "PATCH",
            resource.path(namespace, name, subresource),
            verb="patch",
            resource=resource.label(subresource),
            idempotent=patch_type != "json" if idempotent is None else idempotent,
            content=_encode(patch),
            content_type=_PATCH_CONTENT_TYPES[patch_type],
        )
        return msgspec.json.decode(resp.content, type=into)

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> None:
        """DELETE with optional preconditions: a ``uid`` precondition makes sure a re-created
        pod of the same name is not deleted by mistake (409 Conflict then)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        await self._call(
            "DELETE",
            resource.path(namespace, name),
            verb="delete",
            resource=resource.label(),
            idempotent=True,
            content=_encode(options),
            content_type="application/json",
        )

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_open: Callable[[Callable[[], WatchBatch] | None], None] | None = None,
    ) -> AsyncGenerator[WatchBatch, None]:
        """WATCH from ``resource_version``: yields the stream's event lines (JSON, one event
        each) in batches — every line that arrived since the previous batch — until the server
        ends the stream. Decoding is the caller's (``app.kube.watch``).

        ``on_open`` receives, once the stream is open, a function that returns at once (no
        await) the lines that have arrived on the socket since the last batch; and None when
        the stream closes. With an injected transport (tests) it is never called.

        Errors opening the stream are typed (410 Gone → relist); a broken stream raises
        ``ApiUnavailable``. Not retried here: the reflector decides where to resume.
        """
        params = watch_params(
            resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        path = resource.path(namespace)
        if self._limiter is not None:
            await self._limiter.acquire()
        if self.transport is None:  # a real API server: read the socket (kube/stream.py)
            stream = self._watch_socket(resource, path, params, timeout_seconds, on_open)
            async with aclosing(stream) as it:
                async for event in it:
                    yield event
            return
        label = resource.label()
        # The server closes the stream after timeoutSeconds; a read that waits much longer
        # means the connection died silently.
        timeout = httpx.Timeout(self.request_timeout, read=timeout_seconds + 30.0)
        start = time.perf_counter()
        code = "error"
        try:
            async with self.http.stream(
                "GET",
                path,
                params=params,
                headers=self._headers(),
                timeout=timeout,
                extensions=self._extensions(),
            ) as resp:
                code = str(resp.status_code)
                _watch_opened(label, resp.status_code, start)
                if resp.status_code >= 400:
                    body = await resp.aread()
                    raise _watch_refused(
                        resp.status_code, body, resp.headers.get("Retry-After"), path
                    )
                lines = LineSplitter(path)
                async for data in resp.aiter_bytes():
                    if batch := lines.feed(data):
                        yield batch
                if batch := lines.rest():
                    yield batch
        except httpx.TimeoutException as exc:
            raise Timeout(
                504, f"watch stream stalled ({exc!r})", "Timeout", method="GET", path=path
            ) from None
        except httpx.TransportError as exc:
            if code == "error":
                metrics.KUBE_API_REQUESTS.labels("watch", label, code).inc()
            raise ApiUnavailable(f"GET {path} (watch): stream broken: {exc!r}") from None

    async def _watch_socket(
        self,
        resource: Resource,
        path: str,
        params: Mapping[str, str | int],
        timeout_seconds: int,
        on_open: Callable[[Callable[[], WatchBatch] | None], None] | None = None,
    ) -> AsyncGenerator[WatchBatch, None]:
        """``watch`` over its own connection (``app.kube.stream``), same metrics and errors."""
        label = resource.label()
        headers = {**DEFAULT_HEADERS, **self._headers()}
        start = time.perf_counter()
        resp: WatchSocket | None = None
        try:
            # The server ends the stream after timeoutSeconds: one deadline for all of it.
            async with asyncio.timeout(timeout_seconds + 30.0):
                resp = await open_watch(
                    self.access.host,
                    path,
                    params,
                    headers,
                    ssl_context=self._ssl,
                    server_hostname=self.access.tls_server_name,
                    connect_timeout=self.request_timeout,
                )
                _watch_opened(label, resp.status, start)
                if resp.status >= 400:
                    body = await resp.body()
                    raise _watch_refused(resp.status, body, resp.headers.get("retry-after"), path)
                lines = LineSplitter(path)
                opened = resp

                def arrived() -> WatchBatch:
                    """The lines on the socket now (the watch is suspended at an await)."""
                    try:
                        data = opened.read_now()
                    except StreamBroken as exc:
                        broken = f"GET {path} (watch): stream broken: {exc!r}"
                        raise ApiUnavailable(broken) from None
                    return lines.feed(data) if data else []

                if on_open is not None:
                    on_open(arrived)
                while data := await resp.read():
                    if batch := lines.feed(data):
                        yield batch
                if batch := lines.rest():
                    yield batch
        except TimeoutError:
            raise Timeout(504, "watch stream stalled", "Timeout", method="GET", path=path) from None
        except (StreamBroken, OSError, ssl.SSLError) as exc:
            if resp is None:
                metrics.KUBE_API_REQUESTS.labels("watch", label, "error").inc()
            raise ApiUnavailable(f"GET {path} (watch): stream broken: {exc!r}") from None
        finally:
            if on_open is not None:
                on_open(None)
            if resp is not None:
                resp.close()


def _watch_opened(label: str, status: int, start: float) -> None:
    """Count a watch's answer and time it until the stream opened (both ways of watching)."""
    metrics.KUBE_API_REQUESTS.labels("watch", label, str(status)).inc()
    metrics.KUBE_API_DURATION.labels("watch", label).observe(time.perf_counter() - start)


def _watch_refused(status: int, body: bytes, retry_after: str | None, path: str) -> ApiError:
    """The typed error of a watch the API server refused (410 Gone: relist)."""
    return error_from_status(
        status,
        decode_status(body),
        retry_after_header=retry_after,
        method="GET",
        path=path,
        fallback_message=body[:200].decode(errors="replace"),
    )


def log_dry_run(verb: str, path: str, body: Any = None) -> None:
    """Log an API call that would have been made (the embedded default has no cluster)."""
    log.info("dry-run: no cluster, API call not made", verb=verb, path=path, body=body)


def connect(
    config: KubernetesConfig,
    *,
    kubeconfig: str | None = None,
    environ: Mapping[str, str] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> KubeClient | None:
    """The client for ``config`` (``kubeconfig`` overrides ``config.kubeconfig``), or None on the
    embedded default. A kubeconfig that exists but is unusable is a ``ConfigError``."""
    try:
        access = load_access(
            kubeconfig or config.kubeconfig, context=config.context, environ=environ
        )
    except KubeConfigError as exc:
        raise ConfigError(str(exc)) from None
    if access is None:
        log.info("no kubeconfig and not in a cluster: embedded default, API calls are dry-run")
        return None
    return KubeClient(
        access,
        transport=transport,
        request_timeout=config.request_timeout,
        retry=RetryPolicy(total=config.retry_timeout),
        qps=config.qps,
        burst=config.burst,
    )
