"""Builders for the objects tests make again and again: pods and nodes (raw API dicts and the
msgspec ``app.model`` types), Jobs, the bound/Ready status a kubelet would write, queue trees,
and runway's parts with test defaults (``cluster_cache``, ``record_book``,
``preemption_executor``: production passes every argument, app/wiring.py).

``raw_pod``/``raw_node`` emit only the fields they are given; ``pod_obj``/``job_obj`` are the
objects "as the API server returns them" (resourceVersion, creationTimestamp, empty maps).
``pod``/``node`` convert a raw dict to ``Pod``/``Node`` the way the reflector decodes it, ``job``
to the ``Job`` runway reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from hypothesis import strategies as st

from app.clock import Clock, ManualClock
from app.config import RunwayConfig, parse_config
from app.config.preemption import PreemptionConfig
from app.config.requeue import RequeuingStrategyConfig
from app.model import Pod
from app.model.eviction import EvictionRecord
from app.model.job import Job
from app.model.lifecycle import Life
from app.model.node import Node
from app.model.timestamps import format_time
from app.policy.budget import NO_BUDGET, PreemptionBudget
from app.policy.queues import QueueNode, QueueTree
from app.policy.scope import EVERY_POD, Scope
from app.policy.workload import WorkloadKey
from app.state.cache import ClusterCache
from app.state.gate import GateBook
from app.state.jobs import JobSizes
from app.state.owners import DaemonSets
from app.state.records import MemoryRecords, RecordBook, RecordStore
from app.state.validation import InvalidObjects
from app.tasks.ports import PodApi
from app.tasks.preemption import PreemptionExecutor

CREATED = "2027-01-15T08:00:00Z"


# --- pods ---------------------------------------------------------------------------------------


def raw_pod(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    resource_version: str | None = None,
    created: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    job: str | None = None,
    job_uid: str | None = None,
    node: str | None = None,
    priority: int | None = None,
    containers: list[dict[str, Any]] | None = None,
    phase: str | None = None,
    start_time: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod dict with only the given fields (``uid`` defaults to ``uid-<name>``; ``job`` adds a
    controlling Job ownerReference with ``job_uid``, default ``uid-job-<job>``)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"}
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if created is not None:
        meta["creationTimestamp"] = created
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    if job:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job,
                "uid": job_uid or f"uid-job-{job}",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"nodeName": node}
    if priority is not None:
        spec["priority"] = priority
    if containers is not None:
        spec["containers"] = containers
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if start_time is not None:
        status["startTime"] = start_time
    if conditions is not None:
        status["conditions"] = conditions
    obj: dict[str, Any] = {"metadata": meta, "spec": spec}
    if status:
        obj["status"] = status
    return obj


def pod_obj(
    name: str,
    *,
    namespace: str = "team",
    job: str | None = None,
    node: str | None = None,
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as the API server returns it (owned by Job ``job`` when given)."""
    return raw_pod(
        name,
        namespace=namespace,
        uid=uid,
        resource_version="1",
        created=CREATED,
        labels=labels or {},
        annotations=annotations or {},
        job=job,
        node=node,
        phase="Pending",
    )


def pod(obj: dict[str, Any]) -> Pod:
    """The ``Pod`` a raw pod dict decodes to."""
    return msgspec.convert(obj, Pod)


def condition(type_: str, status: bool | str, at: str | None) -> dict[str, Any]:
    """A pod condition (``status`` as a bool or "True"/"False")."""
    text = status if isinstance(status, str) else str(status)
    return {"type": type_, "status": text, "lastTransitionTime": at}


def bind(
    obj: dict[str, Any], at: float, *, ready: bool = False, node: str = "n1"
) -> dict[str, Any]:
    """What kube-scheduler and the kubelet write: bound to ``node`` and Running since ``at``,
    Ready or not. Changes ``obj`` in place and returns it."""
    t = format_time(at)
    obj["spec"]["nodeName"] = node
    obj["status"] = {
        "phase": "Running",
        "startTime": t,
        "conditions": [condition("PodScheduled", True, t), condition("Ready", ready, t)],
    }
    return obj


