"""kube/sync: ``feeding`` (what ``/readyz`` asks) turns false while a reflector has been failing
for longer than the threshold."""

from __future__ import annotations

import time
from typing import Any, cast

from app.config.kubernetes import KubernetesConfig
from app.kube.sync import ClusterSync


class _Store:
    def replace(self, items: Any) -> None: ...
    def upsert(self, obj: Any) -> None: ...
    def delete(self, obj: Any) -> None: ...


def test_feeding_fails_after_the_threshold_and_recovers() -> None:
    config = KubernetesConfig.model_validate({"leaderElection": {"enable": False}})
    sync = ClusterSync(cast(Any, None), _Store(), _Store(), config)
    assert sync.feeding(60)
    sync.nodes.failing_since = time.monotonic() - 30
    assert sync.feeding(60)  # a short outage: still ready
    sync.nodes.failing_since = time.monotonic() - 61
    assert not sync.feeding(60)
    sync.nodes.failing_since = None  # a list or watch event got through
    assert sync.feeding(60)
