"""kube/owners: ``feeding`` (what ``/readyz`` asks of the owner watches that carry the eviction
records) turns false while an owner kind's list/watch has been failing past the threshold."""

from __future__ import annotations

import time
from typing import Any, cast

from app.kube.owners import OwnerObject, OwnerWatcher, _Kind, _KindStore
from app.kube.reflector import Reflector
from app.kube.resources import Resource


def test_owner_watches_feed_the_readiness_like_the_pod_cache() -> None:
    watcher = OwnerWatcher(cast(Any, None))
    assert watcher.feeding(60)  # nothing watched yet
    store = _KindStore(lambda: None)
    jobs = Resource("batch", "v1", "jobs", namespaced=True)
    kind = _Kind(store, reflector=Reflector(cast(Any, None), jobs, OwnerObject, store))
    watcher._kinds[("batch/v1", "Job")] = kind
    assert watcher.feeding(60)
    assert kind.reflector is not None
    kind.reflector.failing_since = time.monotonic() - 30
    assert watcher.feeding(60)  # a short outage: still ready
    kind.reflector.failing_since = time.monotonic() - 61
    assert not watcher.feeding(60)
    kind.failed = "cannot discover Job batch/v1: not served"
    assert watcher.feeding(60)  # a kind that cannot be watched is reported, not a cache
