"""The test plays the kubelet (the control plane has none): marks bound pods Running and finishes
the deletion of pods marked for deletion, in a thread, for one namespace. Shared by the e2e tests
and ``bench/takeover.py``."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tests.e2e.conftest import ControlPlane

KUBELET_EVERY_S = 0.05
"""The kubelet's polling interval."""


class Kubelet:
    """Plays the kubelet for one namespace in a thread: marks bound pods Running, force-deletes
    pods marked for deletion, and remembers when each pod was first seen bound and when each
    victim was gone."""

    def __init__(self, plane: ControlPlane, ns: str, *, threads: int = 8) -> None:
        self.plane, self.ns = plane, ns
        self.bound_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.gone_at: dict[str, float] = {}
        self.uid_of: dict[str, str] = {}
        self.role_of: dict[str, str] = {}
        self.error: BaseException | None = None
        self._reaping: set[str] = set()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(threads)
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"kubelet-{ns}")

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._pool.shutdown(wait=True)

    def _reap(self, name: str) -> None:
        self.plane.delete_pod(name, self.ns)
        self.gone_at[name] = time.monotonic()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                items = self.plane.api.get(f"/api/v1/namespaces/{self.ns}/pods").json()["items"]
                now = time.monotonic()
                present = set()
                for p in items:
                    meta, spec = p["metadata"], p["spec"]
                    name = meta["name"]
                    present.add(name)
                    self.uid_of.setdefault(name, meta["uid"])
                    self.role_of.setdefault(name, meta.get("labels", {}).get("bench/role", ""))
                    if meta.get("deletionTimestamp"):
                        if name not in self._reaping:
                            self._reaping.add(name)
                            self._pool.submit(self._reap, name)
                    elif spec.get("nodeName") and name not in self.bound_at:
                        self.bound_at[name] = now
                        self.node_of[name] = spec["nodeName"]
                        if p["status"].get("phase") != "Running":
                            self._pool.submit(self.plane.set_pod_running, name, self.ns)
                for name in set(self.uid_of) - present:
                    self.gone_at.setdefault(name, now)  # deleted by someone else (unbound)
                self._stop.wait(KUBELET_EVERY_S)  # the kubelet's polling interval
        except BaseException as exc:  # reported by the measuring loop
            self.error = exc
