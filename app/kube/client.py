"""The Kubernetes API client: cluster access from the ``kubernetes`` package, calls over httpx.

* ``load_access`` finds the cluster the way operators expect: ``--kubeconfig`` (config
  ``kubernetes.kubeconfig``), else ``$KUBECONFIG``, else the in-cluster service account; none of
  them means the embedded default (no client at all).
* ``KubeClient`` makes every call through ONE shared ``httpx.AsyncClient`` (transport injectable:
  tests hand it a respx router or ``httpx.MockTransport``), asks the ``kubernetes`` configuration
  for the Authorization header on every request (projected service-account tokens and exec
  plugins rotate), raises the typed errors of ``app.kube.errors``, retries through
  ``app.kube.retry`` and counts every call in ``runway_kube_api_*``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx
import msgspec

import app as package
from app import metrics
from app.config.kubernetes import KubernetesConfig
from app.config.loader import ConfigError
from app.kube.errors import (
    ApiUnavailable,
    Timeout,
    decode_status,
    error_from_status,
)
from app.kube.objects import RawWatchEvent
from app.kube.retry import RetryPolicy, retrying
from app.logs import get_logger

T = TypeVar("T")
log = get_logger("kube.client")
# httpx logs every request at INFO: one line per lease renewal is noise; our metrics count them.
logging.getLogger("httpx").setLevel(logging.WARNING)

PatchType = Literal["strategic", "merge", "json", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class KubeConfigError(Exception):
    """A kubeconfig or in-cluster configuration that exists but cannot be used."""


# --- resources -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``/api/v1/pods`` or ``/apis/<group>/<version>/<plural>``."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection, an object, or one of its subresources."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def label(self, subresource: str | None = None) -> str:
        """The metric label: ``pods`` or ``pods/status``."""
        return f"{self.plural}/{subresource}" if subresource else self.plural


PODS = Resource("", "v1", "pods")
NODES = Resource("", "v1", "nodes", namespaced=False)
EVENTS = Resource("", "v1", "events")
LEASES = Resource("coordination.k8s.io", "v1", "leases")


# --- cluster access ---------------------------------------------------------------------------


class _TokenFile:
    """Re-read a token file when it changes (kubelet rotates projected tokens in place).

    Wraps the ``kubernetes`` package's own refresh hook: that hook re-reads the in-cluster
    token only once a minute and never re-reads a kubeconfig ``tokenFile``.
    """

    def __init__(self, path: str, previous: Callable[[Any], None] | None) -> None:
        self.path = path
        self.previous = previous
        self.stamp: tuple[int, int, int] | None = None
        self.token: str | None = None

    def __call__(self, configuration: Any) -> None:
        if self.previous is not None:
            self.previous(configuration)
            # The package's hooks re-install themselves on every call; stay on top of them.
            current = configuration.refresh_api_key_hook
            if current is not self:
                self.previous = current
                configuration.refresh_api_key_hook = self
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp != self.stamp:
                with open(self.path, encoding="utf-8") as f:
                    text = f.read().strip()
                if text:
                    self.token, self.stamp = f"Bearer {text}", stamp
        except OSError as exc:
            log.warning("cannot re-read token file", path=self.path, error=str(exc))
        if self.token is not None:
            configuration.api_key["BearerToken"] = self.token
            configuration.api_key_prefix.pop("BearerToken", None)


@dataclass
class ClusterAccess:
    """Where the API server is and how to authenticate, from a ``kubernetes`` Configuration."""

    configuration: Any
    """``kubernetes.client.Configuration``; asked for the token on every request."""
    source: str
    """Human-readable origin: ``kubeconfig /path`` or ``in-cluster``."""
    namespace: str | None = None
    """The pod's namespace when in-cluster (default namespace of the Lease)."""

    @property
    def host(self) -> str:
        """The API server URL."""
        host: str = self.configuration.host
        return host.rstrip("/")

    def authorization(self) -> str | None:
        """The Authorization header value right now (None: client certs only)."""
        cfg = self.configuration
        value: str | None = cfg.get_api_key_with_prefix(
            "BearerToken"
        ) or cfg.get_api_key_with_prefix("authorization")
        if value is None and cfg.username and cfg.password:
            value = cfg.get_basic_auth_token()
        if value and value.lower().startswith("bearer "):
            value = "Bearer " + value[7:]
        return value

    def ssl_context(self) -> ssl.SSLContext:
        """TLS settings: verification on unless the kubeconfig says insecure-skip-tls-verify."""
        cfg = self.configuration
        if cfg.verify_ssl:
            ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        else:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
        return ctx

    @property
    def tls_server_name(self) -> str | None:
        """``tls-server-name`` of the kubeconfig cluster (SNI and certificate name), if set."""
        name: str | None = getattr(self.configuration, "tls_server_name", None)
        return name


