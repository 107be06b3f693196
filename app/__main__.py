"""Command line: ``python -m app serve | openapi | metrics-reference`` (and the offline tools)."""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from typing import Any

from app.config import ConfigError, ConfigUnreadable, load_config, with_overrides


def serve_overrides(ns: argparse.Namespace) -> dict[str, Any]:
    """The ``serve`` flags as config overrides (nested, camelCase like the file)."""

    def given(*pairs: tuple[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in pairs if value is not None}

    tls = given(("certFile", ns.tls_cert_file or None), ("keyFile", ns.tls_key_file or None))
    server = given(("host", ns.host), ("port", ns.port)) | ({"tls": tls} if tls else {})
    logging = given(("level", ns.log_level), ("format", ns.log_format))
    return {k: v for k, v in (("server", server), ("logging", logging)) if v}


def _serve(ns: argparse.Namespace) -> int:
    import app as package
    from app.logs import configure_logging, get_logger
    from app.server import create_app
    from app.tls import ReloadingTLS, serve_uvicorn

    # Flags go through the same model as the file: `--port 99999` is an error, not a bind.
    config = with_overrides(load_config(ns.config), serve_overrides(ns))
    server = config.server
    configure_logging(config.logging)
    # HTTPS when the scheduler's extender config says enableHTTPS (helm: tls.enabled); the
    # certificate is re-read when its files change (docs/security.md).
    tls = ReloadingTLS(server.tls) if server.tls.enabled else None
    from app.connections import bounded_protocol
    from app.kube.client import connect

    kube = connect(config.kubernetes, kubeconfig=ns.kubeconfig)
    log = get_logger("server")

    def started(url: str) -> None:
        log.info(
            "runway started",
            url=url,
            version=package.__version__,
            url_prefix=server.url_prefix,
            max_body_bytes=server.max_body_bytes,
            mode="embedded default (no cluster)" if kube is None else "cluster",
            preemption="async" if config.preemption.async_ else "sync",
        )

    ok = serve_uvicorn(
        create_app(config, kube=kube),
        tls,
        on_started=started,
        host=server.host,
        port=server.port,
        workers=1,
        # uvicorn's records go through runway's structlog handler (app/logs.py), its own
        # text handlers are not installed; its info lines repeat "runway started".
        log_config=None,
        log_level="error" if config.logging.level == "error" else "warning",
        access_log=False,
        # Nothing runway does depends on the client address: X-Forwarded-* is not trusted
        # (and not parsed on every verb call).
        proxy_headers=False,
        # Header size, header/body/idle timeouts, connection cap: app/connections.py.
        http=bounded_protocol(server),
        h11_max_incomplete_event_size=server.max_header_bytes,
        timeout_keep_alive=max(int(server.idle_timeout), 1),
        timeout_graceful_shutdown=max(int(server.shutdown_timeout), 1),
    )
    return 0 if ok else 3


def _check_config(ns: argparse.Namespace) -> int:
    """0: valid; 1: invalid (every problem printed); 2: unreadable (or a usage error)."""
    try:
        config = load_config(ns.file)
    except ConfigUnreadable as exc:
        print(f"runway: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"runway: {exc}", file=sys.stderr)
        return 1
    wait = config.wait_for_pods_ready
    state = "on" if wait.enable else "off"
    print(f"{ns.file}: valid (waitForPodsReady {state}, {len(config.queues)} queues)")
    return 0


def _config_schema(ns: argparse.Namespace) -> int:
    from app.config.schema import config_schema, write_values_schema

    if ns.chart:
        write_values_schema(ns.chart)
    else:
        sys.stdout.write(json.dumps(config_schema(), indent=2, ensure_ascii=False) + "\n")
    return 0


def _openapi(ns: argparse.Namespace) -> int:
    from app.server import create_app

    doc = create_app().openapi()
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if ns.output:
        with open(ns.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _resolve(ns: argparse.Namespace) -> int:
    from app.api.tooling import resolution_response, resolve_pair, victim_budget
    from app.policy.queues import QueueTree

    config = load_config(ns.config)
    tree = QueueTree.from_config(config.queues)
    for queue in dict.fromkeys((ns.preemptor_queue, ns.victim_queue)):
        if not tree.is_known(queue):
            print(
                f"runway: note: queue {queue!r} is not in the config; "
                "treated as a top-level queue with no settings",
                file=sys.stderr,
            )
    res = resolve_pair(config, tree, ns.preemptor_queue, ns.victim_queue, ns.pool)
    answer = resolution_response(res)
    answer.victim_budget = victim_budget(config, tree, ns.victim_queue)
    sys.stdout.write(answer.model_dump_json(by_alias=True) + "\n")
    return 0


def _requeue_schedule(ns: argparse.Namespace) -> int:
    from app.policy.backoff import (
        default_schedule_attempts,
        no_jitter,
        requeue_schedule,
    )

    wait = load_config(ns.config).wait_for_pods_ready
    strategy = wait.requeuing_strategy
    attempts = ns.attempts or default_schedule_attempts(strategy)
    jitter = no_jitter if ns.no_jitter else random.random
    rows = [
        {
            "attempt": r.attempt,
            "backoffSeconds": round(r.backoff_seconds, 3),
            "elapsedSeconds": round(r.elapsed_seconds, 3),
            "deactivated": r.deactivated,
        }
        for r in requeue_schedule(wait.timeout, strategy, attempts, jitter)
    ]
    sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _config_reference(ns: argparse.Namespace) -> int:
    from app.config.reference import reference

    sys.stdout.write(reference())
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("runway")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def _metrics_reference(ns: argparse.Namespace) -> int:
    from app.metrics import reference, splice_reference

    if ns.write is None:
        sys.stdout.write(reference())
        return 0
    try:
        with open(ns.write, encoding="utf-8") as f:
            updated = splice_reference(f.read())
    except (OSError, ValueError) as exc:
        print(f"runway: {ns.write}: {exc}", file=sys.stderr)
        return 2
    with open(ns.write, "w", encoding="utf-8") as f:
        f.write(updated)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    parser = argparse.ArgumentParser(prog="runway", description=__doc__)
    parser.add_argument("--version", action="version", version=f"runway {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the extender (embedded default without --config)")
    serve.add_argument("--config", help="YAML config file (default: $RUNWAY_CONFIG, else embedded)")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1, or server.host)")
    serve.add_argument("--port", type=int, help="port to bind (default 8888, or server.port)")
    serve.add_argument(
        "--tls-cert-file", help="serve HTTPS with this PEM certificate chain (server.tls.certFile)"
    )
    serve.add_argument("--tls-key-file", help="private key of --tls-cert-file (server.tls.keyFile)")
    serve.add_argument(
        "--log-level", help="debug, info, warning or error (default info, or logging.level)"
    )
    serve.add_argument(
        "--log-format", help="text or json: one JSON object per line (or logging.format)"
    )
    serve.add_argument(
        "--kubeconfig",
        help="kubeconfig of the cluster (default: kubernetes.kubeconfig, else $KUBECONFIG, else "
        "the in-cluster service account, else no cluster: API calls are logged as dry-run)",
    )
    serve.set_defaults(func=_serve)

    check = sub.add_parser(
        "check-config",
        help="validate a config file without starting (exit 0 valid, 1 invalid, 2 unreadable)",
        description="Validate FILE as `serve --config FILE` would, without starting. Exit "
        "status: 0 valid; 1 invalid, every problem printed on stderr as FILE:LINE: field.path: "
        "what is wrong (got VALUE); 2 the file cannot be read, or a usage error.",
    )
    check.add_argument("file", metavar="FILE", help="the YAML config file")
    check.set_defaults(func=_check_config)

    schema = sub.add_parser(
        "config-schema",
        help="print the config file's JSON schema (the chart's values.schema.json `config`)",
    )
    schema.add_argument(
        "--chart",
        metavar="VALUES_SCHEMA",
        help="write it under properties.config of this file instead "
        "(helm/runway/values.schema.json)",
    )
    schema.set_defaults(func=_config_schema)

    ref = sub.add_parser(
        "config-reference", help="print every config key with its default (docs/configuration.md)"
    )
    ref.set_defaults(func=_config_reference)

    mref = sub.add_parser(
        "metrics-reference",
        help="print the metrics table generated from the registry (README.md's Metrics section)",
    )
    mref.add_argument(
        "--write",
        metavar="FILE",
        help="replace the table between the metrics-reference markers in FILE (README.md)",
    )
    mref.set_defaults(func=_metrics_reference)

    openapi = sub.add_parser("openapi", help="print the OpenAPI document generated from the app")
    openapi.add_argument("--output", "-o", help="write to this file instead of stdout")
    openapi.set_defaults(func=_openapi)

    resolve = sub.add_parser(
        "resolve",
        help="print the min-runtime protecting a victim from a preemptor, and the victim's "
        "preemption budget (JSON)",
    )
    resolve.add_argument(
        "--config", help="YAML config file (default: $RUNWAY_CONFIG, else embedded)"
    )
    resolve.add_argument("--preemptor-queue", required=True, help="leaf queue of the pending pod")
    resolve.add_argument("--victim-queue", required=True, help="leaf queue of the running victim")
    resolve.add_argument(
        "--pool", help="value of the node's pool label (minRuntime.poolLabel); default: global"
    )
    resolve.set_defaults(func=_resolve)

    schedule = sub.add_parser(
        "requeue-schedule",
        help="print the backoff table of a workload that never gets PodsReady (JSON)",
        description="Each attempt: admitted, evicted after waitForPodsReady.timeout, backed off "
        "per waitForPodsReady.requeuingStrategy; elapsedSeconds counts from the first admission "
        "to the requeue (or to the deactivation). Stops at deactivation.",
    )
    schedule.add_argument(
        "--config", help="YAML config file (default: $RUNWAY_CONFIG, else embedded)"
    )
    schedule.add_argument(
        "--attempts",
        type=_positive_int,
        help="most rows to print (default: until deactivation, or 10 without a limit)",
    )
    schedule.add_argument(
        "--no-jitter", action="store_true", help="leave out the random 0..0.01%% jitter"
    )
    schedule.set_defaults(func=_requeue_schedule)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m app`` and the ``runway`` console script."""
    ns = build_parser().parse_args(argv)
    # Logs go to stderr from the start, so tools that print JSON keep stdout clean.
    from app.config import LoggingConfig
    from app.logs import configure_logging

    configure_logging(LoggingConfig())
    try:
        code: int = ns.func(ns)
    except ConfigError as exc:
        print(f"runway: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
