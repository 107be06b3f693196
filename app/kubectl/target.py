"""Where runway is and how to reach it: the API server's service proxy with the user's own
kubeconfig (as kubectl plugins do), or a direct ``--url``.

Through the proxy the API server authenticates the user and authorizes ``get`` (reads) or
``create`` (``POST ...:activate``) on ``services/proxy`` of runway's REST Service (the chart's
``runway-viewer``/``runway-admin`` ClusterRoles grant them), then strips the ``Authorization``
header before it forwards the request. When the user's credentials are a bearer token the
plugin also sends it as ``X-Runway-Authorization``, so runway can check the same user itself
(TokenReview + SubjectAccessReview, ``auth.mode: kubernetes``); client-certificate users are
checked by the API server only.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from app.kube.access import ClusterAccess, KubeConfigError, load_access
from app.kubectl.errors import EXIT_UNREACHABLE, PluginError

FORWARDED_AUTHORIZATION = "X-Runway-Authorization"
"""The header that carries the user's bearer token through the API server's proxy (which
removes ``Authorization``); runway reads it when ``Authorization`` is absent."""

DEFAULT_NAMESPACE = "runway-system"
DEFAULT_SERVICE = "runway-rest"
DEFAULT_PORT = "rest"
DEFAULT_SCHEME = "https"


@dataclass(frozen=True)
class ProxyOptions:
    """Which Service the API server proxies to (the chart's REST Service by default)."""

    namespace: str = DEFAULT_NAMESPACE
    service: str = DEFAULT_SERVICE
    port: str = DEFAULT_PORT
    scheme: str = DEFAULT_SCHEME

    def path(self) -> str:
        """``/api/v1/namespaces/NS/services/SCHEME:NAME:PORT/proxy``."""
        target = quote(f"{self.scheme}:{self.service}:{self.port}", safe=":")
        return f"/api/v1/namespaces/{quote(self.namespace)}/services/{target}/proxy"


@dataclass
class Target:
    """An HTTP client aimed at runway's REST API, and what to call it in messages."""

    client: httpx.Client
    description: str
    via_proxy: bool
    default_namespace: str = "default"
    """The kubeconfig context's namespace (``-n`` overrides it), else ``default``."""
    extra: dict[str, Any] = field(default_factory=dict)


class _KubeAuth(httpx.Auth):
    """The kubeconfig user's Authorization, asked for on every request (tokens rotate)."""

    def __init__(self, access: ClusterAccess) -> None:
        self.access = access

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        value = self.access.authorization()
        if value:
            request.headers["Authorization"] = value
            if value.startswith("Bearer "):
                request.headers[FORWARDED_AUTHORIZATION] = value
        yield request


def kubeconfig_path(explicit: str | None, environ: dict[str, str] | None = None) -> str | None:
    """``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config`` when it exists (kubectl's
    order)."""
    env = os.environ if environ is None else environ
    if explicit:
        return os.path.expanduser(explicit)
    if env.get("KUBECONFIG"):
        return env["KUBECONFIG"]
    home = os.path.expanduser("~/.kube/config")
    return home if os.path.isfile(home) else None


def context_namespace(path: str, context: str | None) -> str | None:
    """The namespace of the kubeconfig's (current or named) context, if it sets one."""
    from kubernetes.config import kube_config

    lister: Any = kube_config.list_kube_config_contexts
    try:
        contexts, active = lister(config_file=path)
    except Exception:  # the package raises many kinds; load_access reports a bad file
        return None
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts if c.get("name") == context), None)
    ns = (chosen or {}).get("context", {}).get("namespace")
    return ns if isinstance(ns, str) and ns else None


def through_proxy(
    kubeconfig: str | None,
    context: str | None,
    options: ProxyOptions,
    *,
    timeout: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> Target:
    """A client for runway behind the API server's service proxy, as the kubeconfig's user."""
    path = kubeconfig_path(kubeconfig)
    if path is None:
        raise PluginError(
            EXIT_UNREACHABLE,
            "no kubeconfig: pass --kubeconfig, set $KUBECONFIG or create ~/.kube/config "
            "(or reach runway directly with --url)",
        )
    try:
        access = load_access(path, context=context)
    except KubeConfigError as exc:
        raise PluginError(EXIT_UNREACHABLE, str(exc)) from None
    assert access is not None  # an explicit path is always loaded or refused
    client = httpx.Client(
        base_url=access.host + options.path(),
        auth=_KubeAuth(access),
        verify=access.ssl_context(),
        timeout=timeout,
        transport=transport,
    )
    where = (
        f"service {options.namespace}/{options.service} port {options.port} through the API "
        f"server {access.host}"
    )
    namespace = context_namespace(path, context) or "default"
    return Target(client, where, via_proxy=True, default_namespace=namespace)


def direct(
    url: str,
    *,
    token: str | None = None,
    ca_file: str | None = None,
    insecure: bool = False,
    timeout: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> Target:
    """A client for runway at ``url`` (a port-forward, an Ingress, a local runway)."""
    verify: Any = True
    if insecure:
        verify = False
    elif ca_file:
        import ssl

        verify = ssl.create_default_context(cafile=ca_file)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.Client(
        base_url=url.rstrip("/"),
        headers=headers,
        verify=verify,
        timeout=timeout,
        transport=transport,
    )
    return Target(client, url, via_proxy=False)
