"""Every Prometheus metric runway exports, in one place, on one registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry(auto_describe=True)

# From 100 µs: a filter on node names takes well under a millisecond.
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)

EXTENDER_REQUESTS = Counter(
    "runway_extender_requests_total",
    "Extender calls by verb and outcome (ok, bad_request, too_large, not_found, error).",
    ["verb", "outcome"],
    registry=REGISTRY,
)
EXTENDER_DURATION = Histogram(
    "runway_extender_request_duration_seconds",
    "Time to answer an extender call, from the first body byte read to the reply built.",
    ["verb"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)

# Asynchronous preemption (named as kube-scheduler names its own preemption metrics).
PREEMPTION_EXECUTIONS = Counter(
    "runway_preemption_goroutines_execution_total",
    "Preemption tasks finished, by result (success, error, cancelled).",
    ["result"],
    registry=REGISTRY,
)
PREEMPTION_DURATION = Histogram(
    "runway_preemption_goroutines_duration_seconds",
    "Wall time of a preemption task's API calls, by result.",
    ["result"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
PREEMPTION_IN_FLIGHT = Gauge(
    "runway_preemption_tasks_in_flight",
    "Preemption tasks currently running.",
    registry=REGISTRY,
)
VICTIMS = Counter(
    "runway_victims_total",
    "Offered victims by kind (preempt: same queue, reclaim: other queue) and decision: kept, "
    "protected (dropped by min-runtime) or reselected (chosen instead of a protected one).",
    ["kind", "decision"],
    registry=REGISTRY,
)
PREEMPT_NODES_DROPPED = Counter(
    "runway_preempt_nodes_dropped_total",
    "Offered nodes dropped by preempt: a needed victim was protected and no replacement fit.",
    registry=REGISTRY,
)
GATE_PODS = Gauge(
    "runway_gate_pods",
    "Preemptors held in the gate while their preemption is in flight.",
    registry=REGISTRY,
)


# --- Kubernetes API layer (app/kube, app/state) ---
KUBE_API_REQUESTS = Counter(
    "runway_kube_api_requests_total",
    "Kubernetes API calls by verb, resource and HTTP code (`timeout`/`error`: no answer).",
    ["verb", "resource", "code"],
    registry=REGISTRY,
)
KUBE_API_DURATION = Histogram(
    "runway_kube_api_request_duration_seconds",
    "Latency of Kubernetes API calls (for watches: until the stream opened).",
    ["verb", "resource"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
WATCH_EVENTS = Counter(
    "runway_watch_events_total",
    "Watch events received, by resource and type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).",
    ["resource", "type"],
    registry=REGISTRY,
)
WATCH_RELISTS = Counter(
    "runway_watch_relists_total",
    "Full LISTs of a resource after the first (410 Gone, or a watch that could not resume).",
    ["resource"],
    registry=REGISTRY,
)
CACHE_OBJECTS = Gauge(
    "runway_cache_objects",
    "Objects in runway's cache, by resource.",
    ["resource"],
    registry=REGISTRY,
)
LEADER = Gauge(
    "runway_leader",
    "1 while this replica holds the leader Lease (only the leader evicts), else 0.",
    registry=REGISTRY,
)

UNKNOWN_QUEUE = Counter(
    "runway_unknown_queue_total",
    "Times a pod named a queue the config does not declare (treated as a top-level queue "
    "with no settings), by queue name.",
    ["queue"],
    registry=REGISTRY,
)

AUTH_DECISIONS = Counter(
    "runway_auth_decisions_total",
    "REST authentication checks by scope (write, read, metrics) and result (allowed, "
    "unauthenticated, forbidden, unavailable).",
    ["scope", "result"],
    registry=REGISTRY,
)

# --- Requeue: eviction records, PodsReady evictions, filter rules (SPEC §5) ---
EVICTIONS = Counter(
    "runway_evictions_total",
    "Workloads evicted by runway, by reason (PodsReadyTimeout; Preempted is counted by the "
    "preemption tasks).",
    ["reason"],
    registry=REGISTRY,
)
WORKLOADS_BACKOFF = Gauge(
    "runway_workloads_backoff",
    "Workloads in requeue backoff (now < requeueAt), as of the evictor's last tick.",
    registry=REGISTRY,
)
WORKLOADS_DEACTIVATED = Gauge(
    "runway_workloads_deactivated",
    "Workloads deactivated (requeue limit exceeded) until reactivated through the REST API.",
    registry=REGISTRY,
)
FILTER_REJECTIONS = Counter(
    "runway_filter_rejections_total",
    "filter calls that held a pod back, by rule (deactivated, backoff, gate, anti-flapping, "
    "block-admission, strict-fifo).",
    ["reason"],
    registry=REGISTRY,
)
PENDING_WORKLOADS = Gauge(
    "runway_pending_workloads",
    "Pending (not admitted) workloads per leaf queue, as of the evictor's last tick.",
    ["queue"],
    registry=REGISTRY,
)

REQUEUE_WAKEUPS = Counter(
    "runway_requeue_wakeups_total",
    "Pending pods touched (annotation runway.dev/requeue-wake) because runway's hold on them "
    "ended, so kube-scheduler retries them at once; by result (touched, gone, skipped, error, "
    "dry_run).",
    ["result"],
    registry=REGISTRY,
)


LOOP_RESTARTS = Counter(
    "runway_loop_restarts_total",
    "Background loops restarted after an unexpected error or end, by loop (reflector-pods, "
    "reflector-nodes, owners-<Kind>, leader-election, gate-keeper, podsready, requeue-waker...).",
    ["loop"],
    registry=REGISTRY,
)
INVALID_OBJECTS = Counter(
    "runway_invalid_objects_total",
    "Cluster objects carrying a value runway cannot use, by field (min-available, "
    "preemption-gate, eviction-<field>, owner-reference); counted once per object version, the "
    "value is ignored for that object.",
    ["field"],
    registry=REGISTRY,
)

OTHER = "other"
"""The label value that stands for every user-supplied value past a metric's cap."""

USER_LABEL_LIMIT = 200
"""Distinct user-supplied label values (queue names from pod labels) a metric keeps."""


class LabelCap:
    """Maps user-supplied label values onto at most ``limit`` distinct ones (then ``other``),
    so a pod labelled with a new queue name per minute cannot grow ``/metrics`` without bound.
    ``known`` values (the configured queues) always keep their own series."""

    def __init__(self, limit: int = USER_LABEL_LIMIT) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str, known: bool = False) -> str:
        if known or value in self._seen:
            return value
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(value)
        return value


UNKNOWN_QUEUE_LABELS = LabelCap()
"""``runway_unknown_queue_total``'s queue label (every value is user-supplied)."""


def exposition() -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(REGISTRY)
