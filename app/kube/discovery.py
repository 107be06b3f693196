"""API discovery: an ownerReference's or a Queue's ``apiVersion``/``kind`` → its REST resource,
from the API server's discovery documents (``GET /apis/<group>/<version>``), once per
group/version."""

from __future__ import annotations

import asyncio

import msgspec

from app.kube.client import KubeClient
from app.kube.errors import KubeError
from app.kube.resources import Resource
from app.logs import get_logger

log = get_logger("kube.discovery")


class UnknownKind(KubeError):
    """The API server does not serve this apiVersion/kind (a CRD not installed...)."""


# --- discovery --------------------------------------------------------------------------------


class _ApiResource(msgspec.Struct, frozen=True):
    name: str = ""
    kind: str = ""
    namespaced: bool = False


class _ApiResourceList(msgspec.Struct, frozen=True):
    resources: list[_ApiResource] = []


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class Discovery:
    """apiVersion/kind → ``Resource``, from the API server's discovery documents (cached)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._kinds: dict[str, dict[str, Resource]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def cached(self, api_version: str, kind: str) -> Resource | None:
        """The resource if its group/version was discovered already (no I/O)."""
        return self._kinds.get(api_version, {}).get(kind)

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        """The REST resource serving ``kind`` in ``api_version``; ``UnknownKind`` if none."""
        found = self.cached(api_version, kind)
        if found is not None:
            return found
        lock = self._locks.setdefault(api_version, asyncio.Lock())
        async with lock:
            if api_version not in self._kinds:
                await self._discover(api_version)
        found = self.cached(api_version, kind)
        if found is None:
            raise UnknownKind(f"the API server serves no kind {kind} in {api_version}")
        return found

    async def _discover(self, api_version: str) -> None:
        group, version = _split(api_version)
        path = f"/api/{version}" if not group else f"/apis/{group}/{version}"
        resp = await self.client.request("GET", path, verb="get", resource="discovery")
        listing = msgspec.json.decode(resp.content, type=_ApiResourceList)
        self._kinds[api_version] = {
            r.kind: Resource(group, version, r.name, namespaced=r.namespaced)
            for r in listing.resources
            if "/" not in r.name  # subresources (jobs/status) share the kind
        }
        log.debug("discovered", api_version=api_version, kinds=len(self._kinds[api_version]))
