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
from app import wiring
from app.api import (
    cache_debug,
    config_view,
    extender,
    fastpath,
    leader_reads,
    ops,
    preemptions,
    tooling,
    ui,
    webhook,
    workload_list,
    workloads,
)
from app.api.auth import install_auth
from app.api.errors import document_errors, install_error_handlers
from app.clock import Clock
from app.config import RunwayConfig
from app.health import serve_health
from app.kube.client import KubeClient
from app.logs import get_logger
from app.wire import schema

log = get_logger("server")


GC_THRESHOLDS = (20_000, 20, 100)
"""The cyclic collector's thresholds once the heap is settled (``settle_heap``)."""


def settle_heap() -> None:
    """Tune the cyclic garbage collector for a long-lived service on the scheduler's path.

    Everything built so far lives as long as the process: it is frozen out of the collector, so
    a full collection (tens of ms with a big cache) does not land in a verb's p99. The verbs
    allocate tens of thousands of short-lived objects per call and make no cycles: with the
    default gen-0 threshold of 700 a 100-node preempt ran ~30 collections and its p99 was 70 ms;
    collecting every 20,000 allocations brings it to ~3 ms (bench/RESULTS.md). Not more: with
    150,000 cached pods a young-generation collection costs ~0.3 µs per young object (each
    reference it follows is a cache miss), so 50,000 made 25-33 ms pauses during a resync;
    20,000 makes ~15 ms (bench.scale).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def create_app(
    config: RunwayConfig | None = None,
    clock: Clock | None = None,
    *,
    kube: KubeClient | None = None,
) -> fastpath.RunwayApp:
    """Build the service for ``config`` (the embedded default when None); with ``kube``, pods
    and nodes are watched into the cache and ``/readyz`` waits for their first LIST."""
    config = config or RunwayConfig()
    runway = wiring.build(config, clock, kube=kube)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runway.start()
        # Probes under mutual TLS: kubelet asks a plain-HTTP port what /readyz answers.
        port = config.server.health_port
        health = (
            await serve_health(config.server.host, port, lambda: runway.not_ready)
            if port is not None
            else None
        )
        settle_heap()
        # "runway started" (with the URL) is logged by `serve` once the port is bound.
        yield
        if health is not None:
            health.close()
        await runway.stop()
        log.info("runway stopped")

    app = fastpath.RunwayApp(
        title="runway",
        version=package.__version__,
        description="kube-scheduler extender: minimum runtime before preemption, requeue "
        "ordering with backoff, asynchronous preemption.",
        lifespan=lifespan,
    )
    app.state.runway = runway
    app.state.context = runway.api_context()
    app.include_router(extender.build_router(config.server.url_prefix))
    app.include_router(ops.router)
    app.include_router(preemptions.router)
    app.include_router(tooling.router)
    app.include_router(config_view.router)
    app.include_router(workloads.router)
    app.include_router(workload_list.router)
    app.include_router(ui.router)
    app.include_router(cache_debug.router)
    app.include_router(webhook.router)
    # A follower's reads of what only the leader holds are the leader's answers (DESIGN §7).
    # Added before auth's middleware, so it runs inside it: the caller is checked here first.
    app.add_middleware(leader_reads.LeaderReads)
    # REST auth (docs/security.md): the guard at app.state.auth; routes that change state add
    # Depends(app.api.auth.require_auth("write")); /metrics and read-only /v1 GETs are
    # guarded here when auth.protectMetrics / auth.protectReadOnly say so.
    install_auth(app, config.auth, runway.reviewer, host=config.server.host)

    # Every REST error is {"error": message}; invalid requests are 400 (not FastAPI's 422).
    install_error_handlers(app)
    # Before FastAPI's __call__ and its whole middleware stack: the verbs skip all of it.
    app.serve_verbs(config.server.url_prefix)

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
            app.openapi_schema = leader_reads.document_served_by(document_errors(doc))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
