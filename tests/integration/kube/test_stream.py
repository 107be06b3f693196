"""A watch read straight from its socket (app.kube.stream, KubeClient.watch without an injected
transport): a real HTTP/1.1 server on loopback answers with chunked events, an error status,
or broken framing."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import pytest

from app.kube.client import KubeClient
from app.kube.errors import ApiUnavailable, Gone
from app.kube.reflector import Reflector
from app.kube.resources import PODS
from app.model import Pod
from tests.certs import CA
from tests.integration.kube_helpers import access, until

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
        async for lines in stream:
            for line in lines:
                names.append(msgspec.json.decode(line)["object"]["metadata"]["name"])
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


async def test_events_that_arrive_while_the_reader_pauses_come_in_one_batch() -> None:
    """The socket is read only when the reader asks: what arrived meanwhile is one batch (the
    reflector's batch window rests on this)."""
    sent_rest = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        writer.write(head + b"%x\r\n%s\r\n" % (len(event("a", "8")), event("a", "8")))
        await writer.drain()
        await got_first.wait()
        for name, rv in (("b", "9"), ("c", "10")):
            line = event(name, rv)
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
            await asyncio.sleep(0.02)  # two separate TCP segments
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        sent_rest.set()
        writer.close()

    got_first = asyncio.Event()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    client = KubeClient(access(url), request_timeout=5)
    batches: list[list[str]] = []
    try:
        async for lines in client.watch(PODS, resource_version="7", timeout_seconds=5):
            batches.append([msgspec.json.decode(x)["object"]["metadata"]["name"] for x in lines])
            got_first.set()
            await sent_rest.wait()  # the reader pauses while b and c arrive
            await asyncio.sleep(0.05)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert batches == [["a"], ["b", "c"]]


async def test_a_tls_watch_checks_the_server_certificate(tmp_path: Path) -> None:
    ca = CA("test-ca")
    leaf = ca.issue("127.0.0.1", server=True)
    (tmp_path / "ca.pem").write_bytes(ca.pem)
    (tmp_path / "tls.crt").write_bytes(leaf.cert)
    (tmp_path / "tls.key").write_bytes(leaf.key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    a, b = event("a", "8"), event("b", "9")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(chunked(a, b[:7], b[7:]))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    async def names(ca_file: Path) -> list[str]:
        cluster = access(url)
        cluster.configuration.ssl_ca_cert = str(ca_file)
        client = KubeClient(cluster, request_timeout=5)
        out: list[str] = []
        try:
            async for lines in client.watch(PODS, resource_version="7", timeout_seconds=5):
                out += [msgspec.json.decode(x)["object"]["metadata"]["name"] for x in lines]
        finally:
            await client.aclose()
        return out

    try:
        assert await names(tmp_path / "ca.pem") == ["a", "b"]
        other = tmp_path / "other-ca.pem"
        other.write_bytes(CA("someone-else").pem)
        with pytest.raises(ApiUnavailable, match="connect/head failed"):
            await names(other)
    finally:
        server.close()
        await server.wait_closed()


class NameStore:
    """A reflector's store that keeps the names of what it is given, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def replace(self, items: Sequence[Pod]) -> None:
        pass

    def upsert(self, obj: Pod) -> None:
        self.names.append(obj.metadata.name)

    def delete(self, obj: Pod) -> None:
        pass


@asynccontextmanager
async def watch_server(
    stream: Callable[[asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    """A loopback API server: LISTs answered empty at version 7; a watch gets its head, then
    ``stream`` writes the body. Every connection is closed at exit."""
    writers: list[asyncio.StreamWriter] = []
    done = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        head = await reader.readuntil(b"\r\n\r\n")
        if b"watch=true" not in head:
            body = b'{"metadata": {"resourceVersion": "7"}, "items": []}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await stream(writer)
        await done.wait()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        done.set()
        for writer in writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
        server.close()
        await server.wait_closed()


async def send_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
    await writer.drain()


@asynccontextmanager
async def windowed_reflector(url: str) -> AsyncIterator[tuple[Reflector[Pod], NameStore]]:
    """A pod reflector with a 60 s batch window running against ``url``; stopped at exit."""
    client = KubeClient(access(url), request_timeout=5)
    store = NameStore()
    reflector = Reflector(client, PODS, Pod, store, batch_window=60.0)
    task = asyncio.create_task(reflector.run())
    try:
        yield reflector, store
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()


async def test_the_batch_window_holds_under_load_and_hurry_ends_it() -> None:
    """A batch that came quickly is followed by the window (the next events wait); a verb about
    a pod the cache lacks (``ClusterCache.expect`` → ``hurry``) has what arrived applied at once,
    synchronously, before the verb reads the cache."""

    async def stream(writer: asyncio.StreamWriter) -> None:
        await send_chunk(writer, event("a", "8"))
        await asyncio.sleep(0.05)
        await send_chunk(writer, event("b", "9"))

    async with watch_server(stream) as url, windowed_reflector(url) as (reflector, store):
        await until(lambda: store.names == ["a"], what="the first event")
        await asyncio.sleep(0.3)  # b has arrived on the socket meanwhile
        assert store.names == ["a"], "the window should hold b back"
        reflector.hurry()  # b is applied before hurry returns: the verb then reads it
        assert store.names == ["a", "b"]


async def test_a_catch_up_applies_what_has_arrived_and_the_window_goes_on() -> None:
    """``catch_up`` (a filter rejection, preempt: ``ClusterCache.refresh``) applies what has
    arrived, synchronously, and says how many; the reflector's batch window is not ended."""
    arrived = asyncio.Event()

    async def stream(writer: asyncio.StreamWriter) -> None:
        await send_chunk(writer, event("a", "8"))
        await asyncio.sleep(0.05)
        await send_chunk(writer, event("b", "9"))
        arrived.set()

    async with watch_server(stream) as url, windowed_reflector(url) as (reflector, store):
        await until(lambda: store.names == ["a"], what="the first event")
        await arrived.wait()
        caught: list[int] = []
        await until(
            lambda: bool(caught.append(reflector.catch_up()) or store.names[1:]),
            what="b applied by a catch-up",
        )
        assert store.names == ["a", "b"] and sum(caught) == 1
        assert reflector.catch_up() == 0  # nothing more has arrived
        assert reflector._napping is not None, "the window should go on"


async def test_a_catch_up_that_meets_broken_framing_ends_the_watch_as_unavailable() -> None:
    async def stream(writer: asyncio.StreamWriter) -> None:
        await send_chunk(writer, event("a", "8"))
        await asyncio.sleep(0.05)
        writer.write(b"zz\r\n")  # not a chunk size
        await writer.drain()

    async with watch_server(stream) as url:
        client = KubeClient(access(url), request_timeout=5)
        store = NameStore()
        reflector = Reflector(client, PODS, Pod, store, batch_window=60.0)
        watching = asyncio.create_task(reflector.watch_once("7"))
        try:
            await until(lambda: store.names == ["a"], what="the first event")
            await asyncio.sleep(0.2)  # the broken framing has arrived
            reflector.hurry()
            with pytest.raises(ApiUnavailable, match="stream broken"):
                await asyncio.wait_for(watching, 5)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
            await client.aclose()
