"""The last preempt decisions, for ``GET /v1/preemptions/decisions`` and explain.

Kept as JSON bytes, not as objects: a decision over 1,000 offered nodes is tens of thousands of
small objects, and two hundred of them alive would make every full garbage collection walk them
all — inside some unlucky verb call. One ``bytes`` per decision is invisible to the collector
and bounds the memory plainly. Decoding happens only when the REST API asks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import msgspec

from app.policy.victims import Decision


@dataclass(frozen=True)
class _Entry:
    preemptor: str
    victims: frozenset[str]
    """UIDs of every pod the decision has a record of (offered, re-selected, gang)."""
    data: bytes
    seq: int = 0
    """The decision's number in this log (1, 2, ...): names it for paging."""


class DecisionLog:
    """A bounded, newest-last log of preempt decisions."""

    def __init__(self, size: int = 200, *, max_bytes: int = 64 << 20, max_nodes: int = 100) -> None:
        self.size = size
        self.max_bytes = max_bytes
        """Bound on the JSON kept for all decisions together: the oldest fall off first."""
        self.max_nodes = max_nodes
        """Node records kept per decision (the chosen node's first): a preempt offering 20,000
        nodes is remembered in bounded time and memory."""
        self._log: deque[_Entry] = deque()
        self._bytes = 0
        self._seq = 0

    @property
    def bytes(self) -> int:
        """JSON bytes held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._log)

    def add(self, decision: Decision) -> None:
        """Remember a decision (the oldest fall off, by count and by size)."""
        nodes = decision.recorded_nodes(self.max_nodes)
        uids = frozenset(rec.uid for node in nodes for rec in node.records)
        data = msgspec.json.encode(decision.to_dict(self.max_nodes))
        self._seq += 1
        self._log.append(_Entry(decision.preemptor.key, uids, data, self._seq))
        self._bytes += len(data)
        # The newest always stays (its size is bounded by ``max_nodes``).
        while len(self._log) > 1 and (len(self._log) > self.size or self._bytes > self.max_bytes):
            self._bytes -= len(self._log.popleft().data)

    def latest(self, limit: int | None = None, preemptor: str | None = None) -> list[Any]:
        """Decisions as JSON-ready dicts, newest first (only ``preemptor``'s when given)."""
        out: list[Any] = []
        for entry in reversed(self._log):
            if preemptor is not None and entry.preemptor != preemptor:
                continue
            if limit is not None and len(out) >= limit:
                break
            out.append(msgspec.json.decode(entry.data))
        return out

    def numbered(
        self, limit: int, preemptor: str | None = None, before: int | None = None
    ) -> list[tuple[int, Any]]:
        """Up to ``limit`` decisions as (number, JSON-ready dict), newest first, only those
        numbered below ``before`` when given (the REST API's pages)."""
        out: list[tuple[int, Any]] = []
        for entry in reversed(self._log):
            if len(out) >= limit:
                break
            if before is not None and entry.seq >= before:
                continue
            if preemptor is not None and entry.preemptor != preemptor:
                continue
            out.append((entry.seq, msgspec.json.decode(entry.data)))
        return out

    def about(self, preemptor: str, victim_uid: str) -> dict[str, Any] | None:
        """The victim's record in the newest decision of ``preemptor`` that mentions it: the one
        for the chosen node when the victim was offered there, else its first record."""
        for entry in reversed(self._log):
            if entry.preemptor != preemptor or victim_uid not in entry.victims:
                continue
            decision = msgspec.json.decode(entry.data)
            nodes = sorted(decision["nodes"], key=lambda n: n["node"] != decision["chosenNode"])
            for node in nodes:
                for record in node["pods"]:
                    if record["uid"] == victim_uid:
                        return dict(record)
        return None
