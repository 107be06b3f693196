"""``ArgsReader``: filter's decode, reused when prioritize sends the very same bytes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.wire import ArgsReader, WireError, decode_extender_args


def body(uid: str, names: list[str]) -> bytes:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": uid}, "spec": {"priority": 5}}
    return json.dumps({"Pod": pod, "NodeNames": names}).encode()


def test_the_same_bytes_twice_are_decoded_once() -> None:
    read = ArgsReader()
    sent = body("u1", ["a", "b"])
    first = read(sent)
    again = read(bytes(sent))  # equal bytes, another object: as a new request body is
    assert again is first
    assert again.pod.metadata.uid == "u1" and again.names() == ["a", "b"]


def test_other_bytes_are_decoded_afresh() -> None:
    read = ArgsReader()
    first = read(body("u1", ["a", "b"]))
    fewer = read(body("u1", ["a"]))  # the extender filtered a node out: prioritize gets fewer
    other = read(body("u2", ["a", "b"]))
    assert fewer is not first and fewer.names() == ["a"]
    assert other.pod.metadata.uid == "u2"


def test_a_body_that_does_not_decode_is_refused_every_time_and_not_remembered() -> None:
    read = ArgsReader()
    good = read(body("u1", ["a"]))
    for _ in range(2):
        with pytest.raises(WireError):
            read(b'{"NodeNames": ["a"]}')
    assert read(body("u1", ["a"])) is good


def test_a_body_over_the_memo_bound_is_not_kept() -> None:
    read = ArgsReader()
    big = body("u1", [f"node-{i:06d}" for i in range(ArgsReader.MEMO_BYTES // 10)])
    assert len(big) > ArgsReader.MEMO_BYTES
    first = read(big)
    assert read(big) is not first  # decoded again: a big NodeList is not held between calls


@given(
    st.lists(
        st.tuples(st.sampled_from(["u1", "u2"]), st.lists(st.sampled_from("abc"))), max_size=12
    )
)
def test_a_reader_answers_what_decoding_answers(calls: list[tuple[str, list[str]]]) -> None:
    read = ArgsReader()
    for uid, names in calls:
        sent = body(uid, names)
        got, want = read(sent), decode_extender_args(sent)
        assert (got.pod, got.node_names, got.body) == (want.pod, want.node_names, want.body)
