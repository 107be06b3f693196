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


def test_an_older_owner_version_never_replaces_a_newer_one() -> None:
    from app.kube.owners import OwnerMeta

    store = _KindStore(lambda: None)
    newer = {"runway.dev/eviction-deactivated": "true", "runway.dev/eviction-count": "3"}
    older = {"runway.dev/eviction-count": "2"}
    store.upsert(OwnerObject(OwnerMeta("j", "team", "u1", "12", annotations=newer)))
    # a PATCH answer read at version 11, folded in after the watch brought version 12
    store.upsert(OwnerObject(OwnerMeta("j", "team", "u1", "11", annotations=older)))
    assert store.entries["team/j"].annotations == newer
    store.upsert(OwnerObject(OwnerMeta("j", "team", "u1", "13", annotations=older)))
    assert store.entries["team/j"].annotations == older
