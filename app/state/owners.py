"""The owners runway has read itself, for the rule that an owner's kind counts only then
(``policy.workload.is_queued``, issue #36): DaemonSets by UID (``DaemonSets``, the store of
``app.kube.daemonsets``) and Nodes (the cache's: a mirror pod's owner).

``DaemonSets`` keeps ``(namespace, name) → uid`` and nothing else; ``on_change()`` is told when
one appears, goes or is re-created (not when only its status moves, most of a DaemonSet watch's
events), so the memos that depend on it are dropped only then.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from app.model.daemonset import DaemonSet
from app.model.pod import Pod
from app.policy.workload import is_queued
from app.state.cache import ClusterCache


class DaemonSets:
    """The DaemonSets runway has read (``Store[DaemonSet]``). No I/O."""

    def __init__(self, on_change: Callable[[], None] | None = None) -> None:
        self._uids: dict[tuple[str, str], str] = {}
        self.on_change = on_change or (lambda: None)

    def __len__(self) -> int:
        return len(self._uids)

    def uid(self, namespace: str, name: str) -> str | None:
        """The UID of DaemonSet ``namespace/name`` (None: runway has not read one)."""
        return self._uids.get((namespace, name))

    def replace(self, items: Sequence[DaemonSet]) -> None:
        """Hold exactly ``items`` (after a LIST; ``[]`` forgets every one)."""
        new = {_where(d): d.metadata.uid for d in items if d.metadata.uid}
        changed = new != self._uids
        self._uids = new
        if changed:
            self.on_change()

    def upsert(self, obj: DaemonSet) -> None:
        """A DaemonSet added or changed."""
        where = _where(obj)
        if not obj.metadata.uid or self._uids.get(where) == obj.metadata.uid:
            return  # its status moved
        self._uids[where] = obj.metadata.uid
        self.on_change()

    def delete(self, obj: DaemonSet) -> None:
        """A DaemonSet deleted (a later one of the same name is kept)."""
        where = _where(obj)
        held = self._uids.get(where)
        if held is None or (obj.metadata.uid and held != obj.metadata.uid):
            return
        del self._uids[where]
        self.on_change()


def _where(obj: DaemonSet) -> tuple[str, str]:
    return sys.intern(obj.metadata.namespace), obj.metadata.name


class ReadOwners:
    """``is_queued`` against the owners runway has read: the DaemonSets' UIDs, the cache's
    Nodes. With no DaemonSet store (the embedded default) no pod is a DaemonSet's."""

    def __init__(self, cache: ClusterCache, daemonsets: DaemonSets | None = None) -> None:
        self.cache = cache
        self.daemonsets = daemonsets

    def daemonset_uid(self, namespace: str, name: str) -> str | None:
        """The UID of a DaemonSet runway has read (None: none)."""
        return self.daemonsets.uid(namespace, name) if self.daemonsets is not None else None

    def node_uid(self, name: str) -> str | None:
        """The UID of a Node in the cache (None: none)."""
        node = self.cache.node(name)
        return node.metadata.uid or None if node is not None else None

    def is_queued(self, pods: Sequence[Pod]) -> bool:
        """``policy.workload.is_queued`` with what runway has read."""
        return is_queued(pods, self.daemonset_uid, self.node_uid)
