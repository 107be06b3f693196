"""The background work of the kube layer in one object the app lifespan starts and stops:
the pod and node reflectors feeding the cache, readiness, and the leader election; the namespace
reflector too, but only once some queue has a ``namespaceSelector`` (``watch_namespaces``): a
deployment without selectors neither needs nor uses access to namespaces."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable

from app.config.kubernetes import KubernetesConfig
from app.kube.client import KubeClient
from app.kube.leader import LeaderElector, lease_namespace
from app.kube.reflector import Reflector, Store
from app.kube.resources import NAMESPACES, NODES, PODS
from app.logs import get_logger
from app.model import Pod
from app.model.namespace import Namespace
from app.model.node import Node
from app.supervise import supervise, wait_within

log = get_logger("kube.sync")


class ClusterSync:
    """Reflectors for pods and nodes, plus (optionally) the leader elector."""

    def __init__(
        self,
        client: KubeClient,
        pods: Store[Pod],
        nodes: Store[Node],
        config: KubernetesConfig,
        *,
        namespaces: Store[Namespace] | None = None,
        on_synced: Callable[[], None] | None = None,
        advertise: str | None = None,
        advertise_rest: str | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.on_synced = on_synced
        watch_timeout = int(config.watch_timeout)
        self.pods: Reflector[Pod] = Reflector(
            client,
            PODS,
            Pod,
            pods,
            page_size=config.page_size,
            watch_timeout=watch_timeout,
            batch_window=config.watch_batch_window,
        )
        self.nodes: Reflector[Node] = Reflector(
            client,
            NODES,
            Node,
            nodes,
            page_size=config.page_size,
            watch_timeout=watch_timeout,
            batch_window=config.watch_batch_window,
        )
        self.namespaces: Reflector[Namespace] | None = (
            Reflector(
                client,
                NAMESPACES,
                Namespace,
                namespaces,
                page_size=config.page_size,
                watch_timeout=watch_timeout,
            )
            if namespaces is not None
            else None
        )
        """The namespaces' labels (a queue's ``namespaceSelector``): run by
        ``watch_namespaces``."""
        self._namespace_task: asyncio.Task[None] | None = None
        self._started = False
        self._namespaces_wanted = False
        le = config.leader_election
        self.leader: LeaderElector | None = None
        if le.enable:
            self.leader = LeaderElector(
                client,
                namespace=lease_namespace(le.lease_namespace, client.access.namespace),
                name=le.lease_name,
                identity=config.identity,
                lease_duration=le.lease_duration,
                renew_deadline=le.renew_deadline,
                retry_period=le.retry_period,
                advertise=advertise,
                advertise_rest=advertise_rest,
            )
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the reflectors, the readiness watcher and the leader election."""
        self._tasks = [
            asyncio.create_task(supervise("reflector-pods", self.pods.run), name="reflector-pods"),
            asyncio.create_task(
                supervise("reflector-nodes", self.nodes.run), name="reflector-nodes"
            ),
            asyncio.create_task(self._wait_synced(), name="cache-synced"),
        ]
        if self.leader is not None:
            self._tasks.append(
                asyncio.create_task(
                    supervise("leader-election", self.leader.run), name="leader-election"
                )
            )
        self._started = True
        if self._namespaces_wanted:
            self.watch_namespaces()
        log.info(
            "watching pods and nodes",
            api_server=self.client.access.host,
            source=self.client.access.source,
            leader_election=self.leader is not None,
        )

    def watch_namespaces(self) -> bool:
        """Start the namespace reflector (once; after ``start``, or as ``start`` runs when asked
        before). False when this sync has no namespace store."""
        if self.namespaces is None:
            return False
        self._namespaces_wanted = True
        if self._started and self._namespace_task is None:
            reflector = self.namespaces
            self._namespace_task = asyncio.create_task(
                supervise("reflector-namespaces", reflector.run), name="reflector-namespaces"
            )
            log.info("watching namespaces (a queue has a namespaceSelector)")
        return True

    @property
    def watching_namespaces(self) -> bool:
        """Whether the namespace reflector runs."""
        return self._namespace_task is not None

    async def namespaces_synced(self, within: float) -> bool:
        """Wait (bounded) for the first LIST of namespaces; True at once when not watching."""
        if self.namespaces is None or self._namespace_task is None:
            return True
        return await wait_within(self.namespaces.synced.wait(), within)

    def feeding(self, threshold: float) -> bool:
        """Whether the caches are being fed: the pod and node (and, when watched, namespace)
        reflector tasks run and none has been failing for longer than ``threshold`` seconds
        (``/readyz``)."""
        alive = all(not t.done() for t in self._tasks[:2])
        reflectors: list[Reflector[Pod] | Reflector[Node] | Reflector[Namespace]]
        reflectors = [self.pods, self.nodes]
        if self._namespace_task is not None and self.namespaces is not None:
            alive = alive and not self._namespace_task.done()
            reflectors.append(self.namespaces)
        return alive and not any(r.starving(threshold) for r in reflectors)

    async def _wait_synced(self) -> None:
        await self.pods.synced.wait()
        await self.nodes.synced.wait()
        log.info("caches synced")
        # The listed cache is millions of long-lived objects: keep them out of the cyclic GC's
        # scans, whose full passes would otherwise pause the extender verbs for 100s of ms.
        gc.collect()
        gc.freeze()
        if self.on_synced is not None:
            self.on_synced()

    async def stop(self) -> None:
        """Stop everything (the leader releases its Lease first) and close the client."""
        if self._namespace_task is not None:
            self._tasks.insert(0, self._namespace_task)  # the leader's Lease still goes first
            self._namespace_task = None
        for task in reversed(self._tasks):
            task.cancel()
        for task in reversed(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._started = False
        await self.client.aclose()
