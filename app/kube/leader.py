"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way client-go does it.

Every ``retry_period`` a replica reads the Lease. It takes it when nobody holds it, when it is
its own, or when the holder has not renewed it for ``leaseDurationSeconds`` *as observed
locally* (the time we last saw the record change, on our monotonic clock: wall clocks of
replicas may disagree). Writes are compare-and-swap on resourceVersion, so two replicas racing
for an expired lease cannot both win. A leader that cannot renew for ``renew_deadline`` (shorter
than the lease duration) steps down before anyone else may take over. On clean shutdown the
lease is released (empty holder, 1 s duration) so the next replica takes over at once.

The leader also writes where it answers the extender verbs on the Lease (``ADVERTISE_ANNOTATION``,
when it has an address): a follower forwards kube-scheduler's ``preempt`` calls there
(``app.kube.peers``), as only the leader decides preemptions. And where it answers the REST API
(``ADVERTISE_REST_ANNOTATION``): a follower forwards the reads of what only the leader holds
there (its preemptions, decisions and gate).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from app import metrics
from app.kube.client import KubeClient
from app.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from app.kube.objects import Lease, LeaseMeta, LeaseSpec
from app.kube.resources import LEASES
from app.logs import get_logger

log = get_logger("kube.leader")

ADVERTISE_ANNOTATION = "runway.dev/leader-url"
"""On the Lease: the holder's extender URL prefix (``https://10.1.2.3:8888/scheduler``)."""
ADVERTISE_REST_ANNOTATION = "runway.dev/leader-rest-url"
"""On the Lease: the holder's REST base URL (``https://10.1.2.3:8889``: ``server.restPort``)."""
MAX_URL = 512


