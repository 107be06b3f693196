"""The background work of the kube layer in one object the app lifespan starts and stops:
the pod and node reflectors feeding the cache, readiness, and the leader election."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable

from app.config.kubernetes import KubernetesConfig
from app.kube.client import KubeClient
from app.kube.leader import LeaderElector, lease_namespace
from app.kube.reflector import Reflector, Store
from app.kube.resources import NODES, PODS
from app.logs import get_logger
from app.model import Pod
from app.model.node import Node
from app.supervise import supervise

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
        on_synced: Callable[[], None] | None = None,
        advertise: str | None = None,
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
        log.info(
            "watching pods and nodes",
            api_server=self.client.access.host,
            source=self.client.access.source,
            leader_election=self.leader is not None,
        )

    def feeding(self, threshold: float) -> bool:
        """Whether the pod and node caches are being fed: their reflector tasks run and neither
        has been failing for longer than ``threshold`` seconds (``/readyz``)."""
        alive = all(not t.done() for t in self._tasks[:2])
        return alive and not (self.pods.starving(threshold) or self.nodes.starving(threshold))

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
        for task in reversed(self._tasks):
            task.cancel()
        for task in reversed(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.client.aclose()
