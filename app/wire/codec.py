"""Decode extender requests, encode replies. Every decode error becomes a ``WireError``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated

import msgspec

from app.model import Pod
from app.wire.buffers import span_in
from app.wire.errors import WireError
from app.wire.types import (
    ExtenderArgs,
    NodeItems,
    NodeListItems,
    PreemptionArgs,
    VictimCandidate,
)


class _ArgsBody(msgspec.Struct, rename={"pod": "Pod", "nodes": "Nodes", "node_names": "NodeNames"}):
    pod: Pod | None = None
    # Split into raw items in the same pass as the rest of the body (one scan of 50 MB, not two).
    nodes: NodeListItems | None = None
    node_names: list[str] | None = None


class _MetaPod(msgspec.Struct, rename={"uid": "UID"}):
    uid: str = ""


INT64_MAX = 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

PdbCount = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
"""``NumPDBViolations``: kube-scheduler's field is an int64; a count is never negative."""

UNDECODABLE = (RecursionError, UnicodeError, OverflowError, ValueError, MemoryError)
"""What decoding hostile bytes can raise besides msgspec's own errors (nesting too deep, bytes
that are not UTF-8, numbers out of range): all mean a 400, never a 500."""


class _MetaVictims(msgspec.Struct, rename={"pods": "Pods", "pdb": "NumPDBViolations"}):
    pods: list[_MetaPod] | None = None
    pdb: PdbCount = 0


class _Victims(msgspec.Struct, rename={"pods": "Pods", "pdb": "NumPDBViolations"}):
    pods: list[Pod] | None = None
    pdb: PdbCount = 0


class _PreemptionBody(
    msgspec.Struct,
    rename={"pod": "Pod", "victims": "NodeNameToVictims", "meta": "NodeNameToMetaVictims"},
):
    pod: Pod | None = None
    victims: dict[str, _Victims | None] | None = None
    meta: dict[str, _MetaVictims | None] | None = None


_args_decoder = msgspec.json.Decoder(_ArgsBody)
_preemption_decoder = msgspec.json.Decoder(_PreemptionBody)
_encoder = msgspec.json.Encoder()


