"""HTTPS serving: the server ``SSLContext``, re-read when the certificate files change.

The listening socket keeps one *front* context for its whole life. Its SNI callback runs at the
start of every handshake (with or without SNI) and, when a newer context was built from changed
files, switches the connection over to it — so a rotated cert-manager Secret is served to new
connections without a restart, and established connections are left alone. A rebuild that fails
(a half-written rotation: new certificate, old key) keeps serving the last good files and is
retried when the files change again.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import os
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

from app import metrics
from app.config import ConfigError
from app.config.security import TLSConfig
from app.logs import get_logger

log = get_logger("tls")

_Stamp = tuple[tuple[int, int, int] | None, ...]

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def _der_item(der: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of the content, end of the content) of the DER item at ``at``."""
    tag, size = der[at], der[at + 1]
    at += 2
    if size & 0x80:
        count = size & 0x7F
        size = int.from_bytes(der[at : at + count], "big")
        at += count
    return tag, at, at + size


def not_after(pem: bytes) -> float | None:
    """The ``notAfter`` (unix seconds) of the first certificate in ``pem``; None when there is no
    readable one. A few lines of DER instead of a dependency: Certificate → tbsCertificate →
    [version], serial, signature, issuer, validity → notAfter."""
    begin, end = b"-----BEGIN CERTIFICATE-----", b"-----END CERTIFICATE-----"
    start = pem.find(begin)
    stop = pem.find(end, start)
    if start < 0 or stop < 0:
        return None
    try:
        der = base64.b64decode(b"".join(pem[start + len(begin) : stop].split()))
        _, at, _ = _der_item(der, 0)  # Certificate
        _, at, _ = _der_item(der, at)  # tbsCertificate
        if der[at] == 0xA0:  # explicit version
            at = _der_item(der, at)[2]
        for _ in range(3):  # serial, signature, issuer
            at = _der_item(der, at)[2]
        _, at, _ = _der_item(der, at)  # validity
        at = _der_item(der, at)[2]  # past notBefore
        tag, begin_at, end_at = _der_item(der, at)
        text = der[begin_at:end_at].decode("ascii")
        layout = "%y%m%d%H%M%SZ" if tag == 0x17 else "%Y%m%d%H%M%SZ"  # UTCTime, GeneralizedTime
        when = datetime.datetime.strptime(text, layout).replace(tzinfo=datetime.UTC)
    except (IndexError, ValueError, binascii.Error):
        return None
    return when.timestamp()


def record_expiry(config: TLSConfig) -> None:
    """Set ``runway_tls_certificate_expiry_timestamp_seconds`` for the serving certificate and
    the client CA from the files (at start and after each reload)."""
    for label, path in (("serving", config.cert_file), ("client-ca", config.client_ca_file)):
        if path is None:
            continue
        try:
            with open(path, "rb") as f:
                when = not_after(f.read())
        except OSError:
            when = None
        if when is not None:
            metrics.TLS_CERT_EXPIRY.labels(label).set(when)


class TLSFilesError(ConfigError):
    """The certificate, key or client CA files cannot be loaded (at startup)."""


