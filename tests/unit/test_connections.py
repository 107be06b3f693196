"""One write per fixed-length response (app.connections.OneWrite): the head waits for the body,
everything else goes straight through."""

from __future__ import annotations

from typing import Any

from app.connections import OneWrite

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def one_write() -> tuple[OneWrite, Transport]:
    t = Transport()
    return OneWrite(t), t  # type: ignore[arg-type]


def test_a_head_and_its_body_go_out_in_one_write() -> None:
    w, t = one_write()
    w.write(HEAD)
    assert t.writes == []
    w.write(b"{}")
    assert t.writes == [HEAD + b"{}"]
    w.flush()
    assert t.writes == [HEAD + b"{}"]


def test_a_stream_head_and_100_continue_are_not_held() -> None:
    w, t = one_write()
    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    w.write(chunked)
    w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert t.writes == [chunked, b"HTTP/1.1 100 Continue\r\n\r\n"]


def test_a_head_without_a_body_is_sent_at_flush_or_close() -> None:
    w, t = one_write()
    w.write(HEAD.replace(b"200 OK", b"204 No Content"))
    w.flush()
    assert len(t.writes) == 1
    w.write(HEAD)
    w.close()
    assert t.writes[-1] == HEAD and t.closed


def test_anything_else_is_the_transport_s() -> None:
    w, _ = one_write()
    got: Any = w.is_closing()
    assert got is False
