"""Every Prometheus metric runway exports, in one place, on one registry.

The registry also carries the process (CPU, memory, file descriptors), garbage-collector and
platform collectors, and no ``*_created`` series. ``reference()`` is the README's metrics table
(``python -m app metrics-reference``), drift-tested against the README.

Queue labels come from users (a pod's queue label): ``queue_label`` keeps them to the queues the
tree declares (file or KAI ``Queue`` objects, set by ``app.wiring``) and folds the rest into
``other``, so a typo'd label cannot grow the series without bound.
"""

from __future__ import annotations

import contextlib
import platform
from bisect import bisect_left
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from importlib import metadata
from itertools import accumulate

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.utils import floatToGoString

# No `*_created` series: they double the series count and no dashboard reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry(auto_describe=True)
# The standard collectors (prometheus_client registers them on its global registry only).
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, resident memory, open fds
GCCollector(registry=REGISTRY)  # python_gc_* per generation
PlatformCollector(registry=REGISTRY)  # python_info
STANDARD_SERIES = (
    "process_cpu_seconds_total",
    "process_max_fds",
    "process_open_fds",
    "process_resident_memory_bytes",
    "process_start_time_seconds",
    "process_virtual_memory_bytes",
    "python_gc_collections_total",
    "python_gc_objects_collected_total",
    "python_gc_objects_uncollectable_total",
    "python_info",
)
"""What those collectors export on Linux (the process collector reads /proc)."""

OTHER_QUEUE = "other"
"""The ``queue`` label of a queue the tree does not declare."""

_queue_names: frozenset[str] = frozenset()


def set_queue_names(names: Iterable[str]) -> None:
    """The queues whose names may be label values (the tree's; called again on a rebuild)."""
    global _queue_names
    _queue_names = frozenset(names)


def queue_label(queue: str) -> str:
    """``queue`` when the tree declares it, else ``other`` (bounded label values)."""
    return queue if queue in _queue_names else OTHER_QUEUE


def runway_version() -> str:
    """The installed package's version (``0+unknown`` when run from a bare checkout)."""
    try:
        return metadata.version("runway")
    except metadata.PackageNotFoundError:
        return "0+unknown"


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


class VerbCalls:
    """``runway_extender_requests_total`` (verb, outcome) and
    ``runway_extender_request_duration_seconds`` (verb): a counter and a histogram kept as plain
    numbers and turned into the two families at scrape.

    Every verb call is counted and timed on kube-scheduler's critical path; prometheus_client's
    children take a lock and run checks on each ``inc``/``observe`` (~10 µs a call with the
    debug log, against ~1 µs here). ``record`` is called from the event loop's thread only (the
    verbs run there); a scrape from another thread copies the dicts first (atomic under the GIL).
    """

    REQUESTS = "runway_extender_requests"
    REQUESTS_DOC = (
        "Extender calls by verb and outcome (ok, forwarded: a follower relayed the leader's "
        "answer to preempt, bad_request, too_large, disconnected, not_found, error)."
    )
    DURATION = "runway_extender_request_duration_seconds"
    DURATION_DOC = (
        "Time to answer an extender call, from the first body byte read to the reply built."
    )

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self._le = [floatToGoString(b) for b in self.buckets] + ["+Inf"]  # type: ignore[no-untyped-call]
        self._calls: dict[tuple[str, str], int] = {}
        self._durations: dict[str, list[float]] = {}
        """Per verb: the count in each bucket (not cumulative; the last is +Inf), then the sum."""

    def record(self, verb: str, outcome: str, seconds: float | None = None) -> None:
        """Count one call; time it unless ``seconds`` is None."""
        calls = self._calls
        key = (verb, outcome)
        calls[key] = calls.get(key, 0) + 1
        if seconds is None:
            return
        times = self._durations.get(verb)
        if times is None:
            times = self._durations[verb] = [0.0] * (len(self.buckets) + 2)
        times[bisect_left(self.buckets, seconds)] += 1  # the first bound >= seconds ("le")
        times[-1] += seconds

    def describe(self) -> list[Metric]:
        """The two families, empty (what the registry checks names against)."""
        return list(self._families())

    def _families(self) -> tuple[CounterMetricFamily, HistogramMetricFamily]:
        return (
            CounterMetricFamily(self.REQUESTS, self.REQUESTS_DOC, labels=("verb", "outcome")),
            HistogramMetricFamily(self.DURATION, self.DURATION_DOC, labels=("verb",)),
        )

    def collect(self) -> Iterator[Metric]:
        """The two families with every verb's numbers so far."""
        requests, durations = self._families()
        for (verb, outcome), count in list(self._calls.items()):
            requests.add_metric((verb, outcome), count)
        yield requests
        for verb, times in list(self._durations.items()):
            cumulative = list(accumulate(times[:-1]))
            durations.add_metric(
                (verb,), buckets=list(zip(self._le, cumulative, strict=True)), sum_value=times[-1]
            )
        yield durations

    def reference_rows(self) -> list[tuple[str, str, tuple[str, ...], str]]:
        """(name, type, labels, meaning) of the two families, for the README's table."""
        return [
            (f"{self.REQUESTS}_total", "counter", ("verb", "outcome"), self.REQUESTS_DOC),
            (self.DURATION, "histogram", ("verb",), self.DURATION_DOC),
        ]


