"""A follower's calls to the leader: kube-scheduler's ``preempt`` calls and the REST reads of
what only the leader holds, forwarded (DESIGN §7).

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

REST reads (``LeaderReader``): the same path and query are asked of the leader's REST address on
the Lease (``app.kube.leader.ADVERTISE_REST_ANNOTATION``) with the caller's credentials and
nothing of the follower's: the leader authorises the caller as it would directly. The follower
presents its certificate only when the REST API shares the verbs' port (no ``server.restPort``),
whose ``requireClientCert`` may ask for one to connect at all; runway's REST authorisation reads
bearer tokens only, never a certificate, so it widens nothing.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping

import httpx

from app import metrics
from app.config.security import TLSConfig
from app.logs import get_logger
from app.tls import file_stamp
from app.wire.forwarding import FORWARDED_HEADER, RELAYED_REPLY_HEADERS, LeaderReply

log = get_logger("kube.peers")

_Stamp = tuple[tuple[int, int, int] | None, ...]


class _PeerClient:
    """The HTTPS (or HTTP) client to another replica: the peer's chain verified against
    ``ca_file`` without a host name check; this replica's certificate presented when
    ``present_certificate``; rebuilt when the files change (a rotation)."""

    def __init__(
        self,
        tls: TLSConfig,
        ca_file: str | None,
        timeout: float,
        transport: httpx.AsyncBaseTransport | None,
        *,
        present_certificate: bool,
    ) -> None:
        self._tls = tls
        self._ca_file = ca_file or tls.client_ca_file
        self._timeout = timeout
        self._transport = transport
        self._present = present_certificate
        self._client: httpx.AsyncClient | None = None
        self._retired: list[httpx.AsyncClient] = []
        self._stamp: _Stamp | None = None
        self.usable = not tls.enabled or self._ca_file is not None
        """False when this replica serves HTTPS with no CA to verify the leader's certificate
        by: it never forwards then."""

    def current(self) -> httpx.AsyncClient:
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
                if self._present and tls.cert_file is not None:
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

    async def aclose(self) -> None:
        """Close the connection pools."""
        clients, self._retired = [*self._retired, self._client], []
        self._client = None
        for client in clients:
            if client is not None:
                await client.aclose()


_UNVERIFIABLE = (
    "this replica serves HTTPS without kubernetes.leaderElection.forwardCAFile or "
    "server.tls.clientCAFile, so it cannot verify the leader's certificate"
)


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
        self._identity = identity
        self._timeout = timeout
        self._peer = _PeerClient(tls, ca_file, timeout, transport, present_certificate=True)
        self._warned = False
        self.usable = self._peer.usable
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
        await self._peer.aclose()

    def _warn_unusable(self) -> None:
        if not self.usable and not self._warned:
            self._warned = True
            log.warning(f"preempt calls are not forwarded to the leader: {_UNVERIFIABLE}")

    def _current_client(self) -> httpx.AsyncClient:
        return self._peer.current()


CREDENTIAL_HEADERS = ("authorization", "x-runway-authorization")
"""The caller's credentials, passed to the leader as they came (``app.api.auth`` reads the token
from either): the leader authorises the caller exactly as it would directly."""


class LeaderReader:
    """A follower's REST read of what only the leader holds, asked of the leader; ``read``
    returns the leader's answer or why there is none (the follower then answers itself)."""

    def __init__(
        self,
        leader_known: Callable[[], bool],
        leader_url: Callable[[], str | None],
        tls: TLSConfig,
        *,
        ca_file: str | None = None,
        identity: str,
        timeout: float,
        present_certificate: bool,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._leader_known = leader_known
        self._leader_url = leader_url
        self._identity = identity
        self._timeout = timeout
        self._peer = _PeerClient(
            tls, ca_file, timeout, transport, present_certificate=present_certificate
        )
        self._warned = False

    async def read(self, target: str, credentials: Mapping[str, str]) -> LeaderReply | str:
        """``GET target`` (path and query, as the caller sent them) from the leader's REST
        address, with the caller's ``credentials`` (``CREDENTIAL_HEADERS``; nothing of this
        replica's but the forwarded mark). The leader's answer below 500 (a refusal included:
        relayed as it is), else why there is none: ``no leader``, ``leader's REST address
        unknown``, ``leader not verifiable``, ``leader unreachable`` or ``leader failed``."""
        if not self._leader_known():
            metrics.READS_FORWARDED.labels("unknown").inc()
            return "no leader"
        url = self._leader_url()
        if url is None:  # a leader of an earlier release, or one with no address of its own
            metrics.READS_FORWARDED.labels("unknown").inc()
            return "leader's REST address unknown"
        if not self._peer.usable:
            if not self._warned:
                self._warned = True
                log.warning(f"REST reads are not forwarded to the leader: {_UNVERIFIABLE}")
            metrics.READS_FORWARDED.labels("unknown").inc()
            return "leader not verifiable"
        headers = {
            "accept": "application/json",
            FORWARDED_HEADER: self._identity,
            **{k: v for k in CREDENTIAL_HEADERS if (v := credentials.get(k)) is not None},
        }
        try:
            client = self._peer.current()
            async with asyncio.timeout(self._timeout):  # the whole of it, retry included
                try:
                    response = await client.get(f"{url}{target}", headers=headers)
                except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
                    # Once more on a fresh connection (a pooled one the leader had just closed):
                    # a read changes nothing.
                    log.info("reading again after a connection error", leader=url, error=str(exc))
                    response = await client.get(f"{url}{target}", headers=headers)
        except (httpx.TimeoutException, TimeoutError):
            metrics.READS_FORWARDED.labels("timeout").inc()
            log.warning("leader did not answer a forwarded read in time", leader=url)
            return "leader unreachable"
        except (httpx.HTTPError, OSError, ssl.SSLError) as exc:
            metrics.READS_FORWARDED.labels("error").inc()
            log.warning("could not forward a read to the leader", leader=url, error=str(exc))
            return "leader unreachable"
        if response.status_code >= 500:
            metrics.READS_FORWARDED.labels("error").inc()
            log.warning(
                "leader failed a forwarded read",
                leader=url,
                status=response.status_code,
                body=response.text[:200],
            )
            return "leader failed"
        metrics.READS_FORWARDED.labels("ok").inc()
        relayed = {k: v for k in RELAYED_REPLY_HEADERS if (v := response.headers.get(k))}
        return LeaderReply(response.status_code, response.content, relayed)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._peer.aclose()
