"""The WATCH protocol: the query of a watch request and the decoding of its event stream.

``KubeClient.watch`` opens the stream (one HTTP call, typed errors, metrics); this module says
what to ask for and turns the newline-delimited JSON into ``RawWatchEvent`` values.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable

import msgspec

from app.kube.errors import ApiUnavailable
from app.kube.objects import RawWatchEvent

_event_decoder = msgspec.json.Decoder(RawWatchEvent)


def watch_params(
    resource_version: str,
    *,
    timeout_seconds: int,
    allow_bookmarks: bool,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> dict[str, str | int]:
    """The query parameters of a WATCH from ``resource_version``."""
    params: dict[str, str | int] = {
        "watch": "true",
        "resourceVersion": resource_version,
        "timeoutSeconds": timeout_seconds,
    }
    if allow_bookmarks:
        params["allowWatchBookmarks"] = "true"
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


async def decode_events(
    lines: AsyncIterable[str], *, path: str
) -> AsyncGenerator[RawWatchEvent, None]:
    """The events of a watch stream, one JSON object a line (undecodable: ``ApiUnavailable``)."""
    async for line in lines:
        if not line:
            continue
        try:
            event = _event_decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise ApiUnavailable(f"GET {path} (watch): undecodable event: {exc}") from None
        yield event
