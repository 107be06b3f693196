"""A workload's controller owner (a Job, a JobSet...), as read from a pod's ownerReferences: the
owner of its WorkloadRecord, and a subject of its Events. runway never reads the owner itself.

The API server checks little of an ownerReference: a name of any length, any kind, any
apiVersion. One no object could have (a 300-character name) is not an owner: the pod is then a
workload of its own (``controller_of`` is None), and nothing runway writes names it (a record's
ownerReferences, its ``spec.workload``: the record's schema would refuse the write).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from app.model.pod import OwnerReference, Pod

MAX_NAME: Final = 253
"""The longest object name Kubernetes has (a DNS subdomain; path-segment names are no longer)."""
MAX_API_VERSION: Final = 253 + 1 + 63
"""``group/version``: a DNS-subdomain group and a DNS-label version."""
_KIND: Final = re.compile(r"[A-Za-z][-A-Za-z0-9]{0,62}")
"""A kind: a CRD's kind lowercased must be a DNS-1035 label (63 characters)."""


def is_object_ref(ref: OwnerReference) -> bool:
    """Whether ``ref`` can name an object: a kind (a DNS-1035 label once lowercased), a name a
    Kubernetes object can have (1-253 characters, a path segment), an apiVersion and a UID."""
    name, api_version = ref.name, ref.apiVersion
    return (
        0 < len(name) <= MAX_NAME
        and "/" not in name
        and "%" not in name
        and name not in (".", "..")
        and 0 < len(api_version) <= MAX_API_VERSION
        and bool(ref.uid)
        and len(ref.uid) <= MAX_NAME
        and _KIND.fullmatch(ref.kind) is not None
    )


def controller_of(pod: Pod) -> OwnerReference | None:
    """The pod's controller ownerReference (``controller: true``) when it can name an object
    (``is_object_ref``); None for a bare pod or one whose controller reference names nothing."""
    for ref in pod.metadata.ownerReferences or ():
        if ref.controller:
            return ref if is_object_ref(ref) else None
    return None


@dataclass(frozen=True, order=True)
class OwnerRef:
    """A workload's controller owner, named the ways the API needs."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @property
    def kind_key(self) -> tuple[str, str]:
        """``(apiVersion, kind)``: one reflector per value."""
        return (self.api_version, self.kind)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def owner_of(pod: Pod) -> OwnerRef | None:
    """The pod's controller owner (``controller_of``), or None."""
    ref = controller_of(pod)
    if ref is None:
        return None
    return OwnerRef(ref.apiVersion, ref.kind, pod.metadata.namespace, ref.name, ref.uid)