def _decode(
    decoder: msgspec.json.Decoder[_ArgsBody] | msgspec.json.Decoder[_PreemptionBody], body: bytes
) -> object:
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise WireError(f"invalid request: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from exc
    except UNDECODABLE as exc:
        raise undecodable(exc) from exc


def undecodable(exc: BaseException) -> WireError:
    """The 400 for a body msgspec could not even report on (too deep, not UTF-8...)."""
    what = "nested too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
    return WireError(f"request body cannot be decoded ({what})")


def _check_priority(pod: Pod, where: str) -> None:
    priority = pod.spec.priority
    if priority is not None and not INT32_MIN <= priority <= INT32_MAX:
        raise WireError(f"invalid request: {where}.spec.priority {priority} is not an int32")


def decode_extender_args(body: bytes) -> ExtenderArgs:
    """Decode an ``ExtenderArgs`` body (filter, prioritize).

    Exactly one of ``Nodes`` and ``NodeNames`` must be non-null: which one tells the mode the
    extender was registered with.
    """
    try:
        decoded = _args_decoder.decode(body)
    except msgspec.ValidationError as exc:
        if "`$.Nodes" in str(exc):
            raise WireError(
                f"invalid request: `Nodes` must be a NodeList object with `items`: {exc}"
            ) from exc
        raise WireError(f"invalid request: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise WireError(f"request body is not valid JSON: {exc}") from exc
    except UNDECODABLE as exc:
        raise undecodable(exc) from exc
    if decoded.pod is None:
        raise WireError("invalid request: missing required field `Pod`")
    _check_priority(decoded.pod, "Pod")
    if decoded.nodes is not None and decoded.node_names is not None:
        raise WireError("invalid request: send either `Nodes` or `NodeNames`, not both")
    if decoded.nodes is None and decoded.node_names is None:
        raise WireError("invalid request: one of `Nodes` (a NodeList) or `NodeNames` is required")
    nodes = None if decoded.nodes is None else NodeItems.of(decoded.nodes)
    return ExtenderArgs(pod=decoded.pod, node_names=decoded.node_names, nodes=nodes, body=body)


class ArgsReader:
    """``decode_extender_args`` that remembers its last answer.

    kube-scheduler sends prioritize the bytes it sent filter when the extender kept every node
    (the same pod marshalled again, the same names): the second decode of the pod is skipped.
    Only bodies up to ``memo_bytes`` (0: none) are kept, so a big NodeList is not held between
    calls; a body that does not decode is never remembered. Decoded arguments are read-only (``Pod``
    is frozen; nothing appends to the names)."""

    MEMO_BYTES = 256 * 1024

    __slots__ = ("_last", "_memo_bytes")

    def __init__(self, memo_bytes: int = MEMO_BYTES) -> None:
        self._last: ExtenderArgs | None = None
        self._memo_bytes = memo_bytes

    def __call__(self, body: bytes) -> ExtenderArgs:
        last = self._last
        if last is not None and last.body == body:
            return last
        args = decode_extender_args(body)
        self._last = args if len(body) <= self._memo_bytes else None
        return args


def decode_preemption_args(body: bytes) -> PreemptionArgs:
    """Decode an ``ExtenderPreemptionArgs`` body in either mode (full pods or UIDs only)."""
    decoded = _decode(_preemption_decoder, body)
    assert isinstance(decoded, _PreemptionBody)
    if decoded.pod is None:
        raise WireError("invalid request: missing required field `Pod`")
    _check_priority(decoded.pod, "Pod")
    if decoded.victims is not None and decoded.meta is not None:
        raise WireError(
            "invalid request: send either `NodeNameToVictims` or `NodeNameToMetaVictims`, not both"
        )
    victims: dict[str, list[VictimCandidate]] = {}
    pdb: dict[str, int] = {}
    if decoded.meta is not None:
        for node, meta in decoded.meta.items():
            victims[node] = [VictimCandidate(uid=p.uid) for p in (meta.pods or ())] if meta else []
            pdb[node] = meta.pdb if meta else 0
    elif decoded.victims is not None:
        for node, full in decoded.victims.items():
            victims[node] = (
                [VictimCandidate(uid=p.metadata.uid, pod=p) for p in (full.pods or ())]
                if full
                else []
            )
            pdb[node] = full.pdb if full else 0
    else:
        raise WireError(
            "invalid request: one of `NodeNameToVictims` or `NodeNameToMetaVictims` is required"
        )
    for node, cands in victims.items():
        for i, cand in enumerate(cands):
            if not cand.uid:
                raise WireError(f"invalid request: victim {i} on node {node!r} has no UID")
            if cand.pod is not None:
                _check_priority(cand.pod, f"victim {i} on node {node!r}")
    if not decoded.pod.metadata.uid:  # the gate and the executor key everything by it
        raise WireError("invalid request: the preemptor `Pod` has no `metadata.uid`")
    return PreemptionArgs(
        pod=decoded.pod, victims=victims, pdb_violations=pdb, meta=decoded.meta is not None
    )


def encode_filter_result_parts(
    args: ExtenderArgs,
    passed: Sequence[str] | None,
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
) -> list[bytes | memoryview]:
    """``ExtenderFilterResult`` as a list of buffers to write one after the other.

    ``passed`` None means every offered node passed: in NodeList mode the offered items are then
    sent back as one slice of the request body (see ``app.wire.buffers``): not decoded, not
    re-encoded, not even copied.
    """
    tail = b"".join(
        (
            b',"FailedNodes":',
            _encoder.encode(dict(failed)),
            b',"FailedAndUnresolvableNodes":',
            _encoder.encode(dict(unresolvable)),
            b',"Error":""}',
        )
    )
    if args.nodes is None:
        names = args.node_names if passed is None else list(passed)
        return [b'{"Nodes":null,"NodeNames":' + _encoder.encode(names) + tail]
    head = b'{"Nodes":{"metadata":{},"items":['
    foot = b']},"NodeNames":null' + tail
    items = args.nodes.items
    if passed is None and items:
        span = span_in(args.body, items[0], items[-1])
        if span is not None:
            return [head, span, foot]
    if passed is not None:
        keep = set(passed)
        items = [item for item, name in zip(items, args.nodes.names(), strict=True) if name in keep]
    # One join of views into the request body: one allocation and one copy.
    parts: list[bytes | msgspec.Raw] = [head]
    for item in items:
        parts.append(item)
        parts.append(b",")
    if items:
        parts.pop()
    parts.append(foot)
    return [b"".join(parts)]


def encode_filter_result(
    args: ExtenderArgs,
    passed: Sequence[str] | None,
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
) -> bytes:
    """``ExtenderFilterResult`` as one ``bytes`` (see ``encode_filter_result_parts``)."""
    return b"".join(encode_filter_result_parts(args, passed, failed, unresolvable))


class _HostPriority(msgspec.Struct, rename={"host": "Host", "score": "Score"}):
    host: str
    score: int


def encode_host_priorities(scores: Iterable[tuple[str, int]]) -> bytes:
    """Encode ``HostPriorityList``: ``[{"Host": ..., "Score": ...}]``."""
    return _encoder.encode([_HostPriority(host, score) for host, score in scores])


NO_PREFERENCE = b"[]"
"""A ``HostPriorityList`` with no entry: kube-scheduler adds nothing to any node's score, which
ranks the nodes exactly as a list giving every node the same score would."""


def encode_preemption_result(chosen: Mapping[str, tuple[Sequence[str], int]]) -> bytes:
    """Encode ``ExtenderPreemptionResult``, always as ``NodeNameToMetaVictims``.

    ``chosen`` maps a node to (victim UIDs, NumPDBViolations); an empty mapping is ``{}``-like
    and vetoes preemption for this cycle.
    """
    meta = {
        node: _MetaVictims(pods=[_MetaPod(uid) for uid in uids], pdb=pdb)
        for node, (uids, pdb) in chosen.items()
    }
    return _encoder.encode({"NodeNameToMetaVictims": meta})
