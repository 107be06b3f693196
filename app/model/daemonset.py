"""A ``apps/v1`` DaemonSet reduced to its identity: runway reads DaemonSets only to know which
exist, by UID (``app.kube.daemonsets``), so that a pod's ``kind: DaemonSet`` owner reference
counts only for a DaemonSet runway has seen (``policy.workload.is_queued``)."""

from __future__ import annotations

import msgspec


class DaemonSetMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata`` of a DaemonSet, as far as runway cares."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""


class DaemonSet(msgspec.Struct, frozen=True, omit_defaults=True):
    """A DaemonSet: its name and UID, nothing else (its spec and status are skipped)."""

    metadata: DaemonSetMeta = DaemonSetMeta()