VERB_CALLS = VerbCalls(LATENCY_BUCKETS)
REGISTRY.register(VERB_CALLS)

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
PREEMPTIONS_LEFT_BY_SCHEDULER = Counter(
    "runway_preemptions_left_by_scheduler_total",
    "Scheduler-executes mode: kube-scheduler asked preempt again for a preemptor runway held, "
    "with a victim it was to delete still running (its DELETE refused or failed). runway opened "
    "the gate and decided again, so the pod is retried at kube-scheduler's pace instead of "
    "parked (DESIGN §4.4). Growing steadily: something refuses the scheduler's DELETEs.",
    registry=REGISTRY,
)
PREEMPTIONS_REFUSED = Counter(
    "runway_preemptions_refused_total",
    "preempt calls refused because runway's cache does not confirm them (DESIGN §4: the preemptor "
    "is unknown, bound, being deleted or of another scheduler; a victim is unknown, elsewhere or "
    "not of lower priority), or because this replica is not the leader (not-leader: only the "
    "leader decides preemptions), by reason. The verb answered {} and no API call was made.",
    ["reason"],
    registry=REGISTRY,
)
PREEMPT_FORWARDED = Counter(
    "runway_preempt_forwarded_total",
    "preempt calls a follower forwarded to the leader (only the leader decides preemptions), by "
    "outcome: ok (the leader's answer was relayed), error (unreachable, refused, not 200) or "
    "timeout (kubernetes.leaderElection.forwardTimeout); on error and timeout the follower "
    'answered {} (runway_preemptions_refused_total{reason="not-leader"}).',
    ["outcome"],
    registry=REGISTRY,
)
READS_FORWARDED = Counter(
    "runway_reads_forwarded_total",
    "REST reads of what only the leader holds (preemptions, decisions, the gate, explain, "
    "workloads) a follower forwarded to the leader, by outcome: ok (the leader's answer was "
    "relayed, a refusal included), error (unreachable, a 5xx) or timeout "
    "(kubernetes.leaderElection.readForwardTimeout); on error and timeout, and when no leader's "
    "REST address is known (unknown), the follower answered from its own memory, marked "
    "X-Runway-Served-By: follower (...).",
    ["outcome"],
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
    "protected (dropped by min-runtime), budget (dropped by its workload's exhausted "
    "preemption budget alone), reselected (chosen instead of a protected one) or awaited "
    "(already going: another preemption in flight chose it, or it is terminating; not chosen "
    "again).",
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
JOBS_READABLE = Gauge(
    "runway_jobs_readable",
    "1 while runway reads batch/v1 Jobs (a Job's parallelism, no more than its completions, is "
    "PodsReady's target for its pods), else 0 (the API server refuses to list them, no RBAC "
    "permission; not listed yet; no API server): the target is then the most members the "
    "workload has had.",
    registry=REGISTRY,
)
RECORDS_AVAILABLE = Gauge(
    "runway_records_available",
    "1 while runway lists and watches its WorkloadRecords (runway.dev/v1alpha1), else 0: the API "
    "server refuses them (404: the CRD is not installed, kubectl apply -f helm/runway/crds/; "
    "403: no RBAC permission), they are not listed yet, or there is no API server (the embedded "
    "default keeps them in memory). At 0 runway is not ready, keeps no state and evicts nothing "
    "(alert RunwayRecordsUnavailable).",
    registry=REGISTRY,
)
DAEMONSETS_READABLE = Gauge(
    "runway_daemonsets_readable",
    "1 while runway reads apps/v1 DaemonSets (their UIDs: a pod is a DaemonSet's, never "
    "queued nor evicted for PodsReady, only when its controller reference names a DaemonSet "
    "runway has seen with that UID), else 0 (refused, not listed yet, no API server): then no "
    "pod counts as a DaemonSet's.",
    registry=REGISTRY,
)
LEADER = Gauge(
    "runway_leader",
    "1 while this replica holds the leader Lease (only the leader evicts), else 0.",
    registry=REGISTRY,
)

TLS_CERT_EXPIRY = Gauge(
    "runway_tls_certificate_expiry_timestamp_seconds",
    "When a certificate expires (notAfter, unix seconds), by certificate: serving (runway's, "
    "re-read on rotation), client-ca (the CA client certificates are checked against) and "
    "client (the last verified client certificate presented: kube-scheduler reads its own only "
    "at start).",
    ["certificate"],
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
    "unauthenticated, forbidden, limited: too many failed token checks from its source, "
    "unavailable).",
    ["scope", "result"],
    registry=REGISTRY,
)

BUILD_INFO = Gauge(
    "runway_build_info",
    "Always 1; the labels say which runway and which Python run.",
    ["version", "python"],
    registry=REGISTRY,
)
BUILD_INFO.labels(runway_version(), platform.python_version()).set(1)

# --- Requeue: eviction records, PodsReady evictions, filter rules (DESIGN §5) ---
EVICTED_WORKLOADS = Counter(
    "runway_evicted_workloads_total",
    "Workloads evicted, by leaf queue (`other`: not in the tree) and reason: PodsReadyTimeout "
    "(requeued with backoff), Deactivated (the PodsReady eviction that exceeded the requeue "
    "limit), Preempted (once per victim workload). Kueue's evicted_workloads_total.",
    ["queue", "reason"],
    registry=REGISTRY,
)
EVICTIONS = Counter(
    "runway_evictions_total",
    "Deprecated, kept for existing dashboards: runway_evicted_workloads_total summed over "
    "queues, by reason.",
    ["reason"],
    registry=REGISTRY,
)
REQUEUED_WORKLOADS = Counter(
    "runway_requeued_workloads_total",
    "Workloads put back in their queue: their requeue backoff ended (woken by the leader), "
    "by leaf queue.",
    ["queue"],
    registry=REGISTRY,
)
REACTIVATED_WORKLOADS = Counter(
    "runway_reactivated_workloads_total",
    "Workloads reactivated through `POST /v1/workloads/{ns}/{name}:activate`, by leaf queue and "
    "whether they were deactivated.",
    ["queue", "deactivated"],
    registry=REGISTRY,
)
WORKLOADS_BACKOFF = Gauge(
    "runway_workloads_backoff",
    "Workloads in requeue backoff (now < requeueAt), counted at each scrape.",
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
    "Pending (not admitted) workloads per leaf queue, counted at each scrape.",
    ["queue"],
    registry=REGISTRY,
)

BINDINGS = Counter(
    "runway_bindings_total",
    "Binds of pods runway manages seen by this replica, by whether its filter was called about "
    "the pod (filtered: yes, no). kube-scheduler calls one replica per cycle: binds with no "
    "`yes` on any replica mean kube-scheduler is skipping runway (alert RunwayBypassed).",
    ["filtered"],
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


# --- holds as scheduling gates (app/api/webhook.py, app/tasks/wakeup.py; DESIGN §5.8) ---
WEBHOOK_REVIEWS = Counter(
    "runway_gate_webhook_reviews_total",
    "Pod CREATE reviews answered by runway's mutating webhook (POST /webhooks/gate), by result: "
    "gated (the gate runway.dev/admission added), passed (not a pod runway manages, gates off, "
    "gated already), bad_request, error (answered allowed, no gate: the filter holds the pod).",
    ["result"],
    registry=REGISTRY,
)
WEBHOOK_DURATION = Histogram(
    "runway_gate_webhook_duration_seconds",
    "Time runway's mutating webhook took to answer one review (body read to reply).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
    registry=REGISTRY,
)
GATES_REMOVED = Counter(
    "runway_scheduling_gates_removed_total",
    "runway.dev/admission gates the leader removed because the admission chain admits the pod's "
    "workload (or runway does not manage the pod), by result: removed, gone (the pod went or "
    "changed: read again), error, dry_run.",
    ["result"],
    registry=REGISTRY,
)
HELD_PODS = Gauge(
    "runway_held_pods",
    "Pending pods runway holds now, by what holds them (leader, at each waker pass): "
    "schedulingGate (runway's gate: no scheduling cycle, no autoscaler demand) or filter "
    "(a filter rejection: kube-scheduler cycles the pod and it looks Unschedulable).",
    ["hold"],
    registry=REGISTRY,
)


QUEUE_TREE_UPDATES = Counter(
    "runway_queue_tree_updates_total",
    "Rebuilds of the queue tree from KAI Queue objects (queueSource: kai/auto), by result: "
    "applied, or invalid (the last good tree stays; the error is logged and in GET /v1/queues).",
    ["result"],
    registry=REGISTRY,
)

RECORD_WRITE_FAILURES = Counter(
    "runway_record_write_failures_total",
    "WorkloadRecord writes that failed, by reason: invalid (the record's schema refused it), "
    "forbidden (RBAC, or the namespace's ResourceQuota on workloadrecords), foreign (a record of "
    "another workload holds the name), capped (the namespace holds kubernetes.recordsPerNamespace "
    "records), conflict, unavailable, error. The workload's state is then kept in memory only "
    "and written again after a backoff (1 s doubling to 5 min); its pods are evicted and "
    "preempted all the same.",
    ["reason"],
    registry=REGISTRY,
)
RECORDS_UNWRITTEN = Gauge(
    "runway_records_unwritten",
    "Workloads whose state this replica keeps in memory only because their WorkloadRecord "
    "could not be written (runway_record_write_failures_total).",
    registry=REGISTRY,
)

# --- Kubernetes Events (app/kube/events.py) ---
EVENTS = Counter(
    "runway_events_total",
    "Kubernetes Events by reason and result: created, patched (count + 1 on a repeat), "
    "dropped (spam filter or full queue), error.",
    ["reason", "result"],
    registry=REGISTRY,
)


def count_eviction(queue: str, reason: str) -> None:
    """One workload evicted from ``queue`` for ``reason`` (both eviction counters)."""
    EVICTED_WORKLOADS.labels(queue_label(queue), reason).inc()
    EVICTIONS.labels(reason).inc()


LOOP_RESTARTS = Counter(
    "runway_loop_restarts_total",
    "Background loops restarted after an unexpected error or end, by loop (reflector-pods, "
    "reflector-nodes, workloadrecords, leader-election, gate-keeper, podsready, requeue-waker...).",
    ["loop"],
    registry=REGISTRY,
)
INVALID_OBJECTS = Counter(
    "runway_invalid_objects_total",
    "Cluster objects carrying a value runway cannot use, by field (min-available, "
    "owner-reference, state-annotation: a retired runway.dev state annotation, never read; "
    "namespace-labels: more labels than runway keeps, matched by no namespaceSelector); "
    "counted once per object version, the value is ignored for that object.",
    ["field"],
    registry=REGISTRY,
)
QUEUE_DENIED = Counter(
    "runway_queue_denied_total",
    "Pods naming a queue their namespace may not use (the queue's `namespaces` or "
    "`namespaceSelector`), queued in `default` instead; counted once per pod version, and "
    "again when a change of its namespace's labels denies it, by the queue named.",
    ["queue"],
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


_SCRAPE_HOOKS: list[Callable[[], Generator[None, None, None]]] = []


def on_scrape(hook: Callable[[], Generator[None, None, None]]) -> Callable[[], None]:
    """Run ``hook``'s pass before every exposition (gauges that are costly to keep current, e.g.
    a count over every workload, are computed when Prometheus asks, not in a background loop);
    returns the function that removes it. The pass yields between small pieces of work, so
    ``/metrics`` lets the verbs run meanwhile (``scrape_passes``); it must not raise."""
    _SCRAPE_HOOKS.append(hook)

    def remove() -> None:
        with contextlib.suppress(ValueError):
            _SCRAPE_HOOKS.remove(hook)

    return remove


def scrape_passes() -> list[Generator[None, None, None]]:
    """The scrape hooks' passes, for a caller that runs them sharing the loop
    (``supervise.in_slices``) before ``exposition(passes_run=True)``."""
    return [hook() for hook in list(_SCRAPE_HOOKS)]


def exposition(*, passes_run: bool = False) -> bytes:
    """The registry in Prometheus text format (the scrape hooks' passes run first, in one go,
    unless the caller ran them)."""
    if not passes_run:
        for steps in scrape_passes():
            for _ in steps:
                pass
    return generate_latest(REGISTRY)


# --- the README's table ---------------------------------------------------------------------

REFERENCE_START = (
    "<!-- metrics-reference:start (python -m app metrics-reference --write README.md) -->"
)
REFERENCE_END = "<!-- metrics-reference:end -->"


def _reference_rows() -> list[tuple[str, str, tuple[str, ...], str]]:
    """runway's own metrics, in declaration order: (name, type, labels, meaning)."""
    rows: list[tuple[str, str, tuple[str, ...], str]] = []
    for metric in globals().values():
        if isinstance(metric, VerbCalls):
            rows += metric.reference_rows()
        elif isinstance(metric, Counter | Gauge | Histogram):
            kind = metric._type  # prometheus_client keeps these on the wrapper
            name = metric._name + ("_total" if kind == "counter" else "")
            rows.append((name, kind, tuple(metric._labelnames), metric._documentation))
    return rows


def reference() -> str:
    """The metrics table of the README, generated from the registry (with the markers)."""
    lines = [REFERENCE_START, "", "| metric | type | labels | meaning |", "|---|---|---|---|"]
    for name, kind, labelnames, doc in _reference_rows():
        labels = ", ".join(f"`{label}`" for label in labelnames)
        meaning = doc.replace("|", "\\|")
        lines.append(f"| `{name}` | {kind} | {labels} | {meaning} |")
    lines.append(
        "| "
        + ", ".join(f"`{n}`" for n in STANDARD_SERIES)
        + " | | | the standard process, garbage-collector and platform collectors |"
    )
    lines += ["", REFERENCE_END]
    return "\n".join(lines) + "\n"


def splice_reference(text: str) -> str:
    """``text`` (the README) with the part between the markers replaced by ``reference()``."""
    start, end = text.find(REFERENCE_START), text.find(REFERENCE_END)
    if start < 0 or end < start:
        raise ValueError(f"markers {REFERENCE_START!r} ... {REFERENCE_END!r} not found")
    return text[:start] + reference() + text[end + len(REFERENCE_END) + 1 :]
