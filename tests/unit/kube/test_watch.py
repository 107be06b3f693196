"""The watch stream's framing (app.kube.watch.LineSplitter, app.kube.stream.ChunkedDecoder):
newline-delimited JSON out of raw byte pieces and chunked transfer framing, whatever the piece
boundaries; a broken line is ``ApiUnavailable``, broken framing ``StreamBroken``."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.kube import watch
from app.kube.errors import ApiUnavailable
from app.kube.stream import ChunkedDecoder, StreamBroken

EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": f"p{i}", "resourceVersion": str(i)}}}
    for i in range(5)
]
STREAM = b"".join(msgspec.json.encode(e) + b"\n" for e in EVENTS)


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    out, last = [], 0
    for cut in sorted(set(cuts)):
        out.append(data[last:cut])
        last = cut
    out.append(data[last:])
    return out


def decoded(data: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    splitter = watch.LineSplitter("/api/v1/pods")
    lines = [line for piece in pieces(data, cuts) for line in splitter.feed(piece)]
    lines += splitter.rest()
    out = []
    for line in lines:
        event = watch.decode_raw(line, "/api/v1/pods")
        out.append((event.type, msgspec.json.decode(event.object)["metadata"]["name"]))
    return out


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_every_event_once_in_order_whatever_the_pieces(cuts: list[int]) -> None:
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


def chunked(parts: list[bytes], extension: bytes = b"") -> bytes:
    framed = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in parts if p)
    return framed + b"0\r\n\r\n"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, len(STREAM)), max_size=8),
    st.lists(st.integers(0, 2 * len(STREAM)), max_size=12),
    st.sampled_from([b"", b";name=value"]),
)
def test_chunked_body_is_the_same_bytes_whatever_the_chunks_and_reads(
    chunk_cuts: list[int], read_cuts: list[int], extension: bytes
) -> None:
    wire = chunked(pieces(STREAM, chunk_cuts), extension)
    decoder = ChunkedDecoder()
    body = b"".join(decoder.feed(piece) for piece in pieces(wire, read_cuts))
    assert body == STREAM
    assert decoder.done


def test_bytes_after_the_last_chunk_are_not_body() -> None:
    decoder = ChunkedDecoder()
    assert decoder.feed(chunked([b"abc"]) + b"trailer: x\r\n\r\n") == b"abc"
    assert decoder.done and decoder.feed(b"more") == b""


def test_a_chunk_passes_on_before_it_ends() -> None:
    decoder = ChunkedDecoder()
    assert decoder.feed(b"a\r\n01234") == b"01234"
    assert decoder.feed(b"56789\r\n") == b"56789"
    assert not decoder.done


@pytest.mark.parametrize(
    "wire",
    [
        b"zz\r\n",  # not hex
        b"3\r\nabcXY",  # no CRLF after the data
        b"-1\r\n",  # negative
        b"1" * 2000,  # a size line that never ends
    ],
)
def test_broken_framing_is_refused(wire: bytes) -> None:
    with pytest.raises(StreamBroken):
        ChunkedDecoder().feed(wire)
