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
    rest = getattr(ns, "rest_port", None)
    server = given(("host", ns.host), ("port", ns.port), ("restPort", rest))
    server |= {"tls": tls} if tls else {}
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
            preemption=(
                "auto (by release)"
                if config.preemption.async_ == "auto"
                else "takeover"
                if config.preemption.async_
                else "scheduler-executes"
            ),
        )

    app = create_app(config, kube=kube)
    options: dict[str, Any] = dict(
        host=server.host,
        workers=1,
        # uvicorn's records go through runway's structlog handler (app/logs.py), its own
        # text handlers are not installed; its info lines repeat "runway started".
        log_config=None,
        log_level="error" if config.logging.level == "error" else "warning",
        access_log=False,
        # Nothing runway does depends on the client address: X-Forwarded-* is not trusted
        # (and not parsed on every verb call).
        proxy_headers=False,
        h11_max_incomplete_event_size=server.max_header_bytes,
        timeout_keep_alive=max(int(server.idle_timeout), 1),
        timeout_graceful_shutdown=max(int(server.shutdown_timeout), 1),
    )
    served: Any = app
    second = None
    if server.rest_port is not None:
        # REST on a port of its own (server.restPort): same certificate, no client certificate
        # required; each port answers the other's paths with a 404 naming the right port.
        from app.api.listeners import PortSplit

        prefix = server.url_prefix
        served = PortSplit(app, "verbs", prefix, server.rest_port)
        rest_tls = None
        if server.tls.enabled:
            rest_tls = ReloadingTLS(server.tls.model_copy(update={"require_client_cert": False}))
        rest = PortSplit(app, "rest", prefix, server.port)
        second = (
            rest,
            rest_tls,
            {
                **options,
                "port": server.rest_port,
                # the gate webhook answered by the protocol itself (kube-apiserver calls it)
                "http": bounded_protocol(server, direct=app.direct_verbs(verbs=False)),
            },
        )
    ok = serve_uvicorn(
        served,
        tls,
        on_started=started,
        port=server.port,
        # Header size, header/body/idle timeouts, connection cap: app/connections.py.
        # ... and the verbs answered by the protocol itself, without ASGI (same handler).
        http=bounded_protocol(server, direct=app.direct_verbs(webhook=server.rest_port is None)),
        second=second,
        **options,
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
    why = config.prioritize.needed(wait.enable)
    if why:
        print(f"kube-scheduler stanza: name prioritizeVerb (needed by {', '.join(why)})")
    else:
        print(
            "kube-scheduler stanza: leave prioritizeVerb out (no preference needs it: one "
            "call per scheduling cycle fewer)"
        )
    if ns.kubeconfig is not None:
        return _check_cluster(config, ns.kubeconfig or None)
    return 0


def _check_cluster(config: Any, kubeconfig: str | None) -> int:
    """``check-config --kubeconfig``: does the cluster serve what runway needs to start (its
    WorkloadRecord CRD, readable with these credentials)? 0 yes; 3 no (the fix printed)."""
    import asyncio

    from app.kube.client import connect
    from app.kube.workloadrecords import probe
    from app.model.record import API_VERSION, PLURAL

    client = connect(config.kubernetes, kubeconfig=kubeconfig)
    if client is None:
        print(
            "runway: cluster: no kubeconfig found (--kubeconfig PATH, kubernetes.kubeconfig "
            "or $KUBECONFIG)",
            file=sys.stderr,
        )
        return 3

    async def run() -> str | None:
        try:
            return await probe(client)
        finally:
            await client.aclose()

    problem = asyncio.run(run())
    if problem is not None:
        print(f"runway: cluster: {problem}", file=sys.stderr)
        return 3
    print(f"cluster: {PLURAL} ({API_VERSION}) installed and readable")
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


def _queue_rate(text: str) -> Any:
    from app.simulator.generate import QueueRate

    name, _, rate = text.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"expected NAME or NAME:RATE, got {text!r}")
    if not rate:
        return QueueRate(name)
    try:
        value = float(rate)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"RATE must be workloads per hour, got {rate!r} in {text!r}"
        ) from None
    return QueueRate(name, value)


