"""What runway relies on inside its dependencies, beyond their documented API.

pyproject.toml bounds these packages to the releases tested and requirements/*.txt pins them;
these tests say, by name, what a new release took away, so raising a bound starts from a list
instead of from a crash in production. The uvicorn lists are read from the subclasses' source
(app/connections.py, app/tls.py), so a new use of an internal is checked without anyone adding it
here.
"""

from __future__ import annotations

import ast
import asyncio
import tomllib
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import msgspec
import pytest

ROOT = Path(__file__).resolve().parents[2]
REFRESH = "requirements/refresh.sh --upgrade-package {package}"


def _declared(package: str) -> str:
    """The range pyproject.toml allows for ``package``."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for dep in deps["dependencies"]:
        if dep.split(";")[0].replace("_", "-").startswith(package):
            return str(dep.split(";")[0])
    raise AssertionError(f"{package} is not a dependency in pyproject.toml")


def _fail_if_missing(package: str, user: str, missing: list[str]) -> None:
    if missing:
        pytest.fail(
            f"{package} {version(package)} no longer has what {user} relies on: "
            f"{', '.join(missing)}. pyproject.toml allows {_declared(package)!r} (the releases "
            f"tested; requirements/*.txt pins one): adapt {user} to this release first, then "
            f"raise the bound and run `{REFRESH.format(package=package)}`.",
            pytrace=False,
        )


# --- names a subclass takes from its uvicorn base, read from its source -------------------------


def _class(path: str, name: str) -> ast.ClassDef:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    found = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
    assert len(found) == 1, f"{path} has no class {name} (this test reads it)"
    return found[0]


def _own_names(cls: ast.ClassDef) -> set[str]:
    """Names the subclass defines itself (methods, class attributes)."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _is_self(node: ast.expr) -> bool:
    """``self``, or ``super()``."""
    if isinstance(node, ast.Name):
        return node.id == "self"
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _walk_attributes(cls: ast.ClassDef) -> Iterator[tuple[str, str | None]]:
    """``(name, member)`` for each ``self.name`` (member None) and each ``self.name.member``,
    following local aliases (``cycle = self.cycle``); ``super().name`` as ``(name, "super")``."""
    for func in cls.body:
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        aliases = {
            t.id: stmt.value.attr
            for stmt in ast.walk(func)
            if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Attribute)
            and _is_self(stmt.value.value)
            for t in stmt.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(func):
            if not isinstance(node, ast.Attribute):
                continue
            if isinstance(node.value, ast.Call) and _is_self(node.value):
                yield node.attr, "super"
            elif _is_self(node.value):
                yield node.attr, None
            elif isinstance(node.value, ast.Attribute) and _is_self(node.value.value):
                yield node.value.attr, node.attr
            elif isinstance(node.value, ast.Name) and node.value.id in aliases:
                yield aliases[node.value.id], node.attr


def inherited_uses(path: str, name: str) -> tuple[set[str], dict[str, set[str]]]:
    """What class ``name`` in ``path`` takes from its base: the attributes and methods it uses
    but does not define, and the members it uses of each of those."""
    cls = _class(path, name)
    own = _own_names(cls)
    names: set[str] = set()
    members: dict[str, set[str]] = {}
    for attr, member in _walk_attributes(cls):
        if member == "super":  # an override calling its base: the base must have it
            names.add(attr)
            continue
        if attr in own:
            continue
        names.add(attr)
        if member is not None:
            members.setdefault(attr, set()).add(member)
    return names, members


def _missing(obj: object, names: set[str], assigned_in: type | None = None) -> list[str]:
    """Names ``obj`` lacks; with ``assigned_in``, an attribute that class's methods assign
    (``self.name = ...``, e.g. set only once serving starts) counts as present."""
    source = ""
    if assigned_in is not None:
        import inspect

        source = inspect.getsource(assigned_in)
    return sorted(n for n in names if not hasattr(obj, n) and f"self.{n} =" not in source)


# --- uvicorn ----------------------------------------------------------------------------------


class _Transport:
    def __init__(self) -> None:
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(name, default)

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _app(scope: Any, receive: Any, send: Any) -> None:
    pass


