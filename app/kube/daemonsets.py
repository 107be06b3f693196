"""``apps/v1`` DaemonSets, read only: list+watch of their names and UIDs into a store
(``app.state.owners.DaemonSets``, plugged in by ``wiring``). runway never writes a DaemonSet.

A pod is a DaemonSet's — not a queued workload, never evicted for PodsReady — only when its
controller reference names a DaemonSet runway has read with that UID: a tenant may write
``kind: DaemonSet`` on its own pods (issue #36). Without the permission no pod counts as a
DaemonSet's (``app.kube.readonly``: ``runway_daemonsets_readable`` 0).
"""

from __future__ import annotations

from app import metrics
from app.kube.client import KubeClient
from app.kube.readonly import REFUSED_RETRY_S, ReadOnlySource
from app.kube.reflector import Store
from app.kube.resources import DAEMONSETS
from app.model.daemonset import DaemonSet


class DaemonSetSource(ReadOnlySource[DaemonSet]):
    """The DaemonSet reflector, and whether the API server lets runway read DaemonSets."""

    def __init__(
        self,
        client: KubeClient,
        store: Store[DaemonSet],
        *,
        page_size: int = 500,
        watch_timeout: int = 300,
        batch_window: float = 0.0,
        refused_retry: float = REFUSED_RETRY_S,
    ) -> None:
        super().__init__(
            client,
            DAEMONSETS,
            DaemonSet,
            store,
            gauge=metrics.DAEMONSETS_READABLE,
            without="no pod counts as a DaemonSet's: DaemonSet pods are queued workloads, "
            "evicted for PodsReady like any other",
            page_size=page_size,
            watch_timeout=watch_timeout,
            batch_window=batch_window,
            refused_retry=refused_retry,
        )
