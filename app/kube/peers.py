"""A follower's calls to the leader: kube-scheduler's ``preempt`` calls, forwarded (DESIGN §7).

Only the leader decides preemptions: a follower's picture of the claims and reserved victims
trails the leader's by its watch. kube-scheduler's connection reaches whichever replica the
Service chose, so a follower relays ``preempt`` to the leader's address on the Lease
(``app.kube.leader.ADVERTISE_ANNOTATION``) and answers with the leader's reply. When that fails
(no leader, unreachable, too slow) the follower answers ``{}`` itself and kube-scheduler retries
the pod later.

TLS: the leader is reached by its pod IP while its certificate names the Service, so the chain
is verified against ``leaderElection.forwardCAFile`` (else ``server.tls.clientCAFile``) without a
host name check; the follower presents
its own serving certificate as its client certificate (the chart's certificates allow client
authentication). The identity of the leader is the Lease only runway's ServiceAccount writes,
plus a certificate of runway's CA. The files are re-read when they change (rotation).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

import httpx

from app import metrics
from app.config.security import TLSConfig
from app.logs import get_logger
from app.tls import file_stamp
from app.wire.forwarding import FORWARDED_HEADER

log = get_logger("kube.peers")

_Stamp = tuple[tuple[int, int, int] | None, ...]


class LeaderForwarder:
    """Relays a verb call to the leader; ``forward`` returns its reply, or None."""

    def __init__(
        self,
        leader_url: Callable[[], str | None],
        tls: TLSConfig,
        *,
        ca_file: str | None = None,
        identity: str,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._leader_url = leader_url
        self._tls = tls
        self._ca_file = ca_file or tls.client_ca_file
        self._identity = identity
        self._timeout = timeout
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._retired: list[httpx.AsyncClient] = []
        self._stamp: _Stamp | None = None
        self._warned = False
        self.usable = not tls.enabled or self._ca_file is not None
        """False when this replica serves HTTPS with no CA to verify the leader's certificate
        by: it never forwards then (said once in the log)."""

    def leader_known(self) -> bool:
        """Whether a call would be forwarded now (a leader other than this replica advertises
        an address, and this replica can reach it)."""
        return self.usable and self._leader_url() is not None

    async def forward(self, verb: str, body: bytes) -> bytes | None:
        """POST ``body`` to the leader's ``verb``; its 200 reply, or None (counted)."""
        url = self._leader_url()
        if url is None or not self.usable:
            self._warn_unusable()
            return None
        try:
            client = self._current_client()
            headers = {"content-type": "application/json", FORWARDED_HEADER: self._identity}
            # The whole of it, retry included, within forwardTimeout: kube-scheduler waits for
            # this answer no longer than its httpTimeout, and an extender call that fails is
            # skipped when the stanza says ignorable — kube-scheduler then preempts without
            # runway, its own victims, runway's pods among them (httpx's timeout is per phase).
            async with asyncio.timeout(self._timeout):
                try:
                    response = await client.post(f"{url}/{verb}", content=body, headers=headers)
                except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
                    # Once more on a fresh connection: a pooled one the leader had just closed,
                    # or a refused connect. Safe: a preemption decided is not decided twice.
                    log.info(
                        "forwarding again after a connection error", leader=url, error=str(exc)
                    )
                    response = await client.post(f"{url}/{verb}", content=body, headers=headers)
        except (httpx.TimeoutException, TimeoutError):
            metrics.PREEMPT_FORWARDED.labels("timeout").inc()
            log.warning("leader did not answer a forwarded call in time", verb=verb, leader=url)
            return None
        except (httpx.HTTPError, OSError, ssl.SSLError) as exc:
            metrics.PREEMPT_FORWARDED.labels("error").inc()
            log.warning("could not forward to the leader", verb=verb, leader=url, error=str(exc))
            return None
        if response.status_code != 200:
            metrics.PREEMPT_FORWARDED.labels("error").inc()
            log.warning(
                "leader refused a forwarded call",
                verb=verb,
                leader=url,
                status=response.status_code,
                body=response.text[:200],
            )
            return None
        metrics.PREEMPT_FORWARDED.labels("ok").inc()
        return response.content

    async def aclose(self) -> None:
        """Close the connection pool."""
        clients, self._retired = [*self._retired, self._client], []
        self._client = None
        for client in clients:
            if client is not None:
                await client.aclose()

    def _warn_unusable(self) -> None:
        if not self.usable and not self._warned:
            self._warned = True
            log.warning(
                "preempt calls are not forwarded to the leader: this replica serves HTTPS "
                "without kubernetes.leaderElection.forwardCAFile or server.tls.clientCAFile, so "
                "it cannot verify the leader's certificate"
            )

    def _current_client(self) -> httpx.AsyncClient:
        """The client, rebuilt when the certificate files changed (a rotation)."""
        tls = self._tls
        files = (tls.cert_file, tls.key_file, self._ca_file) if tls.enabled else ()
        stamp = tuple(file_stamp(f) for f in files)
        if self._client is None or stamp != self._stamp:
            if self._client is not None:
                # Kept until ``aclose``: a call may be in flight on it (rotations are rare).
                self._retired.append(self._client)
            verify: ssl.SSLContext | bool = True
            if tls.enabled:
                context = ssl.create_default_context(cafile=self._ca_file)
                context.check_hostname = (
                    False  # reached by pod IP; the certificate names the Service
                )
                if tls.cert_file is not None:
                    context.load_cert_chain(tls.cert_file, tls.key_file)
                verify = context
            self._client = httpx.AsyncClient(
                verify=verify,
                timeout=httpx.Timeout(self._timeout),
                transport=self._transport,
                trust_env=False,
            )
            self._stamp = stamp
        return self._client
