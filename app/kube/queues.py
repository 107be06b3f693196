"""The queue tree from KAI-Scheduler's ``Queue`` objects (``queueSource: kai | auto``).

``KaiQueueSource`` lists and watches ``queues.scheduling.run.ai`` (v2) through the shared
``Reflector``; after every change it rebuilds the tree with the file's validation
(``app.config.kai``) and hands it to ``on_tree`` (wiring swaps it into the live tree in one step).
An invalid change — a bad duration, an unknown parent, a cycle — keeps the last good tree: it is
logged with the same error lines as the file's and counted
(``runway_queue_tree_updates_total{result="invalid"}``). With ``auto``, discovery decides: no
such kind on the API server means the file's tree stays.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from app import metrics
from app.config.kai import (
    KAI_QUEUE_API_VERSION,
    NAMESPACE_SELECTOR_ANNOTATION,
    NAMESPACES_ANNOTATION,
    origin,
    queues_from_kai,
)
from app.config.loader import ConfigError
from app.kube.client import KubeClient
from app.kube.discovery import Discovery, UnknownKind
from app.kube.errors import KubeError, NotFound
from app.kube.reflector import Reflector
from app.logs import get_logger
from app.policy.queues import QueueTree
from app.supervise import stop_task, wait_within

log = get_logger("kube.queues")

KAI_QUEUE_KIND = "Queue"
READ_ANNOTATIONS = frozenset((NAMESPACES_ANNOTATION, NAMESPACE_SELECTOR_ANNOTATION))


class KaiQueueMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata`` of a Queue, as far as runway cares."""

    name: str = ""
    uid: str = ""
    resourceVersion: str = ""
    annotations: dict[str, str] | None = None
    """runway's own (``runway.dev/namespaces``, ``runway.dev/namespace-selector``) are read by
    ``app.config.kai``; the others are dropped by ``_QueueStore``."""


class KaiQueue(msgspec.Struct, frozen=True, omit_defaults=True):
    """A KAI Queue reduced to its name and spec (the spec is read by ``app.config.kai``)."""

    metadata: KaiQueueMeta = KaiQueueMeta()
    spec: dict[str, Any] | None = None


def _lean(queue: KaiQueue) -> KaiQueue:
    """``queue`` with runway's annotations only (kubectl's last-applied copy and the like are
    neither read nor kept)."""
    annotations = queue.metadata.annotations
    if not annotations:
        return queue
    ours = {k: v for k, v in annotations.items() if k in READ_ANNOTATIONS} or None
    return msgspec.structs.replace(
        queue, metadata=msgspec.structs.replace(queue.metadata, annotations=ours)
    )


class _QueueStore:
    """The reflector's store: every Queue by name; any change rebuilds the tree."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self.objects: dict[str, KaiQueue] = {}
        self.on_change = on_change

    def replace(self, items: Sequence[KaiQueue]) -> None:
        self.objects = {q.metadata.name: _lean(q) for q in items}
        self.on_change()

    def upsert(self, obj: KaiQueue) -> None:
        obj = _lean(obj)
        if self.objects.get(obj.metadata.name) != obj:
            self.objects[obj.metadata.name] = obj
            self.on_change()

    def delete(self, obj: KaiQueue) -> None:
        if self.objects.pop(obj.metadata.name, None) is not None:
            self.on_change()


class KaiQueueSource:
    """List + watch of KAI Queue objects into the queue tree."""

    def __init__(
        self,
        client: KubeClient,
        on_tree: Callable[[QueueTree], None],
        *,
        mode: str = "kai",
        discovery: Discovery | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
    ) -> None:
        self.client = client
        self.on_tree = on_tree
        self.mode = mode
        self.discovery = discovery or Discovery(client)
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.store = _QueueStore(self._rebuild)
        self.reflector: Reflector[KaiQueue] | None = None
        self.active = False
        """True once the tree comes from the cluster (``auto``: when the kind exists)."""
        self.error: str | None = None
        """Why the last change was refused (the tree in use is the last good one); None: fine."""
        self.synced = asyncio.Event()
        """Set once the tree is known: the first LIST applied, or ``auto`` fell back to the file."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Discover the kind and watch it, in the background (``wait_synced`` bounds the wait)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kai-queues")

    async def _run(self) -> None:
        delay = 1.0
        while True:
            try:
                resource = await self.discovery.resource_for(KAI_QUEUE_API_VERSION, KAI_QUEUE_KIND)
                break
            except (NotFound, UnknownKind) as exc:
                if self.mode == "auto":
                    log.info("no KAI Queue kind on the API server: queues from the file")
                    self.synced.set()
                    return
                log.warning("KAI Queue kind not served (yet); retrying", error=str(exc))
            except KubeError as exc:
                log.warning("discovery of the KAI Queue kind failed; retrying", error=str(exc))
            await asyncio.sleep(delay)  # backoff between discovery attempts
            delay = min(delay * 2, 60.0)
        self.active = True
        self.reflector = Reflector(
            self.client,
            resource,
            KaiQueue,
            self.store,
            page_size=self.page_size,
            watch_timeout=self.watch_timeout,
        )
        log.info("queues from KAI Queue objects", resource=resource.path())
        await self.reflector.run()

    async def wait_synced(self, within: float) -> bool:
        """Wait (bounded) until the tree is known; True when it is."""
        return await wait_within(self.synced.wait(), within)

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        await stop_task(task)

    def _rebuild(self) -> None:
        objects = [msgspec.to_builtins(q) for q in self.store.objects.values()]
        try:
            queues = queues_from_kai(objects)
        except ConfigError as exc:
            self.error = str(exc)
            metrics.QUEUE_TREE_UPDATES.labels("invalid").inc()
            log.warning("Queue objects refused: keeping the last good queue tree", error=str(exc))
            self.synced.set()
            return
        self.error = None
        self.on_tree(QueueTree.from_config(queues, origin=origin))
        metrics.QUEUE_TREE_UPDATES.labels("applied").inc()
        log.info("queue tree rebuilt from Queue objects", queues=len(queues))
        self.synced.set()
