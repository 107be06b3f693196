"""Lean msgspec views of the API objects the kube layer reads besides ``app.model.Pod``.

Unknown fields are skipped while decoding, so a cached object costs only the fields kept here.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")


class ListMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata`` of a list: the version to watch from and the next page's token."""

    resourceVersion: str = ""
    # ``continue`` is a Python keyword; the wire name is kept by ``rename``.
    continue_: str | None = msgspec.field(default=None, name="continue")


class ObjectRef(msgspec.Struct, frozen=True, omit_defaults=True):
    """Just enough of any object's metadata to follow its resourceVersion (watch bookmarks)."""

    resourceVersion: str = ""


class AnyObject(msgspec.Struct, frozen=True, omit_defaults=True):
    """An object reduced to its metadata.resourceVersion."""

    metadata: ObjectRef = ObjectRef()


class RawWatchEvent(msgspec.Struct, frozen=True):
    """One line of a watch stream; ``object`` is decoded later by type (ERROR → Status)."""

    type: str
    object: msgspec.Raw


class WatchEvent(msgspec.Struct, Generic[T], frozen=True):
    """One line of a watch stream decoded at once with its object (ADDED, MODIFIED, DELETED,
    BOOKMARK: one decode per event); an ERROR's Status does not decode as ``T``, and falls back
    to ``RawWatchEvent``."""

    type: str
    object: T


class LeaseSpec(msgspec.Struct, omit_defaults=True):
    """``coordination.k8s.io/v1`` Lease spec (times are MicroTime strings)."""

    holderIdentity: str | None = None
    leaseDurationSeconds: int | None = None
    acquireTime: str | None = None
    renewTime: str | None = None
    leaseTransitions: int | None = None


class LeaseMeta(msgspec.Struct, omit_defaults=True):
    """``metadata`` of a Lease (resourceVersion makes updates compare-and-swap)."""

    name: str = ""
    namespace: str = ""
    resourceVersion: str | None = None
    uid: str | None = None
    annotations: dict[str, str] | None = None


class Lease(msgspec.Struct, omit_defaults=True):
    """A Lease, decoded and re-encoded for PUT (unknown fields are dropped, which is fine:
    runway is the only writer of its own lease)."""

    metadata: LeaseMeta = msgspec.field(default_factory=LeaseMeta)
    spec: LeaseSpec = msgspec.field(default_factory=LeaseSpec)
    apiVersion: str = "coordination.k8s.io/v1"
    kind: str = "Lease"
