"""HEALTHCHECK of the runway image: ``/healthz`` on the port and scheme runway really serves.

Kubernetes ignores an image's HEALTHCHECK (the Helm chart's liveness and readiness probes do that
job); this one is for ``docker run``, ``podman run`` and compose. Nothing is hard-coded: the
address, port and scheme are resolved exactly as ``serve`` resolves them, from the serve process's
own command line (``--host``, ``--port``, ``--tls-cert-file``, ``--config`` or ``$RUNWAY_CONFIG``)
and config file (``server.host``, ``server.port``, ``server.tls``). Under mutual TLS with
``requireClientCert`` it can only check that the port accepts connections, like the chart's probes.

Exit 0 when healthy, 1 when not (what HEALTHCHECK expects).
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import urllib.request
from pathlib import Path

TIMEOUT_S = 3.0


def serve_process() -> tuple[list[str], dict[str, str]]:
    """The arguments after ``serve`` and the environment of the runway process (pid 1 first)."""
    pids = sorted((int(p) for p in os.listdir("/proc") if p.isdigit()), key=lambda p: p != 1)
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for i, arg in enumerate(argv[1:], start=1):
            if arg == "serve" and (argv[i - 1] == "app" or argv[i - 1].endswith("runway")):
                env = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
                return [a for a in argv[i + 1 :] if a], env
    raise LookupError("no `python -m app serve` process in this container")


def target() -> tuple[str, int, bool, bool]:
    """(address, port, https, client certificate required) of the running server."""
    args, env = serve_process()
    if "RUNWAY_CONFIG" in env:
        os.environ["RUNWAY_CONFIG"] = env["RUNWAY_CONFIG"]
    from app.__main__ import build_parser, serve_overrides
    from app.config import load_config, with_overrides

    # The same resolution as `serve`: the file, then the flags through the same model.
    ns = build_parser().parse_args(["serve", *args])
    server = with_overrides(load_config(ns.config), serve_overrides(ns)).server
    host, port, tls = server.host, server.port, server.tls
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return host, port, tls.enabled, tls.enabled and tls.require_client_cert


def main() -> int:
    try:
        host, port, https, client_cert_required = target()
        if client_cert_required:
            socket.create_connection((host, port), timeout=TIMEOUT_S).close()
            return 0
        context = None
        if https:  # our own server on loopback: its certificate names the Service, not 127.0.0.1
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        scheme = "https" if https else "http"
        url = f"{scheme}://{netloc}/healthz"
        with urllib.request.urlopen(url, timeout=TIMEOUT_S, context=context) as resp:
            return 0 if resp.status == 200 else 1
    except Exception as exc:
        print(f"runway healthcheck: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
