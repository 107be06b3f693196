"""The book of held preemptors, and its mirror in an annotation on each preemptor.

The in-memory book answers the hot path; the annotation ``runway.dev/preemption-gate`` on the
preemptor carries the same entry so that another replica (reading it through its pod cache) and
this replica after a restart hold the pod too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from app import metrics
from app.model import Pod
from app.policy.gate import GateEntry, PodRef

GATE_ANNOTATION = "runway.dev/preemption-gate"


def encode_entry(entry: GateEntry) -> str:
    """The annotation value for ``entry`` (compact JSON)."""
    return json.dumps(
        {
            "node": entry.node,
            "victims": [[v.uid, v.namespace, v.name] for v in entry.victims],
            "since": entry.since,
            "deadline": entry.deadline,
            "rule": entry.rule,
            "holder": entry.holder,
        },
        separators=(",", ":"),
    )


def decode_entry(pod: Pod) -> GateEntry | None:
    """The gate entry mirrored on ``pod``, or None (absent or unreadable: never raises)."""
    raw = pod.annotation(GATE_ANNOTATION)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        victims = tuple(PodRef(str(u), str(ns), str(n)) for u, ns, n in data["victims"])
        return GateEntry(
            preemptor=PodRef(pod.metadata.uid, pod.metadata.namespace, pod.metadata.name),
            node=str(data["node"]),
            victims=victims,
            since=float(data["since"]),
            deadline=float(data["deadline"]),
            rule=str(data.get("rule", "")),
            holder=str(data.get("holder", "")),
        )
    except (ValueError, KeyError, TypeError):
        return None


class GateBook:
    """Held preemptors by UID. Not thread-safe: used from the event loop only."""

    def __init__(self) -> None:
        self._entries: dict[str, GateEntry] = {}

    def hold(self, entry: GateEntry) -> None:
        """Hold ``entry.preemptor`` (replaces an older entry for the same pod)."""
        self._entries[entry.preemptor.uid] = entry
        metrics.GATE_PODS.set(len(self._entries))

    def release(self, uid: str) -> GateEntry | None:
        """Open the gate for ``uid``; returns the entry that was held, if any."""
        entry = self._entries.pop(uid, None)
        metrics.GATE_PODS.set(len(self._entries))
        return entry

    def get(self, uid: str) -> GateEntry | None:
        """The local entry for a preemptor UID."""
        return self._entries.get(uid)

    def lookup(self, pod: Pod) -> GateEntry | None:
        """The entry holding ``pod``: this replica's, else one mirrored on the pod by another."""
        return self._entries.get(pod.metadata.uid) or decode_entry(pod)

    def __iter__(self) -> Iterator[GateEntry]:
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)
