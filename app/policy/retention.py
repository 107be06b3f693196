"""When the WorkloadRecord of a workload with no pods may go (``kubernetes.recordRetention``):
pure.

A record owned by the workload's controllers is deleted with them by Kubernetes' garbage
collector — when it can resolve them: an owner reference of a made-up API (``rt.example/v1``)
is never resolved, so such a record would stay forever. A workload of bare pods has no owner at
all. So the leader deletes any record once none of its workload's pods has been seen for the
retention (10 min by default: records grow with a tenant's churn, not only with its quota) and
nothing in it still holds the workload — deleting a pending backoff, a deactivation or a
preemption in flight would lift them. What goes with it protected the workload (preemption
history) or counts for nothing once its pods are all gone (life facts: a full eviction resets
them), and a requeue count a Job's owner could reset anyway by re-creating the Job (as with
Kueue's Workload).
"""

from __future__ import annotations

from app.model.record import RecordState


def expired(state: RecordState, gone_since: float | None, now: float, retention: float) -> bool:
    """Whether a record may be deleted now. ``gone_since``: since when none of the workload's
    pods has been seen (None: some are there now)."""
    if retention <= 0 or gone_since is None or now - gone_since < retention:
        return False
    record = state.record
    if not state.active or (record is not None and record.deactivated) or state.preemptions:
        return False
    return record is None or record.requeue_at is None or record.requeue_at <= now
