"""Which Events to write, as client-go's ``EventCorrelator`` decides (pure; ``now`` passed in).

* **Spam filter** (``EventSourceObjectSpamFilter``): a token bucket per source + object (25
  Events at once, then one every 5 minutes); an Event over the limit is dropped.
* **Deduplication** (``eventLogger``): an Event identical to an earlier one (same source,
  object, type, reason and message) within ``window`` is not written again: the existing Event's
  ``count`` goes up (a PATCH) and its ``lastTimestamp`` moves.

Both caches are LRU-bounded (4096 keys, as client-go's), so memory stays flat whatever the
traffic. Aggregation of *similar* Events (differing messages) is not done: runway's messages per
object are few.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal, TypeVar

from app.model.event import EventNote, ObjectRef
from app.policy.rate import TokenBucket

SPAM_BURST = 25
"""Events one object may get at once (client-go's ``defaultSpamBurst``)."""
SPAM_QPS = 1.0 / 300.0
"""Then one per 5 minutes (client-go's ``defaultSpamQPS``)."""
DEDUP_WINDOW_S = 600.0
"""An identical Event later than this after the last one is written anew (Kueue/client-go's
aggregation interval)."""
CACHE_SIZE = 4096
"""Keys each cache remembers (client-go's ``maxLruCacheEntries``)."""

K = TypeVar("K")
V = TypeVar("V")

Action = Literal["create", "patch", "drop"]


@dataclass(frozen=True)
class Correlation:
    """What to do with one Event."""

    action: Action
    name: str
    """The Event object's name: a new one (create) or the one to patch ("" when dropped)."""
    count: int
    first_seen: float
    """``firstTimestamp``: the first of the identical Events."""


@dataclass
class _Seen:
    name: str
    count: int
    first: float
    last: float


def event_name(regarding: ObjectRef, stamp: int) -> str:
    """client-go's Event name: ``<object name>.<unix nanoseconds in hex>``."""
    return f"{regarding.name}.{stamp:x}"


class EventCorrelator:
    """client-go's spam filter and deduplication over an injected clock."""

    def __init__(
        self,
        source: str,
        *,
        burst: int = SPAM_BURST,
        qps: float = SPAM_QPS,
        window: float = DEDUP_WINDOW_S,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.source = source
        self.burst = burst
        self.qps = qps
        self.window = window
        self.cache_size = cache_size
        self._buckets: OrderedDict[ObjectRef, TokenBucket] = OrderedDict()
        self._seen: OrderedDict[tuple[object, ...], _Seen] = OrderedDict()
        self._stamp = 0
        """The last name stamp issued: names stay unique when two Events share a nanosecond."""

    def _new_name(self, regarding: ObjectRef, now: float) -> str:
        self._stamp = max(int(now * 1e9), self._stamp + 1)
        return event_name(regarding, self._stamp)

    def correlate(self, note: EventNote, now: float) -> Correlation:
        """Decide for ``note`` at ``now`` and remember it (a dropped one is not remembered)."""
        bucket = self._buckets.get(note.regarding)
        if bucket is None:
            bucket = TokenBucket(rate=self.qps, burst=self.burst)
            self._buckets[note.regarding] = bucket
        self._buckets.move_to_end(note.regarding)
        _trim(self._buckets, self.cache_size)
        key = (self.source, note.regarding, note.type, note.reason, note.message)
        seen = self._seen.get(key)
        if bucket.take(now, 1) == 0:
            name = seen.name if seen is not None else ""
            return Correlation("drop", name, seen.count if seen else 0, now)
        if seen is not None and now - seen.last <= self.window:
            seen.count += 1
            seen.last = now
            self._seen.move_to_end(key)
            return Correlation("patch", seen.name, seen.count, seen.first)
        seen = _Seen(self._new_name(note.regarding, now), 1, now, now)
        self._seen[key] = seen
        self._seen.move_to_end(key)
        _trim(self._seen, self.cache_size)
        return Correlation("create", seen.name, 1, now)

    def forget(self, note: EventNote) -> None:
        """The Event could not be written (or patched: it is gone): the next identical one is
        created anew."""
        self._seen.pop((self.source, note.regarding, note.type, note.reason, note.message), None)


def _trim(cache: OrderedDict[K, V], size: int) -> None:
    while len(cache) > size:
        cache.popitem(last=False)
