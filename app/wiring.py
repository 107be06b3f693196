"""The one place that builds runway: every long-lived part, built eagerly and wired together.

``build`` makes the parts from the config (with a ``KubeClient`` they talk to the cluster;
without one, the embedded default: an empty cache, records in memory, pod writes logged as
dry-run). Each part gets only the parts it needs; nothing is filled in on first use.
``Runway.start``/``stop`` run the background loops in the app's lifespan.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from app import metrics
from app.api.auth import Reviewer
from app.api.context import ApiContext
from app.clock import Clock, SystemClock
from app.config import RunwayConfig
from app.config.queues import MinRuntimeConfig
from app.kube.client import KubeClient
from app.kube.daemonsets import DaemonSetSource
from app.kube.dryrun import DryRunEventSink, DryRunPodWriter
from app.kube.events import KubeEventRecorder
from app.kube.jobs import JobSource
from app.kube.leader import LeaderElector, own_namespace
from app.kube.peers import LeaderForwarder, LeaderReader
from app.kube.pods import KubePodWriter
from app.kube.queues import KaiQueueSource
from app.kube.reviews import KubeReviewer
from app.kube.sync import ClusterSync
from app.kube.version import server_version
from app.kube.workloadrecords import KubeRecordStore
from app.logs import get_logger
from app.model.event import ObjectRef
from app.model.gate import PodRef
from app.model.owner import owner_of
from app.policy import minruntime
from app.policy.admission import FilterPolicy
from app.policy.budget import default_budget
from app.policy.ordering import QueueOrderStrategy
from app.policy.queues import QueueTree
from app.policy.releases import UNKNOWN as UNKNOWN_RELEASE
from app.policy.releases import Release, release_of
from app.policy.scope import Scope
from app.policy.shield import Shield
from app.policy.workload import DEFAULT_QUEUE, JOB_SOURCE, WorkloadKey
from app.state.bypass import BindWatch
from app.state.cache import ClusterCache
from app.state.decisions import DecisionLog
from app.state.gate import GateBook
from app.state.jobs import JobSizes
from app.state.owners import DaemonSets
from app.state.preemption import PreemptDecider
from app.state.records import MemoryRecords, RecordBook, RecordStore
from app.state.requeue import RequeueMemos, RequeueView
from app.state.validation import InvalidObjects
from app.tasks.gatekeeper import GateKeeper
from app.tasks.lifecycle import LifeRecorder
from app.tasks.podsready import PodsReadyEvictor
from app.tasks.ports import EventSink, PodApi
from app.tasks.preemption import PreemptionExecutor
from app.tasks.retention import RecordJanitor
from app.tasks.wakeup import RequeueWaker

log = get_logger("wiring")


@dataclass
class Runway:
    """Every long-lived part of one runway process."""

    config: RunwayConfig
    clock: Clock
    cache: ClusterCache
    queues: QueueTree
    gate: GateBook
    records: RecordBook
    requeue: RequeueView
    decisions: DecisionLog
    decider: PreemptDecider
    pods: PodApi
    executor: PreemptionExecutor
    gatekeeper: GateKeeper
    evictor: PodsReadyEvictor
    waker: RequeueWaker
    recorder: LifeRecorder
    """Persists the workloads' life facts (leader only)."""
    janitor: RecordJanitor
    """Deletes the records of long-gone workloads that hold nothing (leader only)."""
    events: EventSink
    """Kubernetes Events (written in the background; logged as dry-run without a cluster)."""
    jobs: JobSizes
    """The Jobs' sizes (PodsReady's target of a Job's workload; empty without a cluster)."""
    kube: KubeClient | None = None
    """The API server client; None on the embedded default (no cluster: writes are dry-run)."""
    sync: ClusterSync | None = None
    """The reflectors and leader election feeding ``cache`` (None without a cluster)."""
    record_store: KubeRecordStore | None = None
    """The WorkloadRecord list+watch and writes (None without a cluster: in memory)."""
    queue_source: KaiQueueSource | None = None
    """KAI Queue objects feeding ``queues`` (``queueSource: kai | auto`` with a cluster)."""
    job_source: JobSource | None = None
    """The Job list+watch feeding ``jobs`` (read only; None without a cluster)."""
    daemonset_source: DaemonSetSource | None = None
    """The DaemonSet list+watch (their UIDs: ``state.owners``; read only; None without a
    cluster)."""
    reviewer: Reviewer | None = None
    """REST auth's TokenReview + SubjectAccessReview (None without a cluster)."""
    forwarder: LeaderForwarder | None = None
    """A follower's ``preempt`` calls, relayed to the leader (None without an election)."""
    reader: LeaderReader | None = None
    """A follower's REST reads of what only the leader holds, asked of the leader (None
    without an election)."""
    bypass: BindWatch | None = None
    """Counts binds of managed pods by whether this replica filtered them (``state.bypass``;
    None without a cluster: nothing binds)."""
    synced: bool = field(default=False)
    """True once the caches are listed (at once on the embedded default)."""
    release: Release = field(default=UNKNOWN_RELEASE)
    """The kube-scheduler release runway serves (``detect_release`` at start)."""

    # -- what the REST API asks about the cluster (``app.api.context.ClusterInfo``) ------------

    @property
    def connected(self) -> bool:
        """Whether runway talks to an API server."""
        return self.kube is not None

    @property
    def ready(self) -> bool:
        """``/readyz``: the caches (pods, nodes, and the workload records) are synced and
        still being fed (no list/watch failing for longer than ``kubernetes.cacheStaleAfter``),
        the background loops run. Always true on the embedded default but for the loops."""
        return self.not_ready is None

    @property
    def not_ready(self) -> str | None:
        """Why ``ready`` is False, in words for ``/readyz`` (None: ready)."""
        loops = (self.gatekeeper, self.evictor, self.waker)
        stopped = [t.name for t in loops if t.started and not t.alive]
        if stopped:
            return f"background loop(s) not running: {', '.join(stopped)}"
        if self.kube is None:
            return None
        store = self.record_store
        if store is not None and store.error is not None:
            return store.error  # the CRD missing (or no permission): what to do about it
        if not self.synced:
            return "caches not synced"
        stale_after = self.config.kubernetes.cache_stale_after
        if self.sync is not None and not self.sync.feeding(stale_after):
            return "caches not synced: pod or node list/watch failing"
        if store is not None and not store.feeding(stale_after):
            return "caches not synced: WorkloadRecord list/watch failing"
        return None

    @property
    def leader(self) -> LeaderElector | None:
        """The Lease elector (None without a cluster or with leader election off)."""
        return self.sync.leader if self.sync is not None else None

    def is_leader(self) -> bool:
        """Whether this replica may run leader-only work. True without election."""
        leader = self.leader
        return leader.is_leader if leader is not None else True

    @property
    def leadership(self) -> bool | None:
        """``is_leader()``, or None when there is no election."""
        return self.leader.is_leader if self.leader is not None else None

    @property
    def identity(self) -> str | None:
        """This replica's identity in the election."""
        return self.leader.identity if self.leader is not None else None

    @property
    def queue_origin(self) -> str:
        """Where the queue tree comes from now: ``file`` or ``kai``."""
        source = self.queue_source
        return "kai" if source is not None and source.active else "file"

    @property
    def queue_error(self) -> str | None:
        """Why the last change of the Queue objects was refused (None: the tree is current)."""
        return self.queue_source.error if self.queue_source is not None else None

    @property
    def jobs_readable(self) -> bool | None:
        """Whether runway reads Jobs' sizes: False while the API server refuses (no
        permission), None before its first answer or without a cluster."""
        return self.job_source.readable if self.job_source is not None else None

    @property
    def job_count(self) -> int:
        """Jobs whose size runway knows."""
        return len(self.jobs)

    @property
    def pod_resource_version(self) -> str | None:
        """The pod reflector's resourceVersion."""
        return self.sync.pods.resource_version if self.sync is not None else None

    @property
    def node_resource_version(self) -> str | None:
        """The node reflector's resourceVersion."""
        return self.sync.nodes.resource_version if self.sync is not None else None

    def api_context(self) -> ApiContext:
        """The parts the HTTP layer reads."""
        return ApiContext(
            config=self.config,
            clock=self.clock,
            cache=self.cache,
            queues=self.queues,
            gate=self.gate,
            records=self.records,
            requeue=self.requeue,
            decider=self.decider,
            decisions=self.decisions,
            executor=self.executor,
            cluster=self,
            events=self.events,
            forwarder=self.forwarder,
            reads=self.reader,
            bypass=self.bypass,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    async def detect_release(self) -> Release:
        """The scheduler's release: ``kubernetes.schedulerVersion``, else the API server's
        ``/version``, else 1.20's behaviour; applied to what runway does for the scheduler
        (the preemption mode on ``preemption.async: auto``, the preempt reply's nodes) and
        logged with what an operator should know of it."""
        configured = self.config.kubernetes.scheduler_version
        release = UNKNOWN_RELEASE
        try:
            if configured:
                release = release_of(configured, "config")
            elif self.kube is not None:
                release = release_of(await server_version(self.kube), "apiserver")
        except Exception as exc:  # never fatal: an unknown release is 1.20's behaviour
            log.warning(
                "kube-scheduler's release unknown: runway behaves as for 1.20; set "
                "kubernetes.schedulerVersion",
                error=str(exc),
            )
        self.release = release
        self.decider.release = release
        gates = release.gates(self.config.admission.scheduling_gates)
        if self.record_store is not None:
            self.record_store.hold_by = "schedulingGate" if gates else "filter"
        mode = self.config.preemption.async_
        self.executor.takeover = release.takeover(mode)
        log.info(
            "kube-scheduler release",
            version=release.text,
            source=release.source,
            preemption="takeover" if self.executor.takeover else "scheduler-executes",
            chosen_by="release" if mode == "auto" else "preemption.async",
            config_api=release.config_api,
            holds="schedulingGate" if gates else "filter",
        )
        for note in release.notes(self.config.admission.scheduling_gates):
            log.warning(note, release=release.text)
        return release

    async def start(self) -> None:
        """Start the reflectors, wait (bounded) for the eviction records, start the loops."""
        await self.detect_release()
        if isinstance(self.events, KubeEventRecorder):
            self.events.start()
        if self.sync is not None:
            self.sync.start()
            if self.queues.uses_selectors() or self.cache.scope.uses_namespace_labels:
                # the file's tree or scope.namespaceSelector; KAI's tree: when adopted
                self.sync.watch_namespaces()
        if self.job_source is not None:
            self.job_source.start()
        if self.daemonset_source is not None:
            self.daemonset_source.start()
        if self.queue_source is not None:
            self.queue_source.start()
            if not await self.queue_source.wait_synced(
                self.config.kubernetes.startup_records_timeout
            ):
                log.warning("KAI Queue objects not listed at startup; serving anyway")
        within = self.config.kubernetes.startup_records_timeout
        waiting_since = time.monotonic()
        # Serve nothing until the eviction records are read back: a filter answered without them
        # would let a workload out of its backoff early after a restart. Bounded (below the
        # liveness probe's window); past it the records arrive through the watch.
        if self.sync is not None and not await self.load_records(within):
            store = self.record_store
            if store is None or store.error is None:
                log.warning("eviction records not all loaded at startup; serving anyway")
            # else: refused (no CRD): the store said why and what to do, once; not ready
        # A selector read against namespaces not listed yet would deny their pods: wait for the
        # labels too, and for the Jobs' sizes, within the same bound (only when they are watched).
        left = max(0.0, within - (time.monotonic() - waiting_since))
        if self.sync is not None and not await self.sync.namespaces_synced(left):
            log.warning("namespaces not listed at startup; serving anyway")
        left = max(0.0, within - (time.monotonic() - waiting_since))
        if self.job_source is not None and not await self.job_source.wait_settled(left):
            # Until they are: PodsReady's target for a Job's pods is the members it has had.
            log.warning("Jobs not listed at startup; serving anyway")
        left = max(0.0, within - (time.monotonic() - waiting_since))
        if self.daemonset_source is not None and not await self.daemonset_source.wait_settled(left):
            # Until they are: no pod counts as a DaemonSet's (none is evicted before a timeout).
            log.warning("DaemonSets not listed at startup; serving anyway")
        self.gatekeeper.start()
        # PodsReady timeouts: runs on every replica (gauges), evicts on the leader only.
        self.evictor.start()
        # Holds that end (backoff, reactivation, preemptor bound...) wake the pods (leader only).
        self.waker.start()
        # Workload life facts (created, admitted, started) persisted as they become known.
        self.recorder.start()
        self.janitor.start()

    async def stop(self) -> None:
        """Stop the loops, drain the preemptions, stop watching."""
        await self.janitor.stop()
        await self.recorder.stop()
        await self.waker.stop()
        await self.evictor.stop()
        await self.gatekeeper.stop()
        await self.executor.drain(self.config.preemption.shutdown_grace)
        if self.record_store is not None:
            await self.record_store.stop()
        if self.queue_source is not None:
            await self.queue_source.stop()
        if self.job_source is not None:
            await self.job_source.stop()
        if self.daemonset_source is not None:
            await self.daemonset_source.stop()
        if self.sync is not None:
            await self.sync.stop()
        if isinstance(self.events, KubeEventRecorder):
            await self.events.stop()
        if self.forwarder is not None:
            await self.forwarder.aclose()
        if self.reader is not None:
            await self.reader.aclose()

    async def load_records(self, within: float = 5.0) -> bool:
        """At startup: wait (bounded) until the workload records are listed, so the first
        filter calls already see every record. Returns False when the bound passed first (the
        records then arrive a little later)."""
        if self.record_store is None:
            return True
        self.record_store.start()
        return await self.record_store.wait_synced(within)


def same_queue_protection(
    cache: ClusterCache,
    queues: QueueTree,
    min_runtime: MinRuntimeConfig,
    key: WorkloadKey,
    started: float,
) -> float | None:
    """``minruntime.same_queue_protected_until`` for workload ``key``, with its facts from the
    cache: its queue (``ClusterCache.queue_of_pod``) and the labels of the node its first bound
    pod runs on."""
    pods = cache.workload_pods(key)
    queue = cache.queue_of_pod(pods[0]) if pods else DEFAULT_QUEUE
    node = next((p.spec.nodeName for p in pods if p.spec.nodeName), None)
    labels = cache.node_labels(node) if node else None
    return minruntime.same_queue_protected_until(queues, min_runtime, queue, labels, started)


def advertise_url(config: RunwayConfig, environ: Mapping[str, str]) -> str | None:
    """Where the other replicas reach this one's verbs (``leaderElection.advertiseURL``, else
    ``POD_IP`` with the server's scheme, port and urlPrefix; None: neither)."""
    configured = config.kubernetes.leader_election.advertise_url
    if configured:
        return configured.rstrip("/")
    ip = environ.get("POD_IP", "").strip()
    if not ip:
        return None
    server = config.server
    host = f"[{ip}]" if ":" in ip else ip
    scheme = "https" if server.tls.enabled else "http"
    return f"{scheme}://{host}:{server.port}{server.url_prefix}"


def advertise_rest_url(config: RunwayConfig, environ: Mapping[str, str]) -> str | None:
    """Where the other replicas reach this one's REST API: ``advertiseURL``'s scheme and host
    without the verbs' prefix, else ``POD_IP`` with the server's scheme; on ``server.restPort``
    when set, else on ``port`` (None: neither address)."""
    server = config.server
    configured = config.kubernetes.leader_election.advertise_url
    if configured:
        parts = urlsplit(configured.rstrip("/"))
        path = parts.path.removesuffix(server.url_prefix)
        netloc = parts.netloc
        if server.rest_port is not None:
            host = parts.hostname or ""
            host = f"[{host}]" if ":" in host else host
            netloc = f"{host}:{server.rest_port}"
        return urlunsplit((parts.scheme, netloc, path, "", "")).rstrip("/")
    ip = environ.get("POD_IP", "").strip()
    if not ip:
        return None
    host = f"[{ip}]" if ":" in ip else ip
    scheme = "https" if server.tls.enabled else "http"
    return f"{scheme}://{host}:{server.rest_port or server.port}"


def build(
    config: RunwayConfig | None = None,
    clock: Clock | None = None,
    *,
    kube: KubeClient | None = None,
) -> Runway:
    """Every part of runway for ``config`` (the embedded default when None), in four steps
    that read top to bottom: the cluster's state, the Kubernetes edge (everything that talks to
    the API server; the in-memory and dry-run stand-ins without ``kube``), the decisions and
    tasks over both, then one explicit ``_connect`` of the callbacks that point back up."""
    config = config or RunwayConfig()
    clock = clock or SystemClock()
    home = own_namespace(kube.access.namespace) if kube is not None else None
    state = _cluster_state(config, home)
    edge = _kube_edge(config, clock, kube, state)
    runway = _decisions_and_tasks(config, clock, kube, home, state, edge)
    _connect(runway, state, edge)
    return runway


@dataclass
class _State:
    """The cluster's state before any decision: the cache and what indexes it."""

    cache: ClusterCache
    queues: QueueTree
    index: RequeueMemos
    gate: GateBook
    jobs: JobSizes
    daemonsets: DaemonSets
    """The DaemonSets runway has read (an empty store without a cluster: no pod is one's)."""


def _cluster_state(config: RunwayConfig, home: str | None) -> _State:
    pre = config.preemption
    scope = Scope.from_config(config.scope, pre.scheduler_names, pre.protected_namespaces, home)
    queues = QueueTree.from_config(config.queues)
    metrics.set_queue_names([DEFAULT_QUEUE, *(q.name for q in queues)])
    # the tree's namespace permissions decide each pod's queue; the shield reads the release's
    # labels (preemption.protectedPodLabels): keep them
    cache = ClusterCache(
        queues, invalid=InvalidObjects(), scope=scope, keep_labels=pre.protected_pod_labels
    )
    gate = GateBook(cache, gate_bound_s=pre.gate_timeout)
    return _State(cache, queues, RequeueMemos(), gate, JobSizes(), DaemonSets())


@dataclass
class _Edge:
    """What talks to the API server (or stands in for it on the embedded default)."""

    sync: ClusterSync | None
    leader: LeaderElector | None
    store: RecordStore
    record_store: KubeRecordStore | None
    pods: PodApi
    events: EventSink
    queue_source: KaiQueueSource | None
    job_source: JobSource | None
    daemonset_source: DaemonSetSource | None
    reviewer: Reviewer | None
    forwarder: LeaderForwarder | None
    reader: LeaderReader | None

    def is_leader(self) -> bool:
        """Whether this replica acts as the leader (always, without an election)."""
        return self.leader.is_leader if self.leader is not None else True

    @property
    def identity(self) -> str:
        """This replica's identity in the election ("" without one)."""
        return self.leader.identity if self.leader is not None else ""


def _kube_edge(config: RunwayConfig, clock: Clock, kube: KubeClient | None, state: _State) -> _Edge:
    if kube is None:
        return _Edge(
            sync=None,
            leader=None,
            store=MemoryRecords(),
            record_store=None,
            pods=DryRunPodWriter(),
            events=DryRunEventSink(),
            queue_source=None,
            job_source=None,
            daemonset_source=None,
            reviewer=None,
            forwarder=None,
            reader=None,
        )
    k8s, cache = config.kubernetes, state.cache
    sync = ClusterSync(
        kube,
        cache.pod_store,
        cache.node_store,
        k8s,
        namespaces=cache.namespace_store,
        advertise=advertise_url(config, os.environ),
        advertise_rest=advertise_rest_url(config, os.environ),
    )
    leader = sync.leader
    record_store = KubeRecordStore(
        kube,
        clock,
        page_size=k8s.page_size,
        watch_timeout=int(k8s.watch_timeout),
        records_per_namespace=k8s.records_per_namespace,
    )
    queue_source = None
    if config.queue_source != "file":

        def adopt(tree: QueueTree) -> None:
            state.queues.adopt(tree)
            if tree.uses_selectors():
                sync.watch_namespaces()  # a Queue object's selector: labels matter from now on
            cache.reindex_queues()
            metrics.set_queue_names([DEFAULT_QUEUE, *(q.name for q in state.queues)])
            state.index.bump_facts()

        queue_source = KaiQueueSource(
            kube,
            adopt,
            mode=config.queue_source,
            page_size=k8s.page_size,
            watch_timeout=int(k8s.watch_timeout),
        )
    election = k8s.leader_election
    return _Edge(
        sync=sync,
        leader=leader,
        store=record_store,
        record_store=record_store,
        pods=KubePodWriter(kube),
        events=KubeEventRecorder(kube, clock, instance=leader.identity if leader else ""),
        queue_source=queue_source,
        job_source=JobSource(
            kube,
            state.jobs,
            page_size=k8s.page_size,
            watch_timeout=int(k8s.watch_timeout),
            batch_window=k8s.watch_batch_window,
        ),
        daemonset_source=DaemonSetSource(
            kube,
            state.daemonsets,
            page_size=k8s.page_size,
            watch_timeout=int(k8s.watch_timeout),
            batch_window=k8s.watch_batch_window,
        ),
        reviewer=KubeReviewer(kube, config.auth.audiences),
        forwarder=LeaderForwarder(
            lambda: leader.leader_url,
            config.server.tls,
            ca_file=election.forward_ca_file,
            identity=leader.identity,
            timeout=election.forward_timeout,
        )
        if leader is not None
        else None,
        reader=LeaderReader(
            leader.leader_known,
            lambda: leader.leader_rest_url,
            config.server.tls,
            ca_file=election.forward_ca_file,
            identity=leader.identity,
            timeout=election.read_forward_timeout,
            # The REST API on the verbs' port may ask for a certificate to connect at all.
            present_certificate=config.server.rest_port is None,
        )
        if leader is not None
        else None,
    )


def _decisions_and_tasks(
    config: RunwayConfig,
    clock: Clock,
    kube: KubeClient | None,
    home: str | None,
    state: _State,
    edge: _Edge,
) -> Runway:
    pre, cache, queues, gate = config.preemption, state.cache, state.queues, state.gate
    records = RecordBook(
        cache,
        config.wait_for_pods_ready.requeuing_strategy,
        clock,
        queues=queues,
        store=edge.store,
        default_budget=default_budget(config.min_runtime),
        queue_of_pod=cache.queue_of_pod,
        protection=lambda key, started: same_queue_protection(
            cache, queues, config.min_runtime, key, started
        ),
        jobs=state.jobs,
        on_change=state.index.bump_facts,
        on_life_change=state.index.bump,
        daemonsets=state.daemonsets,
    )
    requeue = RequeueView(
        cache,
        records,
        gate,
        queues,
        pods_ready=config.wait_for_pods_ready,
        order=QueueOrderStrategy.from_sections(config.wait_for_pods_ready, config.requeue_strategy),
        policy=FilterPolicy(anti_flapping_seconds=config.requeue_strategy.anti_flapping_timeout),
        pool_label=config.min_runtime.pool_label,
        index=state.index,
        pool_preference=config.prioritize.pool_preference_on(config.wait_for_pods_ready.enable),
        locality=config.prioritize.locality,
    )
    decisions = DecisionLog(
        pre.decision_history,
        max_bytes=pre.decision_history_bytes,
        max_nodes=pre.decision_max_nodes,
    )

    def owners_of(pod: PodRef) -> tuple[ObjectRef, ...]:
        cached = cache.pod(pod.uid)
        ref = owner_of(cached) if cached is not None else None
        return (ObjectRef.of_owner(ref),) if ref is not None else ()

    executor = PreemptionExecutor(
        edge.pods,
        gate,
        clock,
        concurrency=pre.max_concurrent_tasks,
        victim_parallelism=pre.victim_parallelism,
        gate_bound_s=pre.gate_timeout,
        history=pre.history,
        identity=edge.identity,
        recorder=records,
        takeover=UNKNOWN_RELEASE.takeover(pre.async_),  # the release's, once detected
        events=edge.events,
        owners_of=owners_of,
    )
    decider = PreemptDecider(
        cache,
        queues,
        config.min_runtime,
        gate,
        decisions,
        clock,
        verify=kube is not None,
        scheduler_names=pre.scheduler_names,
        records=records,
        shield=Shield.from_config(pre, home),
        scheduler_executes=lambda: not executor.takeover,
    )

    is_leader = edge.is_leader
    return Runway(
        config=config,
        clock=clock,
        cache=cache,
        queues=queues,
        gate=gate,
        records=records,
        requeue=requeue,
        decisions=decisions,
        decider=decider,
        pods=edge.pods,
        executor=executor,
        gatekeeper=GateKeeper(
            gate,
            cache,
            executor,
            edge.pods,
            clock,
            is_leader=is_leader,
            mirror=records,
            scheduler_names=tuple(pre.scheduler_names),
            # takeover where a touch re-queues nothing (1.32+): runway re-runs a failed
            # preemption's calls when its back-off ends (DESIGN §4.4)
            rerun_failed=lambda: executor.takeover and not decider.release.touch_requeues,
        ),
        evictor=PodsReadyEvictor(
            requeue,
            records,
            edge.pods,
            clock,
            config.wait_for_pods_ready,
            pool_label=config.min_runtime.pool_label,
            is_leader=is_leader,
            events=edge.events,
        ),
        waker=RequeueWaker(
            requeue,
            edge.pods,
            clock,
            is_leader=is_leader,
            dry_run=kube is None,
            awaited=decider.awaited,
        ),
        recorder=LifeRecorder(cache, records, is_leader=is_leader),
        janitor=RecordJanitor(
            records, clock, config.kubernetes.record_retention, is_leader=is_leader
        ),
        bypass=BindWatch(cache, clock) if kube is not None else None,
        events=edge.events,
        jobs=state.jobs,
        kube=kube,
        sync=edge.sync,
        record_store=edge.record_store,
        queue_source=edge.queue_source,
        job_source=edge.job_source,
        daemonset_source=edge.daemonset_source,
        reviewer=edge.reviewer,
        forwarder=edge.forwarder,
        reader=edge.reader,
    )


def _connect(runway: Runway, state: _State, edge: _Edge) -> None:
    """The callbacks that point from a part back to one built after it, all here."""
    cache, index = state.cache, state.index
    cache.subscribe(index.bump)
    # a namespace relabelled moves pods between queues: every requeue memo is stale
    cache.queue_listeners.append(index.bump_facts)

    def job_changed(namespace: str, name: str) -> None:
        # A Job's size appeared, changed or went: PodsReady of its workload may have moved
        # (the record book's memo compares the size itself), and its created fact (the Job's
        # creation, read after its pods); nothing to do without its pods.
        key = WorkloadKey(namespace, name, JOB_SOURCE)
        if cache.has_workload(key):
            index.bump_facts()
            runway.requeue.workload_changed(key)
            runway.recorder.workload_changed(key)

    state.jobs.on_change = job_changed
    # A DaemonSet appeared, went or was re-created: whether its pods are queued moved.
    state.daemonsets.on_change = index.bump_facts
    runway.records.on_gates = state.gate.set_mirrored
    # A failed preemption's back-off ends in the gate keeper; the waker touches the preemptor.
    runway.gatekeeper.on_retry = runway.waker.wake_retry
    if edge.sync is not None:

        def synced() -> None:
            runway.synced = True

        edge.sync.on_synced = synced
        # Verbs drive the pod watch: one about a pod not cached yet, preempt and a filter
        # rejection have it apply what has arrived on its socket first.
        cache.feed = edge.sync.pods
