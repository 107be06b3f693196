"""runway's view of the cluster: pods and nodes fed by the reflectors, indexed for the verbs.

Everything here is synchronous and in memory: the extender verbs read it on the hot path without
awaiting. Writers are the reflectors (one event at a time, on the event loop), so no locking.

Indexes: pod by UID and by ``namespace/name``; pods by node, by workload (``workload_of``), by
leaf queue (``queue_of``); pending (no node) vs bound, and the pending pods nominated to each
node (a count); nodes by name; each namespace's labels (watched only while a queue has a
``namespaceSelector``: a pod's queue may depend on them, so a namespace whose labels change has
its pods' queues indexed again). Per workload, minAvailable
and PodsReady are derived from its pods and memoised until one of them changes (its life facts —
created, admitted, started — are ``RecordBook.life``'s: they must outlive the pods).
Subscribers are called after every change (gate opening, PodsReady tracking...).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

import msgspec

from app import metrics
from app.logs import get_logger
from app.model import Pod
from app.model.namespace import Namespace
from app.model.node import Node
from app.policy.queues import QueueTree
from app.policy.scope import Scope, namespace_queue, unmanaged
from app.policy.selectors import MAX_LABELS
from app.policy.workload import (
    DEFAULT_QUEUE,
    EMPTY,
    WorkloadKey,
    members,
    min_available,
    pods_ready,
    queue_denied,
    queue_of,
    requested_queue,
    workload_of,
)
from app.state.compact import Compactor
from app.state.validation import InvalidObjects
from app.supervise import run_through

log = get_logger("state.cache")

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
ObjT = TypeVar("ObjT", Pod, Node)


@dataclass(frozen=True)
class CacheEvent(Generic[ObjT]):
    """One change of the cache: ``old`` is None when added, ``new`` is None when deleted."""

    kind: Literal["pod", "node"]
    type: EventType
    old: ObjT | None
    new: ObjT | None


Subscriber = Callable[[CacheEvent[Pod] | CacheEvent[Node]], None]


class PodFeed(Protocol):
    """The pod watch feeding the cache (``kube.reflector.Reflector``), as a verb may drive it:
    both apply, synchronously, the events that have arrived on its socket."""

    def hurry(self) -> None:
        """Apply what has arrived and end the batch window."""

    def catch_up(self) -> int:
        """Apply what has arrived (the batch window goes on); how many events."""


@dataclass(frozen=True)
class WorkloadView:
    """A workload as the cache sees it now (pods sorted by ``namespace/name``)."""

    key: WorkloadKey
    pods: tuple[Pod, ...]
    min_available: int
    pods_ready: bool
    """Ready + Succeeded members ≥ minAvailable of the members now: the pods' own view. PodsReady
    as the rules use it counts against the workload's size (``LifeFacts.pods_ready``: a failed
    pod not yet replaced does not shrink the target)."""

    @property
    def bound(self) -> int:
        """Pods with a node."""
        return sum(1 for p in self.pods if p.spec.nodeName)


def _older(new: Pod, old: Pod) -> bool:
    """Whether ``new`` is an older version of the pod than ``old``. resourceVersions are opaque
    by contract but etcd revisions in practice; anything unparsable is never called older."""
    a, b = new.metadata.resourceVersion, old.metadata.resourceVersion
    return a.isdigit() and b.isdigit() and len(a) <= 20 and len(b) <= 20 and int(a) < int(b)


def _only_version_changed(old: Pod, new: Pod) -> bool:
    """Whether ``new`` differs from the cached ``old`` in its resourceVersion only (as decoded:
    the fields runway reads)."""
    if old.spec != new.spec or old.status != new.status:
        return False
    meta = new.metadata
    return meta == msgspec.structs.replace(old.metadata, resourceVersion=meta.resourceVersion)


def _same_index_keys(old: Pod, new: Pod) -> bool:
    """Whether ``new`` is indexed exactly as ``old`` (node, workload and queue come from these
    fields only: namespace and name never change for a UID)."""
    return (
        old.spec.nodeName == new.spec.nodeName
        and old.metadata.labels == new.metadata.labels
        and old.metadata.ownerReferences == new.metadata.ownerReferences
    )


def _add(index: dict[str, set[str]] | dict[WorkloadKey, set[str]], key: object, uid: str) -> None:
    index.setdefault(key, set()).add(uid)  # type: ignore[arg-type]


def _remove(
    index: dict[str, set[str]] | dict[WorkloadKey, set[str]], key: object, uid: str
) -> None:
    members = index.get(key)  # type: ignore[call-overload]
    if members is not None:
        members.discard(uid)
        if not members:
            del index[key]  # type: ignore[arg-type]


REPLACE_STEP = 50
"""Pods a resync applies between two chances for the event loop to run (the reflector's
``supervise.in_slices`` lets it run every few milliseconds)."""

MAX_KEY, MAX_VALUE = 317, 63
"""The longest label key (253-character prefix, '/', 63-character name) and value the API
server accepts."""


def readable_labels(namespace: Namespace) -> Mapping[str, str] | None:
    """A namespace's labels as the cache keeps them: None (no selector matches) when they are
    more than ``MAX_LABELS`` or longer than the API server allows — hostile input is bounded,
    and refusing is the safe side."""
    labels = namespace.labels
    if len(labels) > MAX_LABELS or any(
        len(k) > MAX_KEY or len(v) > MAX_VALUE for k, v in labels.items()
    ):
        return None
    return labels


class ClusterCache:
    """Pods and nodes with their indexes. One per process, held by the ``Runtime``."""

    def __init__(
        self,
        queues: QueueTree | None,
        *,
        invalid: InvalidObjects,
        scope: Scope,
        keep_labels: Iterable[str] = (),
        compact: bool = True,
    ) -> None:
        self.scope = scope
        """Which pods runway manages (``policy.scope``): an unmanaged pod is cached (it holds
        room on its node) but belongs to no workload and no queue here."""
        self.queue_tree = queues
        """The queue tree whose namespace permissions decide a pod's queue (``queue_of``);
        None: the label alone. Call ``reindex_queues`` when the tree changes."""
        self.invalid = invalid
        """Counts and reports the pods' bad values (once per pod version)."""
        # Shares repeated strings/sub-objects between pods: ~1.3 KB instead of ~5 KB per pod.
        # keep_labels: pod labels a config rule reads besides READ_LABELS (the shield's)
        self._compactor = Compactor(keep_labels=keep_labels) if compact else None
        self._pods: dict[str, Pod] = {}
        self._uid_by_key: dict[str, str] = {}
        # uid -> (key, node, workload, queue) as indexed, so removal never needs the object.
        self._indexed: dict[str, tuple[str, str | None, WorkloadKey, str]] = {}
        self._by_node: dict[str, set[str]] = {}
        self._by_workload: dict[WorkloadKey, set[str]] = {}
        self._workload_keys: dict[WorkloadKey, WorkloadKey] = {}
        self._by_queue: dict[str, set[str]] = {}
        # Pods runway does not manage: uid -> why, and their would-be workloads.
        self._unmanaged: dict[str, str] = {}
        self._unmanaged_by_workload: dict[WorkloadKey, set[str]] = {}
        self._pending: set[str] = set()
        # Pending pods nominated to a node: uid -> node, and their count per node.
        self._nominee: dict[str, str] = {}
        self._nominated: dict[str, int] = {}
        self._workloads: dict[WorkloadKey, WorkloadView] = {}
        self._nodes: dict[str, Node] = {}
        self._namespaces: dict[str, tuple[str, Mapping[str, str] | None]] = {}
        """name -> (resourceVersion, labels; None: not readable) of the watched namespaces."""
        self._subscribers: list[Subscriber] = []
        self.queue_listeners: list[Callable[[], None]] = []
        """Called when pods changed queue without a pod event (a namespace's labels changed):
        the requeue memos (``RequeueMemos.bump_facts``)."""
        self._pods_gauge = metrics.CACHE_OBJECTS.labels("pods")
        self.feed: PodFeed | None = None
        """The pod watch (set by ``wiring``; None on the embedded default), which verbs drive:
        ``expect`` and ``refresh``."""
        self.pods_synced = False
        self.nodes_synced = False
        self.namespaces_synced = False

    # -- subscribers -----------------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` after every change; returns a function that unsubscribes."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _notify(self, event: CacheEvent[Pod] | CacheEvent[Node]) -> None:
        for callback in tuple(self._subscribers):
            try:
                callback(event)
            except Exception:  # a broken subscriber must not stop the reflector
                log.exception("cache subscriber failed", subscriber=repr(callback))

    # -- pods: reads -----------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """True once pods and nodes have been listed (``/readyz``)."""
        return self.pods_synced and self.nodes_synced

    def __len__(self) -> int:
        return len(self._pods)

    def pod(self, uid: str) -> Pod | None:
        """The pod with this UID."""
        return self._pods.get(uid)

    def expect(self, uid: str) -> Pod | None:
        """The pod with this UID, which a verb asks about: if it is not cached yet, its ADDED
        event may be waiting on the watch's socket (kube-scheduler asks about a pod within
        milliseconds of its creation, and a preemptor runway does not know is refused): the
        watch applies what has arrived first."""
        pod = self._pods.get(uid)
        if pod is None and self.feed is not None:
            self.feed.hurry()
            pod = self._pods.get(uid)
        return pod

    def refresh(self) -> bool:
        """Apply, now, the pod events that have arrived on the watch's socket (under load the
        watch reads in batches, ``kubernetes.watchBatchWindow``); whether anything changed.
        For a verb about to act on other pods' state: preempt, a filter rejection."""
        return self.feed is not None and self.feed.catch_up() > 0

    def pod_by_key(self, namespace: str, name: str) -> Pod | None:
        """The pod ``namespace/name``."""
        uid = self._uid_by_key.get(f"{namespace}/{name}")
        return self._pods.get(uid) if uid is not None else None

    def pods(self) -> Iterator[Pod]:
        """Every cached pod."""
        return iter(self._pods.values())

    def pods_on_node(self, node: str) -> list[Pod]:
        """Pods bound to ``node`` (terminating ones included: they still hold resources)."""
        return [self._pods[u] for u in self._by_node.get(node, ())]

    def pods_in_queue(self, queue: str) -> list[Pod]:
        """Pods whose leaf queue is ``queue``."""
        return [self._pods[u] for u in self._by_queue.get(queue, ())]

    def pending_pods(self) -> list[Pod]:
        """Pods with no node yet."""
        return [self._pods[u] for u in self._pending]

    def pending_in_queue(self, queue: str) -> list[Pod]:
        """Pods of leaf queue ``queue`` with no node yet, in ``pods_in_queue``'s order (a set
        lookup per pod of the queue: the bound ones are never fetched)."""
        pending = self._pending
        return [self._pods[u] for u in self._by_queue.get(queue, ()) if u in pending]

    def nominated_to(self, node: str) -> int:
        """How many pending pods have ``status.nominatedNodeName`` = ``node``."""
        return self._nominated.get(node, 0)

    def bound_count(self) -> int:
        """Pods with a node."""
        return len(self._pods) - len(self._pending)

    def queues(self) -> list[str]:
        """Leaf queues that have at least one pod."""
        return sorted(self._by_queue)

    def workload_keys(self) -> list[WorkloadKey]:
        """Every workload that has at least one pod."""
        return list(self._by_workload)

    def has_workload(self, key: WorkloadKey) -> bool:
        """Whether workload ``key`` has a pod in the cache (a set lookup)."""
        return key in self._by_workload

    def workload_count(self) -> int:
        """How many workloads have at least one pod."""
        return len(self._by_workload)

    def workload_key_of(self, uid: str) -> WorkloadKey | None:
        """The workload of the pod with this UID (as indexed)."""
        entry = self._indexed.get(uid)
        return entry[2] if entry else None

    def workload_pods(self, key: WorkloadKey) -> list[Pod]:
        """Pods of workload ``key``, sorted by name."""
        pods = [self._pods[u] for u in self._by_workload.get(key, ())]
        pods.sort(key=lambda p: p.metadata.name)
        return pods

    def pending_workload_pods(self, key: WorkloadKey) -> list[Pod]:
        """Pods of workload ``key`` with no node yet (in no particular order)."""
        pending = self._pending
        return [self._pods[u] for u in self._by_workload.get(key, ()) if u in pending]

    def workload(self, key: WorkloadKey) -> WorkloadView | None:
        """The workload with its derived start time and PodsReady (memoised until it changes)."""
        view = self._workloads.get(key)
        if view is not None:
            return view
        pods = self.workload_pods(key)
        if not pods:
            return None
        view = WorkloadView(
            key=key,
            pods=tuple(pods),
            min_available=min_available(members(pods)),
            pods_ready=pods_ready(pods),
        )
        self._workloads[key] = view
        return view

    def workload_of_pod(self, pod: Pod) -> WorkloadView | None:
        """The workload ``pod`` belongs to, as the cache sees it."""
        return self.workload(workload_of(pod))

    # -- pods: writes (the pod reflector) --------------------------------------------------

    def compact_pod(self, pod: Pod) -> Pod:
        """``pod`` made of parts shared with the cached pods (what ``upsert_pod`` stores)."""
        return self._compactor.pod(pod) if self._compactor is not None else pod

    def upsert_pod(self, pod: Pod, *, compacted: bool = False) -> None:
        """Add or update a pod (watch ADDED/MODIFIED). ``compacted``: already made of shared
        parts by ``compact_pod`` (skips doing it twice)."""
        uid = pod.metadata.uid
        old = self._pods.get(uid)
        if old is not None and (old == pod or _older(pod, old)):
            # A relist hands back what we have; or our own PATCH's answer (read after write)
            # arrives after the watch already brought a newer version: keep the newer one.
            return
        if old is not None and _only_version_changed(old, pod):
            # An update of fields runway does not read (container statuses, IPs, managed
            # fields...): keep the cached pod under its new version (so an older answer never
            # replaces it); nothing to index, nothing for the subscribers.
            version = pod.metadata.resourceVersion
            meta = msgspec.structs.replace(old.metadata, resourceVersion=version)
            self._pods[uid] = msgspec.structs.replace(old, metadata=meta)
            return
        if self._compactor is not None and not compacted:
            pod = self._compactor.pod(pod, old)
        self.invalid.check_pod(pod, old)
        if self.queue_tree is not None and (
            old is None or old.metadata.resourceVersion != pod.metadata.resourceVersion
        ):
            namespace = pod.metadata.namespace
            labels = self.namespace_labels(namespace)
            denied = queue_denied(
                pod, self.queue_tree, labels, namespace_queue(self.scope, namespace)
            )
            if denied is not None and not unmanaged(self.scope, pod, labels):
                metrics.QUEUE_DENIED.labels(metrics.queue_label(denied)).inc()
        self._pods[uid] = pod
        if old is not None and _same_index_keys(old, pod):
            # A status or annotation change: the indexes hold; only the workload view is stale.
            self._workloads.pop(self._indexed[uid][2], None)
            if old.status.nominatedNodeName != pod.status.nominatedNodeName:
                self._unnominate(uid)
                self._nominate(uid, pod)
        else:
            self._unindex(uid)
            self._index(uid, pod)
        if old is None:
            self._pods_gauge.set(len(self._pods))
        self._notify(CacheEvent("pod", "ADDED" if old is None else "MODIFIED", old, pod))

    def delete_pod(self, pod: Pod) -> None:
        """Remove a pod (watch DELETED); unknown pods are ignored."""
        uid = pod.metadata.uid
        if uid not in self._pods:
            uid = self._uid_by_key.get(pod.key, "")
        old = self._pods.pop(uid, None)
        if old is None:
            return
        self._unindex(uid)
        self._pods_gauge.set(len(self._pods))
        self._notify(CacheEvent("pod", "DELETED", old, None))

    def replace_pods(self, pods: Iterable[Pod], *, compacted: bool = False) -> None:
        """Make the cache hold exactly ``pods`` (after a LIST), with one event per difference."""
        run_through(self.replace_pods_steps(pods, compacted=compacted))

    def replace_pods_steps(
        self, pods: Iterable[Pod], *, compacted: bool = False, step: int = REPLACE_STEP
    ) -> Generator[None, None, None]:
        """``replace_pods`` in steps of ``step`` pods: the reflector lets the event loop run
        between them, so a resync of 150,000 pods never stalls the verbs for long (bench.ingest,
        ``resync max pause``). Readers meanwhile see each pod old or new, never half-written.

        The listed pods are let go of as they are applied: most of a relist equals what is
        cached (the cached pod is kept), and freeing 150,000 of them at the end in one go
        would hold the loop ~60 ms (bench.scale). A caller that wants that keeps no reference
        to ``pods`` either (the reflector does not)."""
        fresh: dict[str, Pod] = {}
        for n, pod in enumerate(pods, 1):  # 150,000 pods: ~30 ms, in steps too
            fresh[pod.metadata.uid] = pod
            if n % (step * 20) == 0:
                yield
        del pods
        cached = list(self._pods)
        gone: list[str] = []
        for n, uid in enumerate(cached, 1):
            if uid not in fresh:
                gone.append(uid)
            if n % (step * 20) == 0:
                yield
        # No big list lives on through the steps: a young one is visited whole by every
        # collection of the GC's youngest generation, a cache miss per item at this size
        # (~30 ms at 150,000; ``fresh``, a dict of GC-untracked pods, is not tracked itself).
        del cached
        for n, uid in enumerate(gone, 1):
            stale = self._pods.get(uid)
            if stale is not None:
                self.delete_pod(stale)
            if n % step == 0:
                yield
        n = 0
        while fresh:  # the last listed first; each let go of once applied
            applied = fresh.popitem()[1]
            self.upsert_pod(applied, compacted=compacted)
            del applied
            n += 1
            if n % step == 0:
                yield
        self.pods_synced = True
        metrics.CACHE_OBJECTS.labels("pods").set(len(self._pods))

    def _index(self, uid: str, pod: Pod) -> None:
        node = pod.spec.nodeName or None
        # One WorkloadKey object per workload, not per pod (the pods of a Job share it).
        workload = workload_of(pod)
        workload = self._workload_keys.setdefault(workload, workload)
        why = self._unmanaged_now(pod)
        queue = "" if why else self._queue_now(pod)
        key = pod.key
        self._indexed[uid] = (key, node, workload, queue)
        self._uid_by_key[key] = uid
        if node:
            _add(self._by_node, node, uid)
        else:
            self._pending.add(uid)
            self._nominate(uid, pod)
        if why:
            # Cached for its room on the node; in no workload, no queue: nothing runway keeps
            # about workloads (records, holds, PodsReady) ever sees it.
            self._unmanaged[uid] = why
            _add(self._unmanaged_by_workload, workload, uid)
            return
        _add(self._by_workload, workload, uid)
        _add(self._by_queue, queue, uid)
        self._workloads.pop(workload, None)

    def _unindex(self, uid: str) -> None:
        entry = self._indexed.pop(uid, None)
        if entry is None:
            return
        key, node, workload, queue = entry
        if self._uid_by_key.get(key) == uid:
            del self._uid_by_key[key]
        if node:
            _remove(self._by_node, node, uid)
        else:
            self._pending.discard(uid)
            self._unnominate(uid)
        if self._unmanaged.pop(uid, None) is not None:
            _remove(self._unmanaged_by_workload, workload, uid)
        else:
            _remove(self._by_workload, workload, uid)
            _remove(self._by_queue, queue, uid)
            self._workloads.pop(workload, None)
        if workload not in self._by_workload and workload not in self._unmanaged_by_workload:
            self._workload_keys.pop(workload, None)

    def _nominate(self, uid: str, pod: Pod) -> None:
        node = pod.status.nominatedNodeName
        if node and not pod.spec.nodeName:
            self._nominee[uid] = node
            self._nominated[node] = self._nominated.get(node, 0) + 1

    def _unnominate(self, uid: str) -> None:
        node = self._nominee.pop(uid, None)
        if node is not None:
            left = self._nominated[node] - 1
            if left:
                self._nominated[node] = left
            else:
                del self._nominated[node]

    def reindex_queues(self) -> None:
        """Index every pod's queue again (the tree, and so the namespace permissions, changed)."""
        self._by_queue.clear()
        for uid, (key, node, workload, _) in list(self._indexed.items()):
            if uid in self._unmanaged:
                continue
            queue = self._queue_now(self._pods[uid])
            self._indexed[uid] = (key, node, workload, queue)
            _add(self._by_queue, queue, uid)

    def queue_of_pod(self, pod: Pod) -> str:
        """``pod``'s leaf queue now: ``queue_of`` with the tree and its namespace's labels. For
        the cached pod itself, the queue indexed with it (kept current when the tree or a
        namespace's labels change: ``reindex_queues``, ``_requeue_namespaces``): a dict
        lookup instead of the namespace rules, which a pass over 41,729 workloads asked
        2 million times a minute in bench.scale's lists."""
        uid = pod.metadata.uid
        if self._pods.get(uid) is pod:
            entry = self._indexed.get(uid)
            if entry is not None:
                return entry[3]
        return self._queue_now(pod)

    def _queue_now(self, pod: Pod) -> str:
        namespace = pod.metadata.namespace
        return queue_of(
            pod,
            self.queue_tree,
            self.namespace_labels(namespace),
            namespace_queue(self.scope, namespace),
        )

    def denied_queue(self, pod: Pod) -> str | None:
        """The queue ``pod`` names (or its namespace is mapped to) that its namespace may not
        use (None: allowed, no tree, or the pod is not managed)."""
        namespace = pod.metadata.namespace
        if self.queue_tree is None or self.unmanaged_reason(pod):
            return None
        return queue_denied(
            pod,
            self.queue_tree,
            self.namespace_labels(namespace),
            namespace_queue(self.scope, namespace),
        )

    # -- scope: which pods runway manages ----------------------------------------------------

    def _unmanaged_now(self, pod: Pod) -> str:
        return unmanaged(self.scope, pod, self.namespace_labels(pod.metadata.namespace))

    def unmanaged_reason(self, pod: Pod) -> str:
        """Why runway does not manage ``pod`` (``policy.scope``); empty when it does. For the
        cached pod itself, what was indexed with it (a dict lookup)."""
        uid = pod.metadata.uid
        if self._pods.get(uid) is pod and uid in self._indexed:
            return self._unmanaged.get(uid, "")
        return self._unmanaged_now(pod)

    def is_managed(self, pod: Pod) -> bool:
        """Whether runway manages ``pod`` (``unmanaged_reason`` is empty)."""
        return not self.unmanaged_reason(pod)

    def workload_unmanaged(self, key: WorkloadKey) -> str:
        """Why runway does not manage workload ``key``: set only when the cache holds pods of it
        and none is managed (a workload with one managed pod is managed; one with no pod cached
        is not known to be unmanaged)."""
        if key in self._by_workload:
            return ""
        uids = self._unmanaged_by_workload.get(key)
        return self._unmanaged[next(iter(uids))] if uids else ""

    def unmanaged_count(self) -> int:
        """How many cached pods runway does not manage."""
        return len(self._unmanaged)

    # -- namespaces ------------------------------------------------------------------------

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """The labels of namespace ``name``: empty when not seen (not watched, or not yet),
        None when not readable (``readable_labels``: no selector matches)."""
        entry = self._namespaces.get(name)
        return entry[1] if entry is not None else EMPTY

    def upsert_namespace(self, namespace: Namespace) -> None:
        """Add or update a namespace (watch ADDED/MODIFIED)."""
        if self._put_namespace(namespace):
            self._requeue_namespaces({namespace.name})

    def delete_namespace(self, namespace: Namespace) -> None:
        """Remove a namespace: its labels are unknown (empty) again."""
        if self._namespaces.pop(namespace.name, None) is not None:
            metrics.CACHE_OBJECTS.labels("namespaces").set(len(self._namespaces))
            self._requeue_namespaces({namespace.name})

    def replace_namespaces(self, namespaces: Iterable[Namespace]) -> None:
        """Hold exactly ``namespaces`` (after a LIST); the pods of those whose labels differ
        from what was held are indexed again, in one pass."""
        fresh = {n.name: n for n in namespaces}
        changed = {name for name in self._namespaces if name not in fresh}
        for name in changed:
            del self._namespaces[name]
        changed.update(name for name, ns in fresh.items() if self._put_namespace(ns))
        self.namespaces_synced = True
        metrics.CACHE_OBJECTS.labels("namespaces").set(len(self._namespaces))
        self._requeue_namespaces(changed)

    def _put_namespace(self, namespace: Namespace) -> bool:
        """Keep ``namespace``'s labels; whether they differ from the ones held."""
        name, version = namespace.name, namespace.metadata.resourceVersion
        old = self._namespaces.get(name)
        if old is not None and old[0] == version:
            return False
        labels = readable_labels(namespace)
        if labels is None:
            self.invalid.report("namespace", name, ["namespace-labels"])
        self._namespaces[name] = (version, labels)
        if old is None:
            metrics.CACHE_OBJECTS.labels("namespaces").set(len(self._namespaces))
        return (old[1] if old is not None else EMPTY) != labels

    def _requeue_namespaces(self, names: set[str]) -> None:
        """Index again the queue of every pod in ``names`` (their labels changed): a pod its
        namespace may no longer use its queue moves to ``default`` (counted as denied), one
        that may now moves to its queue; the queue listeners hear of any move."""
        tree = self.queue_tree
        if not names:
            return
        moved = 0
        if self.scope.uses_namespace_labels:
            moved += self._rescope(names)
        if tree is None or not tree.uses_selectors():
            self._tell_queue_listeners(names, moved)
            return
        for uid, (key, node, workload, queue) in self._indexed.items():
            if key.partition("/")[0] not in names or uid in self._unmanaged:
                continue
            pod = self._pods[uid]
            now = self._queue_now(pod)
            if now == queue:
                continue
            self._indexed[uid] = (key, node, workload, now)  # same key: no resize mid-loop
            _remove(self._by_queue, queue, uid)
            _add(self._by_queue, now, uid)
            moved += 1
            if now == DEFAULT_QUEUE:
                metrics.QUEUE_DENIED.labels(metrics.queue_label(requested_queue(pod))).inc()
        self._tell_queue_listeners(names, moved)

    def _rescope(self, names: set[str]) -> int:
        """Index again the pods of namespaces ``names`` whose scope changed with their labels
        (``scope.namespaceSelector``); how many moved in or out."""
        moved = 0
        for uid, entry in list(self._indexed.items()):
            if entry[0].partition("/")[0] not in names:
                continue
            pod = self._pods[uid]
            if bool(self._unmanaged_now(pod)) != (uid in self._unmanaged):
                self._unindex(uid)
                self._index(uid, pod)
                moved += 1
        return moved

    def _tell_queue_listeners(self, names: set[str], moved: int) -> None:
        if moved:
            log.info(
                "namespace labels changed: pods moved queue", namespaces=len(names), pods=moved
            )
            for listener in tuple(self.queue_listeners):
                listener()

    # -- nodes -----------------------------------------------------------------------------

    def node(self, name: str) -> Node | None:
        """The node called ``name``."""
        return self._nodes.get(name)

    def node_labels(self, name: str) -> dict[str, str]:
        """Labels of node ``name`` (empty when unknown)."""
        node = self._nodes.get(name)
        return node.labels if node is not None else {}

    def nodes(self) -> Iterator[Node]:
        """Every cached node."""
        return iter(self._nodes.values())

    def node_count(self) -> int:
        """Number of cached nodes."""
        return len(self._nodes)

    def upsert_node(self, node: Node) -> None:
        """Add or update a node."""
        old = self._nodes.get(node.name)
        if old == node:
            return
        self._nodes[node.name] = node
        metrics.CACHE_OBJECTS.labels("nodes").set(len(self._nodes))
        self._notify(CacheEvent("node", "ADDED" if old is None else "MODIFIED", old, node))

    def delete_node(self, node: Node) -> None:
        """Remove a node."""
        old = self._nodes.pop(node.name, None)
        if old is None:
            return
        metrics.CACHE_OBJECTS.labels("nodes").set(len(self._nodes))
        self._notify(CacheEvent("node", "DELETED", old, None))

    def replace_nodes(self, nodes: Iterable[Node]) -> None:
        """Make the cache hold exactly ``nodes``."""
        fresh = {n.name: n for n in nodes}
        for name in [n for n in self._nodes if n not in fresh]:
            self.delete_node(self._nodes[name])
        for node in fresh.values():
            self.upsert_node(node)
        self.nodes_synced = True
        metrics.CACHE_OBJECTS.labels("nodes").set(len(self._nodes))

    # -- reflector adapters ----------------------------------------------------------------

    @property
    def pod_store(self) -> _PodStore:
        """The pod reflector's view of this cache."""
        return _PodStore(self)

    @property
    def node_store(self) -> _NodeStore:
        """The node reflector's view of this cache."""
        return _NodeStore(self)

    @property
    def namespace_store(self) -> _NamespaceStore:
        """The namespace reflector's view of this cache."""
        return _NamespaceStore(self)