def build_context(config: TLSConfig) -> ssl.SSLContext:
    """A server context from the files named in ``config`` (raises ``ssl.SSLError``/``OSError``)."""
    if config.cert_file is None:
        raise ValueError("TLS is off: server.tls.certFile is not set")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _VERSIONS[config.min_version]
    ctx.load_cert_chain(config.cert_file, config.key_file)
    if config.client_ca_file is not None:
        ctx.load_verify_locations(cafile=config.client_ca_file)
        ctx.verify_mode = ssl.CERT_REQUIRED if config.require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def file_stamp(path: str | None) -> tuple[int, int, int] | None:
    """What changes when a certificate file is replaced (inode, mtime, size); None: no file."""
    if path is None:
        return None
    try:
        # stat follows symlinks: a Secret volume swaps its `..data` link, changing the inode.
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class ReloadingTLS:
    """The server's TLS: ``context`` for the listener, rebuilt from the files when they change."""

    def __init__(
        self, config: TLSConfig, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.monotonic = monotonic
        self._paths = (config.cert_file, config.key_file, config.client_ca_file)
        self._stamp = self._stamps()
        try:
            self.context = build_context(config)
        except (ssl.SSLError, OSError) as exc:
            raise TLSFilesError(
                f"cannot serve HTTPS with server.tls certFile={config.cert_file!r} "
                f"keyFile={config.key_file!r} clientCAFile={config.client_ca_file!r}: {exc}"
            ) from None
        self.current = self.context
        """The context new connections get (``context`` until the first reload)."""
        record_expiry(config)
        self.reloads = 0
        self._checked = monotonic()
        self.context.sni_callback = self._on_client_hello

    def _stamps(self) -> _Stamp:
        return tuple(file_stamp(p) for p in self._paths)

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Rebuild ``current`` if the files changed (checked at most once per reloadInterval).

        Returns whether a new context is now served.
        """
        now = self.monotonic()
        if not force and now - self._checked < self.config.reload_interval:
            return False
        self._checked = now
        stamp = self._stamps()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            fresh = build_context(self.config)
        except (ssl.SSLError, OSError) as exc:
            log.warning(
                "TLS files changed but cannot be loaded; still serving the previous certificate",
                cert_file=self.config.cert_file,
                key_file=self.config.key_file,
                error=str(exc),
            )
            return False
        self.current = fresh
        self.reloads += 1
        record_expiry(self.config)
        log.info("TLS certificate reloaded", cert_file=self.config.cert_file, reloads=self.reloads)
        return True

    def _on_client_hello(self, conn: Any, server_name: str | None, ctx: ssl.SSLContext) -> None:
        # Runs inside the handshake: never raise (that would abort the connection).
        try:
            self.maybe_reload()
            if self.current is not ctx:
                conn.context = self.current
        except Exception as exc:  # pragma: no cover - defensive, logged
            log.error("TLS reload check failed", error=repr(exc))


def uvicorn_config(app: Any, tls: ReloadingTLS | None, **kwargs: Any) -> Any:
    """A ``uvicorn.Config`` serving ``app``, over HTTPS with ``tls``'s context when given.

    uvicorn builds its own context from file names, which could never be swapped; this config
    hands it ours instead (works with every uvicorn version, unlike ``ssl_context_factory``).
    """
    import uvicorn

    class _Config(uvicorn.Config):
        def load(self) -> None:
            super().load()
            if tls is not None:
                self.ssl = tls.context

    return _Config(app, **kwargs)


def bound_url(sockets: list[Any], https: bool) -> str:
    """``http(s)://HOST:PORT`` of the first listening socket (the port really bound)."""
    host, port = sockets[0].getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if https else 'http'}://{host}:{port}"


def serve_uvicorn(
    app: Any,
    tls: ReloadingTLS | None,
    on_started: Callable[[str], None] | None = None,
    *,
    second: tuple[Any, ReloadingTLS | None, dict[str, Any]] | None = None,
    **kwargs: Any,
) -> bool:
    """Run uvicorn in this process until it is stopped; False when it failed to start.

    ``on_started`` is called with the URL once the port is bound (after the app's startup), the
    moment a client can connect. ``second`` (app, TLS, uvicorn options): another listener in the
    same event loop, started after the first one's startup (the app's lifespan runs once, on
    the first) and stopped before its shutdown; ``on_started`` then gets both URLs."""
    import asyncio

    import uvicorn

    class _Second(uvicorn.Server):
        up: asyncio.Event | None = None

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the first server handles SIGTERM/SIGINT and stops this one

        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets)
            if self.up is not None:
                self.up.set()

    side = None
    if second is not None:
        side_app, side_tls, side_kwargs = second
        side = _Second(uvicorn_config(side_app, side_tls, lifespan="off", **side_kwargs))

    class _Server(uvicorn.Server):
        side_task: asyncio.Task[None] | None = None

        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets)
            urls = []
            if self.started and side is not None:
                side.up = asyncio.Event()
                self.side_task = asyncio.create_task(side.serve())
                waiting = asyncio.create_task(side.up.wait())
                await asyncio.wait({waiting, self.side_task}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if not side.started:
                    log.error("the second listener did not start (server.restPort)")
                    self.should_exit = True
                    return
                listening = [s for server in side.servers for s in server.sockets]
                urls.append(bound_url(listening, second is not None and second[1] is not None))
            if self.started and on_started is not None:
                listening = [s for server in self.servers for s in server.sockets]
                on_started(" ".join([bound_url(listening, tls is not None), *urls]))

        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            if side is not None and self.side_task is not None:
                side.should_exit = True
                await self.side_task
            await super().shutdown(sockets)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                yield
                # uvicorn re-raises the SIGTERM it handled once it has shut down, which kills
                # the process with 143: the drain finished, so exit cleanly (0) instead.
                self._captured_signals.clear()

    server = _Server(uvicorn_config(app, tls, **kwargs))
    server.run()
    started: bool = server.started
    return started
