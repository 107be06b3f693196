"""The watch stream decoder (app.kube.watch.decode_events): newline-delimited JSON from raw
byte chunks, whatever the chunk boundaries; a broken line is ``ApiUnavailable``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.kube import watch
from app.kube.errors import ApiUnavailable

EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": f"p{i}", "resourceVersion": str(i)}}}
    for i in range(5)
]
STREAM = b"".join(msgspec.json.encode(e) + b"\n" for e in EVENTS)


async def chunks(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    last = 0
    for cut in sorted(set(cuts)):
        yield data[last:cut]
        last = cut
    yield data[last:]


def decoded(data: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    async def run() -> list[tuple[str, str]]:
        out = []
        async for event in watch.decode_events(chunks(data, cuts), path="/api/v1/pods"):
            name = msgspec.json.decode(event.object)["metadata"]["name"]
            out.append((event.type, name))
        return out

    return asyncio.run(run())


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_every_event_once_in_order_whatever_the_chunks(cuts: list[int]) -> None:
    assert decoded(STREAM, cuts) == [("ADDED", f"p{i}") for i in range(5)]


def test_blank_lines_and_a_last_line_without_newline() -> None:
    data = b"\n\r\n" + STREAM + b"  \n" + msgspec.json.encode(EVENTS[0])
    assert len(decoded(data, [3, 40])) == 6


def test_a_broken_line_is_an_unavailable_stream() -> None:
    with pytest.raises(ApiUnavailable, match="undecodable event"):
        decoded(STREAM[:30] + b"\n" + STREAM, [])


def test_a_line_past_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "MAX_EVENT_BYTES", 100)
    with pytest.raises(ApiUnavailable, match="longer than 100 bytes"):
        decoded(b'{"type": "ADDED", "object": "' + b"x" * 200, [50, 120, 180])
