"""app.api.listeners: which of the two ports (server.restPort) answers a path."""

from __future__ import annotations

import pytest

from app.api.listeners import side_of


@pytest.mark.parametrize(
    ("path", "side"),
    [
        ("/scheduler/filter", "verbs"),
        ("/scheduler", "verbs"),
        ("/schedulerx/filter", "rest"),
        ("/v1/queues", "rest"),
        ("/docs", "rest"),
        ("/openapi.json", "rest"),
        ("/ui/", "rest"),
        ("/healthz", None),
        ("/readyz", None),
        ("/metrics", "verbs"),
    ],
)
def test_side_of(path: str, side: str | None) -> None:
    assert side_of(path, "/scheduler") == side