def _generate(ns: argparse.Namespace) -> int:
    from app.simulator.generate import GenerateSpec, generate
    from app.simulator.trace import dump_trace

    defaults = GenerateSpec()
    spec = GenerateSpec(
        workloads=ns.workloads,
        nodes=ns.nodes,
        node_gpus=ns.node_gpus,
        node_cpu=ns.node_cpu,
        pools=ns.pools,
        queues=tuple(ns.queue) if ns.queue else defaults.queues,
        load=ns.load,
        high_fraction=ns.high_fraction,
        duration_median=ns.duration_median,
        duration_sigma=ns.duration_sigma,
        never_ready=ns.never_ready,
    )
    try:
        trace = generate(spec, ns.seed)
    except ValueError as exc:
        print(f"runway: simulate --generate: {exc}", file=sys.stderr)
        return 2
    with open(ns.generate, "w", encoding="utf-8") as f:
        f.write(dump_trace(trace))
    last = trace.workloads[-1].arrival if trace.workloads else 0.0
    print(
        f"{ns.generate}: {len(trace.workloads)} workloads over {last / 86400:.2f} days on "
        f"{spec.nodes} nodes",
        file=sys.stderr,
    )
    return 0


def _simulate(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from app.simulator.engine import SimOptions, simulate
    from app.simulator.report import summarize, table, to_json
    from app.simulator.trace import TraceError, load_trace

    if ns.generate:
        return _generate(ns)
    if not ns.trace:
        print("runway: simulate: give a TRACE file (or --generate OUT.jsonl)", file=sys.stderr)
        return 2
    configs = ns.compare or ([ns.config] if ns.config else [])
    if not configs:
        print("runway: simulate: give --config FILE or --compare A.yaml B.yaml", file=sys.stderr)
        return 2
    try:
        trace = load_trace(ns.trace)
    except TraceError as exc:
        print(f"runway: {exc}", file=sys.stderr)
        return 2
    if not trace.cluster:
        print(
            f"runway: {ns.trace}: no cluster line; add one (docs/simulator.md) or generate the "
            "trace with --generate",
            file=sys.stderr,
        )
        return 2
    loaded = [(Path(c).stem, load_config(c)) for c in configs]
    names = [n for n, _ in loaded]
    if len(set(names)) != len(names):
        loaded = [(c, cfg) for c, (_, cfg) in zip(configs, loaded, strict=True)]
    options = SimOptions(seed=ns.seed, until=ns.until)
    results = [
        summarize(name, simulate(config, trace, options=options), decisions=ns.decisions)
        for name, config in loaded
    ]
    sys.stdout.write(table(results))
    text = to_json(str(ns.trace), ns.seed, results)
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as f:
            f.write(text)
    if ns.plot:
        from app.simulator.plot import PlotUnavailable, plot

        try:
            plot(results, ns.plot, title=Path(ns.trace).name)
        except PlotUnavailable as exc:
            print(f"runway: {exc}", file=sys.stderr)
            return 2
    return 0


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _add_simulate(sub: Any) -> None:
    sim = sub.add_parser(
        "simulate",
        help="what-if: replay a workload trace under one or more configs (docs/simulator.md)",
        description="Replay TRACE (JSON Lines, docs/simulator.md) on its modelled cluster with "
        "runway's own policy code and print, per config, preemptions, work lost, queue waits, "
        "utilisation, evictions and deactivations side by side. Simulated time; the same "
        "trace, config and --seed give byte-identical --json. With --generate, write a "
        "synthetic trace instead.",
    )
    sim.add_argument("trace", nargs="?", metavar="TRACE", help="the trace file (JSON Lines)")
    sim.add_argument("--config", help="the runway config file to simulate")
    sim.add_argument(
        "--compare", nargs="+", metavar="CONFIG", help="several config files, side by side"
    )
    sim.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    sim.add_argument("--plot", metavar="OUT_PNG", help="queue wait and lost work over time")
    sim.add_argument("--seed", type=int, default=0, help="random seed (jitter, dry-run start)")
    sim.add_argument("--until", type=_non_negative, help="stop at this simulated time (seconds)")
    sim.add_argument(
        "--decisions", action="store_true", help="list every preemption/eviction in the JSON"
    )
    gen = sim.add_argument_group("--generate: a synthetic trace")
    gen.add_argument("--generate", metavar="OUT", help="write a synthetic trace to OUT")
    gen.add_argument("--workloads", type=_positive_int, default=1000)
    gen.add_argument("--nodes", type=_positive_int, default=100)
    gen.add_argument("--node-gpus", type=int, default=8, help="GPUs per node (0: CPU only)")
    gen.add_argument("--node-cpu", type=_positive_int, default=64, help="cores per node")
    gen.add_argument("--pools", type=_positive_int, default=1, help="node pools (pool-0...)")
    gen.add_argument(
        "--queue",
        action="append",
        type=_queue_rate,
        metavar="NAME[:RATE]",
        help="a leaf queue and its arrivals per hour (repeat; default team-a, team-b; "
        "without rates --load sets them)",
    )
    gen.add_argument(
        "--load", type=float, default=0.9, help="offered GPU load when no rate is given"
    )
    gen.add_argument(
        "--high-fraction", type=float, default=0.2, help="fraction of priority-100 workloads"
    )
    gen.add_argument(
        "--duration-median", type=float, default=3600.0, help="median duration (seconds)"
    )
    gen.add_argument("--duration-sigma", type=float, default=1.0, help="log-normal sigma")
    gen.add_argument(
        "--never-ready", type=float, default=0.02, help="fraction whose pods never get ready"
    )
    sim.set_defaults(func=_simulate)


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
        "--rest-port",
        type=int,
        help="serve the REST API, /docs and /ui/ on this port of their own (server.restPort)",
    )
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

    migrate = sub.add_parser(
        "migrate-annotations",
        help="import the eviction records earlier versions kept in annotations (dry-run "
        "unless --apply)",
        description="Find runway.dev/eviction-* annotations on pods and their controllers "
        "(written by runway before 0.2) and import each into its workload's WorkloadRecord, "
        "only where that makes the workload less privileged (later requeueAt, higher count, "
        "deactivated); preemption history, life facts and gates are never imported. Runs with "
        "your credentials: read pods and their controllers, write WorkloadRecords. "
        "docs/state.md, Migration.",
    )
    migrate.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG)")
    migrate.add_argument(
        "--apply", action="store_true", help="write the records (default: only print the plan)"
    )
    migrate.set_defaults(func=_migrate)

    check = sub.add_parser(
        "check-config",
        help="validate a config file without starting (exit 0 valid, 1 invalid, 2 unreadable)",
        description="Validate FILE as `serve --config FILE` would, without starting. Exit "
        "status: 0 valid; 1 invalid, every problem printed on stderr as FILE:LINE: field.path: "
        "what is wrong (got VALUE); 2 the file cannot be read, or a usage error; 3 (with "
        "--kubeconfig) the cluster lacks what runway needs: the WorkloadRecord CRD (install it: "
        "kubectl apply -f helm/runway/crds/) or the permission to read it.",
    )
    check.add_argument("file", metavar="FILE", help="the YAML config file")
    check.add_argument(
        "--kubeconfig",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="also ask the cluster whether runway's WorkloadRecord CRD is installed and readable "
        "(PATH, else kubernetes.kubeconfig, else $KUBECONFIG)",
    )
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
    _add_simulate(sub)
    return parser


def _migrate(ns: argparse.Namespace) -> int:
    """``migrate-annotations``: prints one line per workload found, then what was (or would
    be) written; exit 0, 2 without a cluster."""
    import asyncio

    from app.config.kubernetes import KubernetesConfig
    from app.kube.client import connect
    from app.kube.migration import collect, import_records

    client = connect(KubernetesConfig(), kubeconfig=ns.kubeconfig)
    if client is None:
        raise ConfigError(
            "migrate-annotations needs a cluster: pass --kubeconfig or set KUBECONFIG"
        )

    async def run() -> int:
        try:
            found = await collect(client)
            outcomes = await import_records(client, found, apply=ns.apply)
        finally:
            await client.aclose()
        verb = "written" if ns.apply else "would be written (dry-run: --apply writes)"
        for o in outcomes:
            r = o.found.record
            print(
                f"{o.found.key.namespace}/{o.found.key.name}\t{o.action}\tfrom {o.found.where}"
                f"\treason={r.reason} count={r.count} deactivated={str(r.deactivated).lower()}"
            )
        changed = sum(1 for o in outcomes if o.action != "keep")
        print(f"{len(outcomes)} workload(s) with retired records; {changed} record(s) {verb}")
        return 0

    return asyncio.run(run())


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
