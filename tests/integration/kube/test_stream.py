"""A watch read straight from its socket (app.kube.stream, KubeClient.watch without an injected
transport): a real HTTP/1.1 server on loopback answers with chunked events, an error status,
or broken framing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from app.kube.client import KubeClient
from app.kube.errors import ApiUnavailable, Gone
from app.kube.resources import PODS
from tests.integration.kube_helpers import access

Reply = Callable[[bytes], bytes]


def chunked(*parts: bytes) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        + body
    )


def event(name: str, rv: str) -> bytes:
    obj = {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": rv}}
    return msgspec.json.encode({"type": "ADDED", "object": obj}) + b"\n"


async def serve(reply: Reply) -> tuple[asyncio.Server, str, list[bytes]]:
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        writer.write(reply(head))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", heads


async def watched(reply: Reply) -> tuple[list[str], list[bytes]]:
    server, url, heads = await serve(reply)
    client = KubeClient(access(url, token="s3cret"), request_timeout=5)
    names: list[str] = []
    try:
        stream = client.watch(PODS, "ns", resource_version="7", timeout_seconds=5)
        async for ev in stream:
            names.append(msgspec.json.decode(ev.object)["metadata"]["name"])
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    return names, heads


async def test_events_arrive_in_order_whatever_the_chunking() -> None:
    a, b, c = event("a", "8"), event("b", "9"), event("c", "10")
    names, heads = await watched(lambda _: chunked(a, b[:10], b[10:] + c))
    assert names == ["a", "b", "c"]
    head = heads[0]
    assert head.startswith(b"GET /api/v1/namespaces/ns/pods?watch=true&resourceVersion=7&")
    assert b"Authorization: Bearer s3cret" in head and b"Host: 127.0.0.1:" in head


async def test_an_error_status_is_the_typed_error() -> None:
    status = msgspec.json.encode(
        {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    )
    reply = b"HTTP/1.1 410 Gone\r\ncontent-length: %d\r\n\r\n%s" % (len(status), status)
    with pytest.raises(Gone):
        await watched(lambda _: reply)


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nshort",
    ],
)
async def test_broken_framing_is_an_unavailable_stream(reply: bytes) -> None:
    with pytest.raises(ApiUnavailable):
        await watched(lambda _: reply)


async def test_nothing_listening_is_an_unavailable_stream() -> None:
    server, url, _ = await serve(lambda _: b"")
    server.close()
    await server.wait_closed()
    client = KubeClient(access(url), request_timeout=2)
    try:
        with pytest.raises(ApiUnavailable):
            async for _ in client.watch(PODS, resource_version="1", timeout_seconds=5):
                pass
    finally:
        await client.aclose()
