"""Command line: ``python -m app serve | openapi`` (and the offline tools as they land)."""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence

from app.config import ConfigError, load_config


def _serve(ns: argparse.Namespace) -> int:
    from app.logs import configure_logging
    from app.server import create_app
    from app.tls import ReloadingTLS, serve_uvicorn, tls_with_flags

    config = load_config(ns.config)
    server = config.server.model_copy(
        update={k: v for k, v in (("host", ns.host), ("port", ns.port)) if v is not None}
        | {"tls": tls_with_flags(config.server.tls, ns.tls_cert_file, ns.tls_key_file)}
    )
    config = config.model_copy(update={"server": server})
    configure_logging(config.logging)
    # HTTPS when the scheduler's extender config says enableHTTPS (helm: tls.enabled); the
    # certificate is re-read when its files change (docs/security.md).
    tls = ReloadingTLS(server.tls) if server.tls.enabled else None
    from app.connections import bounded_protocol
    from app.kube.client import connect

    kube = connect(config.kubernetes, kubeconfig=ns.kubeconfig)
    started = serve_uvicorn(
        create_app(config, kube=kube),
        tls,
        host=server.host,
        port=server.port,
        workers=1,
        log_level="warning",
        access_log=False,
        # Header size, header/body/idle timeouts, connection cap: app/connections.py.
        http=bounded_protocol(server),
        h11_max_incomplete_event_size=server.max_header_bytes,
        timeout_keep_alive=max(int(server.idle_timeout), 1),
        timeout_graceful_shutdown=max(int(server.shutdown_timeout), 1),
    )
    return 0 if started else 3


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
    from app.api.tooling import resolution_response, resolve_pair
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
    sys.stdout.write(resolution_response(res).model_dump_json(by_alias=True) + "\n")
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


def build_parser() -> argparse.ArgumentParser:
    """The CLI's argument parser."""
    parser = argparse.ArgumentParser(prog="runway", description=__doc__)
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
        "--kubeconfig",
        help="kubeconfig of the cluster (default: kubernetes.kubeconfig, else $KUBECONFIG, else "
        "the in-cluster service account, else no cluster: API calls are logged as dry-run)",
    )
    serve.set_defaults(func=_serve)

    ref = sub.add_parser(
        "config-reference", help="print every config key with its default (docs/configuration.md)"
    )
    ref.set_defaults(func=_config_reference)

    openapi = sub.add_parser("openapi", help="print the OpenAPI document generated from the app")
    openapi.add_argument("--output", "-o", help="write to this file instead of stdout")
    openapi.set_defaults(func=_openapi)

    resolve = sub.add_parser(
        "resolve", help="print the min-runtime protecting a victim from a preemptor (JSON)"
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