def queued_pod(
    name: str,
    queue: str,
    *,
    namespace: str = "team",
    created: float | None = None,
    bound: float | None = None,
    node: str = "n1",
) -> Pod:
    """A pod that is workload ``name`` (``runway.dev/workload``) of leaf queue ``queue``,
    created at ``created`` and, when ``bound`` is given, Running on ``node`` since then."""
    labels = {"runway.dev/queue": queue, "runway.dev/workload": name}
    obj = pod_obj(name, namespace=namespace, labels=labels)
    if created is not None:
        obj["metadata"]["creationTimestamp"] = format_time(created)
    if bound is not None:
        bind(obj, bound, node=node)
    return pod(obj)


# --- Jobs and nodes -----------------------------------------------------------------------------


def job_obj(
    name: str, namespace: str = "team", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Job with a big spec runway must not keep."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-job-{name}",
            "resourceVersion": "10",
            "annotations": {"other.io/x": "y", **(annotations or {})},
        },
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


def job(
    name: str,
    namespace: str = "team",
    *,
    uid: str | None = None,
    parallelism: int | None = 2,
    completions: int | None = None,
) -> Job:
    """The ``Job`` runway reads of ``job_obj(name, namespace)`` with these counts (``uid``
    defaults to ``uid-job-<name>``, what ``raw_pod(job=name)`` names as the controller)."""
    obj = job_obj(name, namespace)
    obj["spec"].pop("parallelism")
    if parallelism is not None:
        obj["spec"]["parallelism"] = parallelism
    if completions is not None:
        obj["spec"]["completions"] = completions
    if uid is not None:
        obj["metadata"]["uid"] = uid
    obj["status"] = {"active": 2, "ready": 1, "succeeded": 0}
    return msgspec.convert(obj, Job)


def raw_node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    uid: str | None = None,
    allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A node dict with only the given fields."""
    meta: dict[str, Any] = {"name": name}
    if uid is not None:
        meta["uid"] = uid
    if labels is not None:
        meta["labels"] = labels
    obj: dict[str, Any] = {"metadata": meta}
    if allocatable is not None:
        obj["status"] = {"allocatable": allocatable}
    return obj


def node(name: str, **fields: Any) -> Node:
    """The ``Node`` that ``raw_node(name, **fields)`` decodes to."""
    return msgspec.convert(raw_node(name, **fields), Node)


def pool_node(name: str, pool: str) -> Node:
    """A node in pool ``pool`` (the ``runway.dev/pool`` label)."""
    return node(name, labels={"runway.dev/pool": pool})


# --- queue trees --------------------------------------------------------------------------------


def tree_of(queues: dict[str, dict[str, Any]]) -> QueueTree:
    """A tree from an upstream case's ``queues`` map (``parent: ""`` = top-level)."""
    return QueueTree.from_nodes(
        QueueNode(
            name=name,
            parent=q.get("parent") or None,
            preempt_min_runtime_s=q.get("preemptMinRuntime_s"),
            reclaim_min_runtime_s=q.get("reclaimMinRuntime_s"),
        )
        for name, q in queues.items()
    )


@st.composite
def forests(draw: st.DrawFn, max_size: int = 12) -> QueueTree:
    """Random forests: each queue's parent is an earlier queue or none; settings None/0/positive."""
    n = draw(st.integers(0, max_size))
    setting = st.one_of(st.none(), st.just(0.0), st.integers(1, 10_000).map(float))
    nodes = []
    for i in range(n):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        nodes.append(
            QueueNode(
                name=f"q{i}",
                parent=None if parent is None else f"q{parent}",
                preempt_min_runtime_s=draw(setting),
                reclaim_min_runtime_s=draw(setting),
            )
        )
    return QueueTree.from_nodes(nodes)


def queue_names(tree: QueueTree) -> st.SearchStrategy[str]:
    """A known queue of ``tree`` or a name the config does not declare."""
    unknown = st.sampled_from(["default", "ghost", "q99"])
    known = [n.name for n in tree]
    return st.one_of(st.sampled_from(known), unknown) if known else unknown


