"""The runway configuration file. Every field has a default; the embedded default is ``{}``.

Keys are camelCase as in Kubernetes configuration files; unknown keys are errors, so a typo
does not silently fall back to a default.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.config.admission import AdmissionConfig
from app.config.durations import Duration
from app.config.kubernetes import KubernetesConfig
from app.config.preemption import PreemptionConfig
from app.config.prioritize import PrioritizeConfig
from app.config.queues import MinRuntimeConfig, QueueConfig, tree_problems
from app.config.requeue import (
    RequeueStrategyConfig,
    WaitForPodsReadyConfig,
    check_timestamps_agree,
)
from app.config.scope import ScopeConfig
from app.config.section import Section
from app.config.security import AuthConfig, TLSConfig


class ServerConfig(Section):
    """Where and how the HTTP server listens."""

    host: str = Field("127.0.0.1", description="Address to bind. Use 0.0.0.0 in a pod.")
    port: int = Field(
        8888, ge=1, le=65535, description="TCP port to listen on (`serve --port` overrides it)."
    )
    health_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Plain-HTTP port that answers only `GET /healthz` and `/readyz` (the same "
        "answers as on `port`), for kubelet's probes when `port` requires client certificates "
        "(kubelet presents none). Bound on `host`; unset: no such port. The chart sets 8081.",
    )
    url_prefix: str = Field(
        "/scheduler",
        pattern=r"^(/[A-Za-z0-9._~-]+)+$",
        description="Path prefix of the extender verbs; kube-scheduler's `urlPrefix` is "
        "`http://HOST:PORT` + this prefix.",
    )
    max_body_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="Largest request body accepted; larger bodies get 413. A 5,000-node "
        "NodeList of production nodes is about 55 MB.",
    )
    max_header_bytes: int = Field(
        64 * 1024,
        ge=4096,
        description="Largest request head (request line and headers) accepted; a larger one "
        "gets 431 and the connection is closed.",
    )
    header_timeout: Duration = Field(
        10.0,
        gt=0,
        description="A connection that sends no complete request head within this time (after "
        "it opened, or after the first byte of its next request) is closed.",
    )
    body_timeout: Duration = Field(
        60.0,
        gt=0,
        description="A request whose body is not complete within this time after its head is "
        "closed (a client sending a byte a second cannot hold a connection).",
    )
    idle_timeout: Duration = Field(
        30.0,
        gt=0,
        description="An idle keep-alive connection is closed after this long.",
    )
    max_connections: int = Field(
        512,
        ge=1,
        description="Open connections at once (keep it below the process's open-file limit). "
        "At the cap a new connection closes the oldest one with no request in flight (idle or "
        "still sending its head), else it is closed at once.",
    )
    shutdown_timeout: Duration = Field(
        5.0,
        ge=0,
        description="At SIGTERM, how long requests in flight may finish before they are "
        "cancelled; then the preemptions drain (`preemption.shutdownGrace`). Their sum must fit "
        "in the pod's termination grace period (30 s in the chart).",
    )
    tls: TLSConfig = Field(
        default_factory=TLSConfig,
        description="HTTPS (with certificate reload and optional client certificates); off "
        "unless `certFile` is set. See docs/security.md.",
    )
    rest_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Serve the REST API (`/v1/...`), `/docs`, `/openapi.json` and the `/ui/` page "
        "on this port of their own, with the same certificate but no client certificate "
        "required, so people and tools never use the scheduler's client key; `port` then "
        "answers only the extender verbs, `/healthz`, `/readyz` and `/metrics`. Unset: one port "
        "serves everything.",
    )

    @model_validator(mode="after")
    def _ports_differ(self) -> ServerConfig:
        if self.rest_port is not None and self.rest_port == self.port:
            raise ValueError(
                f"restPort {self.rest_port} is the verbs' port: pick another port, or leave "
                "restPort unset to serve everything on one port"
            )
        return self

    @model_validator(mode="after")
    def _health_port_apart(self) -> ServerConfig:
        if self.health_port is not None and self.health_port in (self.port, self.rest_port):
            which = "`port`" if self.health_port == self.port else "`restPort`"
            raise ValueError(
                f"healthPort {self.health_port} is also {which}: the health port must be another"
            )
        return self


class LoggingConfig(Section):
    """Structured logging."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        "info",
        description="Minimum level. `debug` logs one line per extender call. "
        "`serve --log-level` overrides it.",
    )
    format: Literal["text", "json"] = Field(
        "text",
        description="`json` writes one JSON object per line (for log pipelines), uvicorn's "
        "lines included. `serve --log-format` overrides it.",
    )


