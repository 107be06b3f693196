"""REST resources: where a kind lives on the API server (``/api/v1/pods``, ``/apis/<group>/...``)
and the ones runway talks to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``/api/v1/pods`` or ``/apis/<group>/<version>/<plural>``."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection, an object, or one of its subresources."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def label(self, subresource: str | None = None) -> str:
        """The metric label: ``pods`` or ``pods/status``."""
        return f"{self.plural}/{subresource}" if subresource else self.plural


PODS = Resource("", "v1", "pods")
NODES = Resource("", "v1", "nodes", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases")
EVENTS = Resource("", "v1", "events")
JOBS = Resource("batch", "v1", "jobs")
DAEMONSETS = Resource("apps", "v1", "daemonsets")
