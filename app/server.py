"""The FastAPI application: builds the runtime and wires the routers."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema

import app as package
from app.api import cache_debug, extender, ops, preemptions, tooling, workloads
from app.api.auth import install_auth
from app.api.errors import document_errors, install_error_handlers
from app.clock import Clock, SystemClock
from app.config import RunwayConfig
from app.kube.client import KubeClient
from app.kube.dryrun import DryRunPreemptionApi
from app.kube.preemption import KubePreemptionApi
from app.kube.reviews import KubeReviewer
from app.kube.sync import ClusterSync
from app.logs import get_logger
from app.runtime import Runtime
from app.state import requeue
from app.state.decisions import DecisionLog
from app.tasks.gatekeeper import GateKeeper
from app.tasks.podsready import PodsReadyEvictor, load_records
from app.tasks.preemption import PreemptionApi, PreemptionExecutor
from app.tasks.wakeup import RequeueWaker
from app.wire import schema

log = get_logger("server")


def settle_heap() -> None:
    """Tune the cyclic garbage collector for a long-lived service on the scheduler's path.

    Everything built so far lives as long as the process: it is frozen out of the collector, so
    a full collection (tens of ms with a big cache) does not land in a verb's p99. The verbs
    allocate tens of thousands of short-lived objects per call and make no cycles: with the
    default gen-0 threshold of 700 a 100-node preempt ran ~30 collections and its p99 was 70 ms;
    collecting every 50,000 allocations brings it to ~2 ms (bench/RESULTS.md).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def create_app(
    config: RunwayConfig | None = None,
    clock: Clock | None = None,
    *,
    kube: KubeClient | None = None,
) -> FastAPI:
    """Build the service for ``config`` (the embedded default when None); with ``kube``, pods
    and nodes are watched into the cache and ``/readyz`` waits for their first LIST."""
    config = config or RunwayConfig()
    runtime = Runtime(config=config, clock=clock or SystemClock(), kube=kube)
    if kube is not None:
        runtime.ready = False

        def synced() -> None:
            runtime.ready = True

        runtime.sync = ClusterSync(kube, runtime.cache, config.kubernetes, on_synced=synced)
    # Eviction records (SPEC §5): owners' annotations watched, read without I/O by filter.
    requeue.records(runtime)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if runtime.sync is not None:
            runtime.sync.start()
            # Serve nothing until the eviction records are read back: a filter answered without
            # them would let a workload out of its backoff early after a restart. Bounded (below
            # the liveness probe's window); past it the records arrive through the watch.
            within = config.kubernetes.startup_records_timeout
            if not await load_records(runtime, within=within):
                log.warning("eviction records not all loaded at startup; serving anyway")
        pre = config.preemption
        api: PreemptionApi = (
            DryRunPreemptionApi()
            if runtime.kube is None
            else KubePreemptionApi(runtime.kube, runtime.records)
        )
        runtime.preemptions = PreemptionExecutor(
            api,
            runtime.gate,
            runtime.clock,
            concurrency=pre.max_concurrent_tasks,
            victim_parallelism=pre.victim_parallelism,
            gate_bound_s=pre.gate_timeout,
            history=pre.history,
            identity=runtime.leader.identity if runtime.leader is not None else "",
        )
        runtime.decisions = DecisionLog(pre.decision_history)
        gatekeeper = GateKeeper(runtime)
        gatekeeper.start()
        # PodsReady timeouts: runs on every replica (gauges), evicts on the leader only.
        runtime.evictor = PodsReadyEvictor(runtime)
        runtime.evictor.start()
        # Holds that end (backoff, reactivation, preemptor bound...) wake the pods (leader only).
        runtime.waker = RequeueWaker(runtime)
        runtime.waker.start()
        settle_heap()
        log.info(
            "runway started",
            version=package.__version__,
            url_prefix=config.server.url_prefix,
            max_body_bytes=config.server.max_body_bytes,
            mode="embedded default (no cluster)" if runtime.kube is None else "cluster",
            preemption="async" if pre.async_ else "sync",
        )
        yield
        await runtime.waker.stop()
        await runtime.evictor.stop()
        await gatekeeper.stop()
        await runtime.preemptions.drain(pre.shutdown_grace)
        if runtime.records is not None and runtime.records.owners is not None:
            await runtime.records.owners.stop()
        if runtime.sync is not None:
            await runtime.sync.stop()
        log.info("runway stopped")

    app = FastAPI(
        title="runway",
        version=package.__version__,
        description="kube-scheduler extender: minimum runtime before preemption, requeue "
        "ordering with backoff, asynchronous preemption.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.include_router(extender.build_router(config.server.url_prefix))
    app.include_router(ops.router)
    app.include_router(preemptions.router)
    app.include_router(tooling.router)
    app.include_router(workloads.router)
    app.include_router(cache_debug.router)
    # REST auth (docs/security.md): the guard at app.state.auth; routes that change state add
    # Depends(app.api.auth.require_auth("write")); /metrics and read-only /v1 GETs are
    # guarded here when auth.protectMetrics / auth.protectReadOnly say so.
    reviewer = None if kube is None else KubeReviewer(kube, config.auth.audiences)
    install_auth(app, config.auth, reviewer, host=config.server.host)

    # Every REST error is {"error": message}; invalid requests are 400 (not FastAPI's 422).
    install_error_handlers(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            _, defs = models_json_schema(
                [(m, "validation") for m in schema.REQUEST_MODELS],
                ref_template="#/components/schemas/{model}",
            )
            doc.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
            app.openapi_schema = document_errors(doc)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