class RunwayConfig(Section):
    """The whole configuration file."""

    server: ServerConfig = Field(
        default_factory=ServerConfig, description="The HTTP server: address, verbs' prefix, TLS."
    )
    logging: LoggingConfig = Field(
        default_factory=LoggingConfig, description="Structured logs on stderr."
    )
    preemption: PreemptionConfig = Field(
        default_factory=PreemptionConfig,
        description="Asynchronous preemption and the gate (DESIGN §4).",
    )
    wait_for_pods_ready: WaitForPodsReadyConfig = Field(
        default_factory=WaitForPodsReadyConfig,
        description="All-or-nothing PodsReady timeouts and the requeue backoff (DESIGN §5).",
    )
    requeue_strategy: RequeueStrategyConfig = Field(
        default_factory=RequeueStrategyConfig,
        description="Queue-order timestamp per eviction reason (DESIGN §5).",
    )

    admission: AdmissionConfig = Field(
        default_factory=AdmissionConfig,
        description="How runway holds a pod it does not admit yet: a scheduling gate where the "
        "cluster has them, else a `filter` rejection (DESIGN §5.8).",
    )
    scope: ScopeConfig = Field(
        default_factory=ScopeConfig,
        description="Which pods runway manages (DESIGN §2.0): those of the schedulers it serves "
        "that name a queue (or whose namespace is mapped to one), never kube-system or its own "
        "namespace.",
    )
    queues: list[QueueConfig] = Field(
        default_factory=list,
        description="The queue tree (DESIGN §2): each queue names its parent; min-runtimes are "
        "inherited down the tree. Empty = every queue is top-level with no settings.",
    )
    queue_source: Literal["file", "kai", "auto"] = Field(
        "file",
        description="Where the queue tree comes from: `file` (default) the `queues` list above; "
        "`kai` KAI-Scheduler's `Queue` objects (`scheduling.run.ai/v2`: `spec.parentQueue`, "
        "`spec.preemptMinRuntime`, `spec.reclaimMinRuntime`), listed and watched, the tree "
        "rebuilt on every change (an invalid change keeps the last good tree); `auto` = `kai` "
        "when the API server serves that kind, else `file`. With `kai`, `queues` must be empty.",
    )
    min_runtime: MinRuntimeConfig = Field(
        default_factory=MinRuntimeConfig,
        description="Node-pool min-runtime defaults and the reclaim resolution method (DESIGN §3).",
    )
    prioritize: PrioritizeConfig = Field(
        default_factory=PrioritizeConfig,
        description="Node preferences of the prioritize verb, and whether kube-scheduler needs "
        "to call it (`check-config` says; leave `prioritizeVerb` out of the stanza otherwise).",
    )
    kubernetes: KubernetesConfig = Field(
        default_factory=KubernetesConfig,
        description="API server access and Lease leader election (DESIGN §7).",
    )
    auth: AuthConfig = Field(
        default_factory=AuthConfig,
        description="Bearer-token authentication of the REST API (static tokens or "
        "TokenReview + SubjectAccessReview). See docs/security.md.",
    )

    @model_validator(mode="after")
    def _queue_tree_is_valid(self) -> RunwayConfig:
        # Raised as a ValidationError so each problem keeps its own path, e.g. queues[3].parent.
        problems = tree_problems(self.queues)
        if problems:
            raise ValidationError.from_exception_data(
                "RunwayConfig",
                [
                    InitErrorDetails(
                        type=PydanticCustomError("queue_tree", "{msg}", {"msg": msg}),
                        loc=("queues", *loc),
                        input=value,
                    )
                    for loc, msg, value in problems
                ],
            )
        return self

    @model_validator(mode="after")
    def _mapped_queues_are_declared(self) -> RunwayConfig:
        # A namespace mapped to a queue the file does not declare is a typo: its pods would
        # land in an unknown top-level queue with no settings. (KAI's tree is the cluster's.)
        if self.queue_source != "file" or not self.queues:
            return self
        declared = {q.name for q in self.queues}
        problems = [
            (ns, queue)
            for ns, queue in self.scope.namespace_queues.items()
            if queue not in declared
        ]
        if problems:
            raise ValidationError.from_exception_data(
                "RunwayConfig",
                [
                    InitErrorDetails(
                        type=PydanticCustomError(
                            "scope_queue",
                            "namespace {ns!r} is mapped to queue {queue!r}, which `queues` does "
                            "not declare; declare it or fix the name",
                            {"ns": ns, "queue": queue},
                        ),
                        loc=("scope", "namespaceQueues", ns),
                        input=queue,
                    )
                    for ns, queue in problems
                ],
            )
        return self

    @model_validator(mode="after")
    def _one_queue_source(self) -> RunwayConfig:
        if self.queue_source == "kai" and self.queues:
            raise ValueError(
                "`queues` is set but `queueSource` is `kai`: the tree comes from the cluster's "
                "Queue objects; remove `queues`, or use `queueSource: auto` to keep them as the "
                "fallback when the cluster has no KAI Queue kind"
            )
        return self

    @model_validator(mode="after")
    def _requeue_timestamps_agree(self) -> RunwayConfig:
        check_timestamps_agree(self.wait_for_pods_ready, self.requeue_strategy)
        return self