class _PodStore:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def prepare(self, obj: Pod) -> Pod:
        # The reflector calls this on each listed pod as its page arrives. A relist hands back
        # mostly what is cached: the same version of a pod (its UID and resourceVersion, which
        # the API server changes on every write) is the cached object itself, so a resync of
        # 150,000 pods neither compacts them again nor holds a second copy until applied.
        cached = self.cache.pod(obj.metadata.uid)
        version = obj.metadata.resourceVersion
        if cached is not None and version and cached.metadata.resourceVersion == version:
            return cached
        return self.cache.compact_pod(obj)

    def replace(self, items: Sequence[Pod]) -> None:
        self.cache.replace_pods(items, compacted=True)

    def replace_steps(self, items: Sequence[Pod]) -> Generator[None, None, None]:
        return self.cache.replace_pods_steps(items, compacted=True)

    def upsert(self, obj: Pod) -> None:
        self.cache.upsert_pod(obj)

    def delete(self, obj: Pod) -> None:
        self.cache.delete_pod(obj)


class _NodeStore:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def replace(self, items: Sequence[Node]) -> None:
        self.cache.replace_nodes(items)

    def upsert(self, obj: Node) -> None:
        self.cache.upsert_node(obj)

    def delete(self, obj: Node) -> None:
        self.cache.delete_node(obj)


class _NamespaceStore:
    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    def replace(self, items: Sequence[Namespace]) -> None:
        self.cache.replace_namespaces(items)

    def upsert(self, obj: Namespace) -> None:
        self.cache.upsert_namespace(obj)

    def delete(self, obj: Namespace) -> None:
        self.cache.delete_namespace(obj)
