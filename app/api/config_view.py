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
    """Every key with the value in force, defaults included; static tokens read `**********`."""
    return context(request).config
