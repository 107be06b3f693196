"""The WATCH protocol: the query of a watch request and the decoding of its event stream.

``KubeClient.watch`` opens the stream (one HTTP call, typed errors, metrics); this module says
what to ask for and cuts the newline-delimited JSON into lines; the reflector decodes each line
straight into its typed event (``WatchEvent``), and a line that is not one (an ERROR's Status)
as a ``RawWatchEvent``.
"""

from __future__ import annotations

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


MAX_EVENT_BYTES = 64 * 1024 * 1024
"""A line longer than this (no newline in 64 MiB) is a broken stream, not an object."""


class LineSplitter:
    """Cuts a watch body into its lines (one JSON event each), whatever the pieces it arrives
    in: raw bytes, no text decoding; blank lines are dropped."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._pending: list[bytes] = []  # a line's parts so far (a big object spans many reads)
        self._size = 0

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` completes (a line past ``MAX_EVENT_BYTES``: ``ApiUnavailable``)."""
        if b"\n" not in data:
            self._pending.append(data)
            self._size += len(data)
            if self._size > MAX_EVENT_BYTES:
                raise ApiUnavailable(
                    f"GET {self.path} (watch): an event longer than {MAX_EVENT_BYTES} bytes"
                )
            return []
        if self._pending:
            self._pending.append(data)
            data = b"".join(self._pending)
        lines = data.split(b"\n")
        tail = lines.pop()
        self._pending, self._size = ([tail], len(tail)) if tail else ([], 0)
        return [line for line in lines if line.strip()]

    def rest(self) -> list[bytes]:
        """The last line, if the body ended without a newline."""
        rest = b"".join(self._pending)
        self._pending, self._size = [], 0
        return [rest] if rest.strip() else []


def decode_raw(line: bytes, path: str) -> RawWatchEvent:
    """One line as a ``RawWatchEvent`` (undecodable: ``ApiUnavailable``)."""
    try:
        return _event_decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise ApiUnavailable(f"GET {path} (watch): undecodable event: {exc}") from None