def test_uvicorn_httptools_protocol_has_what_connections_uses() -> None:
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    names, members = inherited_uses("app/connections.py", "BoundedHttpToolsProtocol")
    # The count the code review found (issue 30): the test reads them, not a list kept by hand.
    assert {"transport", "cycle", "parser", "server_state", "on_response_complete"} <= names
    loop = asyncio.new_event_loop()
    try:
        config = uvicorn.Config(_app, http="httptools", log_config=None)
        protocol = HttpToolsProtocol(config, ServerState(), {}, _loop=loop)
        protocol.connection_made(_Transport())  # type: ignore[arg-type]
        # A POST whose head is complete and body not yet: per-request state and a cycle exist.
        protocol.data_received(b"POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 4\r\n\r\n{}")
        missing = _missing(protocol, names)
        for attr, used in sorted(members.items()):
            if attr == "transport":  # asyncio's Transport (faked here), not uvicorn's
                continue
            owner = getattr(protocol, attr, None)
            if owner is not None:
                missing += [f"{attr}.{m}" for m in _missing(owner, used)]
        protocol.connection_lost(None)
    finally:
        loop.run_until_complete(asyncio.sleep(0))  # the cycle's task sees the disconnect
        loop.close()
    _fail_if_missing("uvicorn", "app/connections.py (BoundedHttpToolsProtocol)", missing)


def test_uvicorn_config_and_server_have_what_tls_uses() -> None:
    import uvicorn

    config = uvicorn.Config(_app, log_config=None)
    names, _ = inherited_uses("app/tls.py", "_Config")
    missing = [f"Config.{n}" for n in _missing(config, names, uvicorn.Config)]
    server = uvicorn.Server(config)
    names, _ = inherited_uses("app/tls.py", "_Server")
    assert {"_captured_signals", "capture_signals", "startup", "started"} <= names
    missing += [f"Server.{n}" for n in _missing(server, names, uvicorn.Server)]
    _fail_if_missing("uvicorn", "app/tls.py (_Config, _Server)", missing)


# --- httptools: the parser methods connections.py calls (public API, checked all the same) -----


def test_httptools_parser_has_what_connections_calls() -> None:
    import httptools

    _, members = inherited_uses("app/connections.py", "BoundedHttpToolsProtocol")
    used = members["parser"]
    assert "should_keep_alive" in used
    _fail_if_missing(
        "httptools",
        "app/connections.py",
        _missing(httptools.HttpRequestParser, used),
    )


# --- prometheus-client: the private fields the README's metrics table reads --------------------


def test_prometheus_metrics_have_what_the_reference_table_reads() -> None:
    from prometheus_client import CollectorRegistry, Counter

    from app import metrics

    counter = Counter("runway_probe", "probe", ["a"], registry=CollectorRegistry())
    used = {"_type", "_name", "_labelnames", "_documentation"}
    missing = _missing(counter, used)
    if not missing:
        assert (counter._type, counter._name, tuple(counter._labelnames)) == (
            "counter",
            "runway_probe",
            ("a",),
        )
        assert metrics.reference().count("| `runway_") > 10
    _fail_if_missing("prometheus-client", "app/metrics.py (_reference_rows)", missing)


# --- kubernetes: the public kubeconfig functions app/kube/access.py calls ---------------------

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {tokenFile: token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_kubernetes_kubeconfig_functions_take_what_access_passes(tmp_path: Path) -> None:
    """``load_kube_config`` into a given Configuration, unpersisted, and the contexts with their
    user: the package's public API, which ``_from_kubeconfig`` uses and nothing private."""
    from kubernetes import config as kube_config
    from kubernetes.client import Configuration

    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG, encoding="utf-8")
    (tmp_path / "token").write_text("t" * 20, encoding="utf-8")
    cfg = Configuration()
    kube_config.load_kube_config(
        config_file=str(path), context=None, client_configuration=cfg, persist_config=False
    )
    assert cfg.host == "https://127.0.0.1:6443"
    contexts, active = kube_config.list_kube_config_contexts(config_file=str(path))
    assert active["context"]["user"] == "u" and [c["name"] for c in contexts] == ["x"]


# --- msgspec: Raw values are views into the body (the NodeList echo's zero copy) ---------------


def test_msgspec_raw_is_a_view_into_the_request_body() -> None:
    from app.wire.buffers import span_in

    body = b'{"items": [{"a": 1}, {"b": 2}]}'
    items = msgspec.json.decode(body, type=dict[str, list[msgspec.Raw]])["items"]
    span = span_in(body, items[0], items[-1])
    # A copy instead of a view is no error (app/wire falls back to joining), but the filter's
    # speed on big NodeLists depends on it (bench/RESULTS.md, extender.py).
    if span is None:
        _fail_if_missing("msgspec", "app/wire/buffers.py", ["Raw as a view into the input"])
    assert bytes(span or b"") == b'{"a": 1}, {"b": 2}'