def default_identity() -> str:
    """``<hostname>_<random>``: unique per process even when two share a host."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


def micro_time(seconds: float) -> str:
    """A ``metav1.MicroTime`` string."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for one Lease. ``is_leader`` / ``leading`` tell the rest of runway."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        advertise: str | None = None,
        advertise_rest: str | None = None,
    ) -> None:
        self.client = client
        self.advertise = advertise
        """This replica's extender URL prefix, written on the Lease while it leads."""
        self.advertise_rest = advertise_rest
        """This replica's REST base URL, written on the Lease while it leads."""
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.wall = wall
        self.monotonic = monotonic
        self.leading = asyncio.Event()
        """Set while this replica leads."""
        self._callbacks: list[Callable[[bool], None]] = []
        self._observed: LeaseSpec | None = None
        self._observed_at = 0.0
        self._holder_urls: dict[str, str] = {}
        """The holder's advertised URLs by annotation (as last read, checked)."""
        self._lease: Lease | None = None
        self._rng = random.Random()

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the Lease."""
        return self.leading.is_set()

    @property
    def leader_url(self) -> str | None:
        """Another replica's extender URL prefix while it holds the Lease (as last read, and
        not expired as observed here); None when this replica leads, nobody does, or the holder
        advertised none."""
        return self._holder_url(ADVERTISE_ANNOTATION)

    @property
    def leader_rest_url(self) -> str | None:
        """Another replica's REST base URL while it holds the Lease, as ``leader_url``."""
        return self._holder_url(ADVERTISE_REST_ANNOTATION)

    def leader_known(self) -> bool:
        """Whether another replica holds the Lease now (as last read, not expired as observed
        here), whatever it advertises."""
        spec = self._observed
        if self.is_leader or spec is None:
            return False
        holder = spec.holderIdentity or ""
        if not holder or holder == self.identity:
            return False
        duration = spec.leaseDurationSeconds or _seconds(self.lease_duration)
        return self._observed_at + duration > self.monotonic()

    def _holder_url(self, annotation: str) -> str | None:
        url = self._holder_urls.get(annotation)
        return url if url is not None and self.leader_known() else None

    def on_change(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(is_leader)`` on every gain or loss of leadership."""
        self._callbacks.append(callback)

    def _set_leading(self, leading: bool) -> None:
        if leading == self.is_leader:
            return
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        metrics.LEADER.set(1 if leading else 0)
        log.info(
            "became leader" if leading else "stopped leading",
            lease=f"{self.namespace}/{self.name}",
            identity=self.identity,
        )
        for callback in tuple(self._callbacks):
            try:
                callback(leading)
            except Exception:
                log.exception("leader callback failed")

    # -- the campaign ----------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, renew, and re-campaign after a loss, until cancelled (then release)."""
        try:
            while True:
                await self._acquire()
                await self._renew()
        finally:
            if self.is_leader:
                self._set_leading(False)
                # Shield: shutdown cancels us, but the release is what makes hand-over fast.
                await asyncio.shield(self._release())

    async def _acquire(self) -> None:
        while True:
            if await self._attempt(self.retry_period):
                self._set_leading(True)
                return
            await asyncio.sleep(self.retry_period * (1 + 0.2 * self._rng.random()))

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.retry_period)
            deadline = self.monotonic() + self.renew_deadline
            renewed = False
            while (remaining := deadline - self.monotonic()) > 0:
                if await self._attempt(remaining):
                    renewed = True
                    break
                await asyncio.sleep(min(self.retry_period, max(deadline - self.monotonic(), 0)))
            if not renewed:
                log.warning("could not renew the lease in time", deadline=self.renew_deadline)
                self._set_leading(False)
                return

    async def _attempt(self, budget: float) -> bool:
        try:
            async with asyncio.timeout(budget):
                return await self._try_acquire_or_renew()
        except TimeoutError:
            log.warning("lease call timed out", lease=f"{self.namespace}/{self.name}")
        except (Conflict, AlreadyExists):
            log.debug("lost a race for the lease")
        except KubeError as exc:
            log.warning("lease call failed", error=str(exc))
        return False

    async def _try_acquire_or_renew(self) -> bool:
        now = self.wall()
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace, into=Lease)
        except NotFound:
            lease = Lease(
                metadata=LeaseMeta(
                    name=self.name, namespace=self.namespace, annotations=self._annotations(None)
                ),
                spec=LeaseSpec(
                    holderIdentity=self.identity,
                    leaseDurationSeconds=_seconds(self.lease_duration),
                    acquireTime=micro_time(now),
                    renewTime=micro_time(now),
                    leaseTransitions=0,
                ),
            )
            self._lease = await self.client.create(LEASES, lease, self.namespace, into=Lease)
            self._observe(self._lease)
            return True
        self._observe(lease)
        spec = lease.spec
        holder = spec.holderIdentity or ""
        if holder and holder != self.identity:
            duration = spec.leaseDurationSeconds or _seconds(self.lease_duration)
            if self._observed_at + duration > self.monotonic():
                return False  # held by another replica that renewed recently
        if holder != self.identity:
            spec.acquireTime = micro_time(now)
            spec.leaseTransitions = (spec.leaseTransitions or 0) + 1
        spec.holderIdentity = self.identity
        spec.leaseDurationSeconds = _seconds(self.lease_duration)
        spec.renewTime = micro_time(now)
        lease.metadata.annotations = self._annotations(lease.metadata.annotations)
        self._lease = await self.client.replace(
            LEASES, self.name, lease, self.namespace, into=Lease
        )
        self._observe(self._lease)
        return True

    def _annotations(self, current: dict[str, str] | None) -> dict[str, str] | None:
        """The Lease's annotations with this replica's URLs (or none) as the holder's."""
        mine = {
            ADVERTISE_ANNOTATION: self.advertise,
            ADVERTISE_REST_ANNOTATION: self.advertise_rest,
        }
        out = {k: v for k, v in (current or {}).items() if k not in mine}
        out.update({k: v for k, v in mine.items() if v})
        return out or None

    def _observe(self, lease: Lease) -> None:
        spec = lease.spec
        if spec != self._observed:
            self._observed = LeaseSpec(**{f: getattr(spec, f) for f in spec.__struct_fields__})
            self._observed_at = self.monotonic()
        annotations = lease.metadata.annotations or {}
        urls = {}
        for annotation in (ADVERTISE_ANNOTATION, ADVERTISE_REST_ANNOTATION):
            url = annotations.get(annotation, "")
            # Written by runway's replicas only (runway's namespace); still checked before use.
            if url.startswith(("http://", "https://")) and len(url) <= MAX_URL:
                urls[annotation] = url.rstrip("/")
        self._holder_urls = urls

    async def _release(self) -> None:
        """Give the lease up (empty holder, 1 s duration) if we still hold it."""
        try:
            async with asyncio.timeout(self.retry_period * 2):
                lease = await self.client.get(LEASES, self.name, self.namespace, into=Lease)
                if lease.spec.holderIdentity != self.identity:
                    return
                lease.spec.holderIdentity = None
                lease.spec.leaseDurationSeconds = 1
                lease.spec.renewTime = micro_time(self.wall())
                await self.client.replace(LEASES, self.name, lease, self.namespace, into=Lease)
                log.info("released the lease", lease=f"{self.namespace}/{self.name}")
        except (TimeoutError, KubeError) as exc:
            log.warning(
                "could not release the lease; others take over when it expires", error=str(exc)
            )


def _seconds(value: float) -> int:
    return max(1, round(value))


def own_namespace(in_cluster_namespace: str | None) -> str | None:
    """runway's own namespace: the pod's (``POD_NAMESPACE``, else the in-cluster service
    account's); None outside a pod."""
    return os.environ.get("POD_NAMESPACE") or in_cluster_namespace or None


def lease_namespace(configured: str | None, in_cluster_namespace: str | None) -> str:
    """The Lease's namespace: configured, else the pod's (``POD_NAMESPACE`` or the service
    account's), else ``default``."""
    return configured or os.environ.get("POD_NAMESPACE") or in_cluster_namespace or "default"
