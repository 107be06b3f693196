"""``GET /v1/config``: the configuration this runway runs with (DESIGN §6), secrets redacted.

What the file said after the defaults, the Kueue shapes (``waitForPodsReady`` without ``enable``)
and the ``serve`` flags were applied — camelCase keys and Go durations, as the file is written,
so the answer can be diffed against a ConfigMap or fed back to ``check-config``. Bearer tokens
(``auth.staticTokens``) are ``SecretStr`` and come out as ``**********``; the token file is named,
never read here.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.context import context
from app.config import RunwayConfig

router = APIRouter(prefix="/v1", tags=["tooling"])


@router.get(
    "/config",
    response_model=RunwayConfig,
    summary="The effective configuration (secrets redacted)",
)
async def config_endpoint(request: Request) -> RunwayConfig:
    """Every key with the value in force, defaults included; static tokens read `**********`.
    ``kubernetes.schedulerVersion`` unset in the file is the release runway detected."""
    ctx = context(request)
    config = ctx.config
    release = ctx.decider.release
    if config.kubernetes.scheduler_version is None and release.source != "assumed":
        kubernetes = config.kubernetes.model_copy(update={"scheduler_version": release.text})
        config = config.model_copy(update={"kubernetes": kubernetes})
    return config


@router.get(
    "/release",
    summary="The kube-scheduler release runway serves and what it does for it",
)
async def release_endpoint(request: Request) -> dict[str, object]:
    """The release (``kubernetes.schedulerVersion``, else the API server's ``/version``) and
    each decision taken for it (DESIGN §1.1): the preemption mode, the config API, zero-victim
    nodes, the flush, gates, nominations, and what an operator should know."""
    ctx = context(request)
    return ctx.decider.release.to_dict(
        ctx.config.preemption.async_, ctx.config.admission.scheduling_gates
    ) | {"takeover": ctx.executor.takeover}
