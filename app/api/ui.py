"""``/ui/``: a read-only web page of what runway is doing, built from the REST API's answers.

Static files shipped in the package (``app/api/static/ui``: HTML, CSS, plain JavaScript — no
build step, nothing from a CDN); the page fetches ``../v1/...`` relative to itself, so it works
at ``/ui/`` and behind the API server's service proxy. The files are public like ``/docs``;
the data they show is guarded as the REST API is (``auth.protectReadOnly``: the page asks for a
token and sends it as ``X-Runway-Authorization``). A Content-Security-Policy lets the page load
and call nothing but runway itself.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from app.api.errors import error_response

router = APIRouter(include_in_schema=False)

FILES = {
    "index.html": "text/html; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "ui.css": "text/css; charset=utf-8",
}
"""Everything the page loads (any other name is a 404)."""

_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def ui_file(name: str) -> bytes:
    """The bytes of one of the page's files (read from the installed package)."""
    return resources.files("app.api").joinpath("static", "ui", name).read_bytes()


@router.get("/ui")
async def ui_redirect() -> RedirectResponse:
    """``/ui`` → ``ui/`` (relative: keeps a service-proxy prefix)."""
    return RedirectResponse("ui/", status_code=308)


@router.get("/ui/")
async def ui_index() -> Response:
    """The page."""
    return Response(ui_file("index.html"), media_type=FILES["index.html"], headers=_HEADERS)


@router.get("/ui/{name}")
async def ui_asset(name: str) -> Response:
    """Its script and style sheet."""
    media = FILES.get(name)
    if media is None or name == "index.html":
        return error_response(404, f"no file {name!r} in the page (it has {', '.join(FILES)})")
    return Response(ui_file(name), media_type=media, headers=_HEADERS)
