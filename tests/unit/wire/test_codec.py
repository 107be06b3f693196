"""The wire codec's fast paths give exactly what the general paths give."""

from __future__ import annotations

import json

import msgspec

from app.wire import (
    decode_extender_args,
    encode_filter_result,
    encode_filter_result_parts,
)
from app.wire.buffers import span_in
from bench.payloads import extender_args


def test_nodelist_echo_is_one_slice_of_the_request_body() -> None:
    body = extender_args(50, "list")
    args = decode_extender_args(body)
    parts = encode_filter_result_parts(args, None, {}, {})
    assert len(parts) == 3 and isinstance(parts[1], memoryview)
    assert parts[1].obj is body  # a view, not a copy
    reply = json.loads(b"".join(parts))
    assert reply["Nodes"]["items"] == json.loads(body)["Nodes"]["items"]
    # Partial acceptance takes the copying path and keeps only the passed nodes, in order.
    some = encode_filter_result(args, ["node-00003", "node-00001"], {}, {})
    names = [n["metadata"]["name"] for n in json.loads(some)["Nodes"]["items"]]
    assert names == ["node-00001", "node-00003"]


def test_span_is_refused_for_views_of_another_buffer() -> None:
    body = b'{"items":[{"a":1},{"b":2}]}'
    other = msgspec.json.decode(b'[{"a":1}]', type=list[msgspec.Raw])
    assert span_in(body, other[0], other[0]) is None


def test_whitespace_between_items_is_kept_valid() -> None:
    body = (
        b'{"Pod": {}, "Nodes": {"items": [ {"metadata": {"name": "a"}} ,\n'
        b' {"metadata": {"name": "b"}} ]}}'
    )
    args = decode_extender_args(body)
    reply = json.loads(encode_filter_result(args, None, {}, {}))
    assert [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["a", "b"]