def _from_kubeconfig(path: str, context: str | None) -> ClusterAccess:
    from kubernetes.client import Configuration
    from kubernetes.config import kube_config

    cfg: Any = Configuration()
    make_loader: Any = kube_config._get_kube_config_loader
    try:
        loader = make_loader(filename=path, active_context=context, persist_config=False)
        loader.load_and_set(cfg)
    except Exception as exc:  # the package raises ConfigException, OSError, YAML and key errors
        raise KubeConfigError(f"cannot use kubeconfig {path!r}: {exc}") from None
    user = getattr(loader, "_user", None)
    token_file = user.safe_get("tokenFile") if user is not None else None
    if token_file:
        base = os.path.dirname(getattr(user, "path", "") or path.split(os.pathsep)[0])
        full = os.path.join(base, token_file)
        cfg.refresh_api_key_hook = _TokenFile(full, cfg.refresh_api_key_hook)
    return ClusterAccess(cfg, f"kubeconfig {path}")


def _in_cluster(environ: Mapping[str, str], sa_dir: str) -> ClusterAccess | None:
    from kubernetes.client import Configuration
    from kubernetes.config.incluster_config import InClusterConfigLoader

    token = os.path.join(sa_dir, "token")
    if not environ.get("KUBERNETES_SERVICE_HOST") or not os.path.isfile(token):
        return None
    cfg: Any = Configuration()
    loader_cls: Any = InClusterConfigLoader
    try:
        loader_cls(
            token_filename=token,
            cert_filename=os.path.join(sa_dir, "ca.crt"),
            environ=environ,
        ).load_and_set(cfg)
    except Exception as exc:
        raise KubeConfigError(f"cannot use the in-cluster service account: {exc}") from None
    cfg.refresh_api_key_hook = _TokenFile(token, cfg.refresh_api_key_hook)
    namespace = None
    try:
        with open(os.path.join(sa_dir, "namespace"), encoding="utf-8") as f:
            namespace = f.read().strip() or None
    except OSError:
        pass
    return ClusterAccess(cfg, "in-cluster", namespace=namespace)


def load_access(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
) -> ClusterAccess | None:
    """The cluster to talk to: explicit kubeconfig, ``$KUBECONFIG``, in-cluster, else None.

    ``~/.kube/config`` is deliberately not consulted: a developer's laptop context must never
    be picked up by accident; pass ``--kubeconfig`` to use it.
    """
    env = os.environ if environ is None else environ
    if kubeconfig:
        return _from_kubeconfig(os.path.expanduser(kubeconfig), context)
    if env.get("KUBECONFIG"):
        return _from_kubeconfig(env["KUBECONFIG"], context)
    return _in_cluster(env, service_account_dir)


# --- rate limiting ----------------------------------------------------------------------------


class TokenBucket:
    """Client-side QPS limit (as client-go's ``--kube-api-qps``/``burst``)."""

    def __init__(self, qps: float, burst: int, monotonic: Callable[[], float] = time.monotonic):
        self.qps = qps
        self.burst = max(1, burst)
        self.tokens = float(self.burst)
        self.monotonic = monotonic
        self.stamp = monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait for a token."""
        async with self.lock:
            now = self.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
            self.stamp = now
            if self.tokens < 1:
                await asyncio.sleep((1 - self.tokens) / self.qps)
                self.stamp = self.monotonic()
                self.tokens = 0.0
            else:
                self.tokens -= 1


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
    _limiter: TokenBucket | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.http = httpx.AsyncClient(
            base_url=self.access.host,
            verify=self.access.ssl_context() if self.transport is None else True,
            transport=self.transport,
            timeout=httpx.Timeout(self.request_timeout),
            headers={"Accept": "application/json", "User-Agent": f"runway/{package.__version__}"},
            # Watches are long-lived connections; leave room for them next to normal calls.
            limits=httpx.Limits(max_connections=50, max_keepalive_connections=10),
            trust_env=False,
        )
        if self.qps:
            self._limiter = TokenBucket(self.qps, self.burst)

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
    ) -> AsyncGenerator[RawWatchEvent, None]:
        """WATCH from ``resource_version``: yields raw events until the server ends the stream.

        Errors opening the stream are typed (410 Gone → relist); a broken stream raises
        ``ApiUnavailable``. Not retried here: the reflector decides where to resume.
        """
        params: dict[str, str | int] = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        path = resource.path(namespace)
        if self._limiter is not None:
            await self._limiter.acquire()
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
                metrics.KUBE_API_REQUESTS.labels("watch", label, code).inc()
                metrics.KUBE_API_DURATION.labels("watch", label).observe(
                    time.perf_counter() - start
                )
                if resp.status_code >= 400:
                    body = await resp.aread()
                    raise error_from_status(
                        resp.status_code,
                        decode_status(body),
                        retry_after_header=resp.headers.get("Retry-After"),
                        method="GET",
                        path=path,
                        fallback_message=body[:200].decode(errors="replace"),
                    )
                async for line in resp.aiter_lines():
                    if line:
                        yield _event_decoder.decode(line)
        except httpx.TimeoutException as exc:
            raise Timeout(
                504, f"watch stream stalled ({exc!r})", "Timeout", method="GET", path=path
            ) from None
        except httpx.TransportError as exc:
            if code == "error":
                metrics.KUBE_API_REQUESTS.labels("watch", label, code).inc()
            raise ApiUnavailable(f"GET {path} (watch): stream broken: {exc!r}") from None
        except msgspec.DecodeError as exc:
            raise ApiUnavailable(f"GET {path} (watch): undecodable event: {exc}") from None


_event_decoder = msgspec.json.Decoder(RawWatchEvent)


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
