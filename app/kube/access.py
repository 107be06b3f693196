"""Cluster access: which API server, how to authenticate, which TLS settings.

``load_access`` finds the cluster the way operators expect: ``--kubeconfig`` (config
``kubernetes.kubeconfig``), else ``$KUBECONFIG``, else the in-cluster service account; none of
them means the embedded default (no client at all). The ``kubernetes`` package parses the
kubeconfig / service account; ``ClusterAccess`` hands the client the Authorization header for
each request (projected service-account tokens and exec plugins rotate) and the TLS settings.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from app.logs import get_logger

log = get_logger("kube.access")

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class KubeConfigError(Exception):
    """A kubeconfig or in-cluster configuration that exists but cannot be used."""


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
    from kubernetes import config as kube_config
    from kubernetes.client import Configuration

    cfg: Any = Configuration()
    load: Any = kube_config.load_kube_config  # the package is untyped
    list_contexts: Any = kube_config.list_kube_config_contexts
    try:
        load(config_file=path, context=context, client_configuration=cfg, persist_config=False)
        contexts, active = list_contexts(config_file=path)
    except Exception as exc:  # the package raises ConfigException, OSError, YAML and key errors
        raise KubeConfigError(f"cannot use kubeconfig {path!r}: {exc}") from None
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    user = ((chosen or {}).get("context") or {}).get("user")
    token_file = _token_file(path, user) if isinstance(user, str) else None
    if token_file:
        cfg.refresh_api_key_hook = _TokenFile(token_file, cfg.refresh_api_key_hook)
    return ClusterAccess(cfg, f"kubeconfig {path}")


def _token_file(path: str, user: str) -> str | None:
    """The ``tokenFile`` of kubeconfig user ``user`` (which kubectl reads and the ``kubernetes``
    package ignores), relative to the file that names it; the first file of a ``KUBECONFIG``
    list that has the user wins, as kubectl merges them."""
    for part in path.split(os.pathsep):
        try:
            with open(part, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            continue
        users = doc.get("users") if isinstance(doc, dict) else None
        for entry in users if isinstance(users, list) else ():
            if isinstance(entry, dict) and entry.get("name") == user:
                token = (entry.get("user") or {}).get("tokenFile")
                if not isinstance(token, str) or not token:
                    return None
                return os.path.join(os.path.dirname(part), token)
    return None


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
