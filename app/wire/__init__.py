"""kube-scheduler extender v1 wire format: decoding requests and encoding replies.

The Go types have no json tags, so the keys are capitalised (``Pod``, ``NodeNames``, ``UID``...)
both ways; the embedded Kubernetes objects use normal camelCase. Decoding uses msgspec with lean
structs so a 5,000-node ``NodeList`` is never materialised: nodes stay raw bytes and are echoed
back verbatim (see ``bench/RESULTS.md`` for the measurements behind this choice).
"""

from app.wire.codec import (
    NO_PREFERENCE,
    ArgsReader,
    decode_extender_args,
    decode_preemption_args,
    encode_filter_result,
    encode_filter_result_parts,
    encode_host_priorities,
    encode_preemption_result,
)
from app.wire.errors import WireError
from app.wire.types import ExtenderArgs, NodeItems, PreemptionArgs, VictimCandidate

__all__ = [
    "NO_PREFERENCE",
    "ArgsReader",
    "ExtenderArgs",
    "NodeItems",
    "PreemptionArgs",
    "VictimCandidate",
    "WireError",
    "decode_extender_args",
    "decode_preemption_args",
    "encode_filter_result",
    "encode_filter_result_parts",
    "encode_host_priorities",
    "encode_preemption_result",
]
