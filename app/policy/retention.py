"""When a WorkloadRecord nobody owns may go (``kubernetes.recordRetention``): pure.

A record owned by the workload's controllers is deleted with them by Kubernetes' garbage
collector. A workload of bare pods has no owner: its record would outlive it forever, so the
leader deletes it once none of its pods has been seen for the retention and nothing in it still
holds the workload — deleting a pending backoff, a deactivation or a preemption in flight would
lift them.
"""

from __future__ import annotations

from app.model.record import RecordState


def expired(state: RecordState, gone_since: float | None, now: float, retention: float) -> bool:
    """Whether an unowned record may be deleted now. ``gone_since``: since when none of the
    workload's pods has been seen (None: some are there now)."""
    if retention <= 0 or state.owned or gone_since is None or now - gone_since < retention:
        return False
    record = state.record
    if not state.active or (record is not None and record.deactivated) or state.preemptions:
        return False
    return record is None or record.requeue_at is None or record.requeue_at <= now
