"""The record janitor (leader only): deletes the WorkloadRecords of workloads gone for
``kubernetes.recordRetention`` that hold nothing (``policy.retention``), owned or not: Kubernetes'
garbage collector deletes owned records with their controllers only when it can resolve them."""

from __future__ import annotations

from collections.abc import Callable

from app.clock import Clock
from app.logs import get_logger
from app.state.records import RecordBook
from app.tasks.loop import Ticker

log = get_logger("tasks.retention")


class RecordJanitor(Ticker):
    """A slow periodic sweep of the records of gone workloads."""

    def __init__(
        self,
        records: RecordBook,
        clock: Clock,
        retention: float,
        *,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        # Checked a few times per retention (at most every 5 min): a record outlives its
        # workload by at most the retention plus one tick.
        tick = min(max(retention / 4, 1.0), 300.0) if retention > 0 else 3600.0
        super().__init__("record-janitor", tick=tick, debounce=0.0)
        self.records = records
        self.clock = clock
        self.retention = retention
        self.is_leader = is_leader
        self.deleted = 0

    async def run_once(self) -> float:
        """One sweep (``Ticker``), on the leader only."""
        if self.retention > 0 and self.is_leader():
            self.deleted += await self.records.sweep_gone(self.clock.now(), self.retention)
        return self.tick
