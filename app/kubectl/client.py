"""runway's REST API as the plugin uses it: JSON in, ``PluginError`` with an exit code out, and
every list followed to its last page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from app.kubectl.errors import (
    EXIT_ERROR,
    EXIT_FORBIDDEN,
    EXIT_NOT_FOUND,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    PluginError,
)
from app.kubectl.target import Target
from app.wire.forwarding import SERVED_BY_HEADER

PAGE_SIZE = 500
"""Items asked for per page (``--chunk-size``)."""
MAX_PAGE_SIZE = 10_000
"""runway's largest ``limit``."""

_MAX_PAGES = 100_000


def _message(response: httpx.Response) -> str:
    """What the answer says went wrong: runway's ``{"error"}`` or the API server's Status."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        if isinstance(body.get("error"), str):
            return str(body["error"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return response.text.strip()[:500]


def _from_api_server(response: httpx.Response) -> bool:
    """Whether the error was the API server's own (a Status), not runway's answer."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("kind") == "Status"


class RunwayClient:
    """Calls runway through a ``Target``."""

    def __init__(
        self,
        target: Target,
        page_size: int = PAGE_SIZE,
        *,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.target = target
        self.page_size = page_size
        self.warn = warn
        """Told (once per distinct cause) when an answer is a follower's own: it could not ask
        the leader for what only the leader holds."""
        self._warned: set[str] = set()

    def close(self) -> None:
        """Close the HTTP client."""
        self.target.client.close()

    def _call(self, method: str, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        try:
            response = self.target.client.request(method, path, params=params)
        except httpx.TimeoutException:
            raise PluginError(
                EXIT_UNREACHABLE, f"runway did not answer in time ({self.target.description})"
            ) from None
        except httpx.HTTPError as exc:
            raise PluginError(
                EXIT_UNREACHABLE, f"cannot reach runway ({self.target.description}): {exc}"
            ) from None
        if response.is_success:
            self._served_by(response)
            return response
        raise self._error(response, path)

    def _served_by(self, response: httpx.Response) -> None:
        served = response.headers.get(SERVED_BY_HEADER, "")
        if served.startswith("follower") and served not in self._warned and self.warn:
            self._warned.add(served)
            self.warn(
                f"runway answered from a replica that is not the leader and could not ask it "
                f"({served}): preemptions, decisions and gate holds, which only the leader "
                "holds, may be missing or old; ask again"
            )

    def _error(self, response: httpx.Response, path: str) -> PluginError:
        status, message = response.status_code, _message(response)
        apiserver = _from_api_server(response)
        if status in (401, 403):
            who = "the API server" if apiserver else "runway"
            hint = ""
            if apiserver and self.target.via_proxy:
                hint = (
                    " (reading needs `get` and activating `create` on services/proxy of runway's "
                    "Service: bind the ClusterRole runway-viewer or runway-admin)"
                )
            return PluginError(EXIT_FORBIDDEN, f"{who} refused: {message}{hint}")
        if apiserver and status in (404, 503):
            # No such Service, or no ready endpoint behind it: runway is not reachable.
            return PluginError(
                EXIT_UNREACHABLE,
                f"cannot reach runway ({self.target.description}): {message} (is runway "
                "installed there? --runway-namespace, --service and --port choose the Service)",
            )
        if status == 404:
            return PluginError(EXIT_NOT_FOUND, message)
        if status == 400:
            return PluginError(EXIT_USAGE, message)
        if status in (502, 503, 504):
            return PluginError(EXIT_UNREACHABLE, f"runway unavailable ({status}): {message}")
        return PluginError(EXIT_ERROR, f"{path}: {status} {message}")

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """``GET`` and decode."""
        return self._decode(self._call("GET", path, params), path)

    def post(self, path: str) -> Any:
        """``POST`` (no body) and decode."""
        return self._decode(self._call("POST", path), path)

    @staticmethod
    def _decode(response: httpx.Response, path: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise PluginError(
                EXIT_ERROR, f"{path}: not a JSON answer (is this runway?): {response.text[:200]!r}"
            ) from None

    def pages(self, path: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every page of a paged list (``limit`` + ``continue``), in order."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        for _ in range(_MAX_PAGES):
            query = {**(params or {}), "limit": self.page_size}
            if token is not None:
                query["continue"] = token
            body = self.get(path, query)
            out.append(body)
            token = body.get("continue") if isinstance(body, dict) else None
            if not token:
                return out
        raise PluginError(EXIT_ERROR, f"{path}: more than {_MAX_PAGES} pages")

    def items(self, path: str, field: str, params: dict[str, Any] | None = None) -> list[Any]:
        """The ``field`` lists of every page, concatenated."""
        return [item for body in self.pages(path, params) for item in body.get(field, [])]


def workload_path(namespace: str, name: str) -> str:
    """``/v1/workloads/NS/NAME`` with both parts escaped."""
    return f"/v1/workloads/{quote(namespace, safe='')}/{quote(name, safe='')}"