UNQUEUED_MANAGED: dict[str, Any] = {"manageWithoutQueue": True}
"""``scope`` for tests whose pods name no queue: runway manages them all (DESIGN §2.0; the
default manages only pods that name a queue, tested in ``unit/policy/test_scope.py``)."""


def runway_config(raw: dict[str, Any] | None = None) -> RunwayConfig:
    """runway's config ``raw`` for a test whose pods name no queue: ``scope`` manages them
    (``UNQUEUED_MANAGED``) unless ``raw`` sets its own."""
    return parse_config({"scope": UNQUEUED_MANAGED, **(raw or {})})


# --- runway's parts with test defaults (production wires every argument: app/wiring.py) ------


def cluster_cache(
    queues: QueueTree | None = None,
    *,
    scope: Scope = EVERY_POD,
    invalid: InvalidObjects | None = None,
    **options: Any,
) -> ClusterCache:
    """A cache for a test: no queue tree (a pod's label alone names its queue), every pod
    managed, its own invalid-object counter."""
    return ClusterCache(queues, invalid=invalid or InvalidObjects(), scope=scope, **options)


def record_book(
    cache: ClusterCache,
    config: RequeuingStrategyConfig | None = None,
    clock: Clock | None = None,
    *,
    queues: QueueTree | None = None,
    store: RecordStore | None = None,
    default_budget: PreemptionBudget = NO_BUDGET,
    queue_of_pod: Callable[[Pod], str] | None = None,
    protection: Callable[[WorkloadKey, float], float | None] = lambda key, started: None,
    jobs: JobSizes | None = None,
    daemonsets: DaemonSets | None = None,
    **options: Any,
) -> RecordBook:
    """A record book for a test: records in memory, no preemption budget, the cache's queue
    of a pod, no min-runtime shown, no Jobs, no DaemonSets read."""
    return RecordBook(
        cache,
        config or RequeuingStrategyConfig(),
        clock or ManualClock(),
        queues=queues or QueueTree(),
        store=store or MemoryRecords(),
        default_budget=default_budget,
        queue_of_pod=queue_of_pod or cache.queue_of_pod,
        protection=protection,
        jobs=jobs,
        daemonsets=daemonsets,
        **options,
    )


def preemption_executor(
    pods: PodApi, gate: GateBook, clock: Clock | None = None, **options: Any
) -> PreemptionExecutor:
    """An executor for a test with the config's defaults (``preemption.*``), takeover on, no
    recorder, no events, no owners."""
    pre = PreemptionConfig()
    defaults: dict[str, Any] = {
        "concurrency": pre.max_concurrent_tasks,
        "victim_parallelism": pre.victim_parallelism,
        "gate_bound_s": pre.gate_timeout,
        "history": pre.history,
        "identity": "",
        "recorder": None,
        "takeover": True,
        "events": None,
        "owners_of": lambda _pod: (),
    }
    return PreemptionExecutor(pods, gate, clock or ManualClock(), **{**defaults, **options})


# --- writing a workload's record the one way (``RecordBook.change``) -------------------------


async def update_record(
    book: RecordBook, key: WorkloadKey, update: Callable[[EvictionRecord | None], Any]
) -> EvictionRecord | None:
    """Read-modify-write ``key``'s eviction record with ``update``; the record it made."""
    return await book.record_eviction(key, update)


async def write_record(
    book: RecordBook, key: WorkloadKey, record: EvictionRecord
) -> EvictionRecord | None:
    """``record`` as ``key``'s eviction record, whatever it held."""
    return await update_record(book, key, lambda _: record)


async def write_life(
    book: RecordBook, key: WorkloadKey, life: Life, owner_created: float | None = None
) -> bool:
    """Persist ``life`` as the leader does; whether anything was written."""
    return (
        await book.change(key, book.life_change(key, life, owner_created=owner_created)) is not None
    )
