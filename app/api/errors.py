"""The REST API's one error shape, ``{"error": message}``, and the handlers that give it.

``install_error_handlers`` (called once, by ``app.server``) answers every ``HTTPException``
(a route's 400/404, the router's 404/405) and every request-validation failure (a 400, not
FastAPI's 422) with ``error_response``; routes and the auth guard build their errors with it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.wire.schema import ErrorBody


def error_body(message: str) -> bytes:
    """The one error body shape, encoded: ``{"error": message}`` (the verbs' direct path)."""
    return msgspec.json.encode({"error": message})


def error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The one error body shape of the API: ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def validation_message(exc: RequestValidationError) -> str:
    """``invalid request: query.limit: Input should be a valid integer; ...``."""
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
    return f"invalid request: {problems}"


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(exc.status_code, str(exc.detail), exc.headers)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(400, validation_message(exc))


def install_error_handlers(app: FastAPI) -> None:
    """Answer HTTP errors and invalid requests with ``{"error": message}`` (invalid: 400)."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid)


def document_errors(doc: dict[str, Any]) -> dict[str, Any]:
    """Make the OpenAPI document say what the handlers do: an invalid request is a 400 with
    ``ErrorBody``, never FastAPI's 422 ``HTTPValidationError`` (removed, with its schemas)."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorBody", ErrorBody.model_json_schema())
    invalid = {
        "description": "Invalid request",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for path in doc.get("paths", {}).values():
        for operation in path.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None:
                responses.setdefault("400", invalid)
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return doc
