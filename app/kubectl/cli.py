"""``kubectl-runway``: the console script kubectl runs as ``kubectl runway`` (found on PATH).

    kubectl runway queues                      the queue tree, settings resolved, counts
    kubectl runway workloads [-n NS | -A]      pending order per queue, why each waits
    kubectl runway explain POD [--preemptor P] why it is held; was it a victim; protected until
    kubectl runway preemptions                 in flight and recent
    kubectl runway activate WORKLOAD           reset backoff and deactivation
    kubectl runway deactivate WORKLOAD         hold a workload until activated
    kubectl runway config                      the configuration runway runs with

Exit codes (``app.kubectl.errors``): 0 ok, 1 error answered, 2 usage or invalid request,
3 not found, 4 not allowed, 5 runway not reachable.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from app.kubectl import render
from app.kubectl.client import MAX_PAGE_SIZE, PAGE_SIZE, RunwayClient, workload_path
from app.kubectl.errors import (
    EXIT_CODES,
    EXIT_FORBIDDEN,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    PluginError,
)
from app.kubectl.target import (
    DEFAULT_NAMESPACE,
    DEFAULT_PORT,
    DEFAULT_SCHEME,
    DEFAULT_SERVICE,
    ProxyOptions,
    Target,
    direct,
    through_proxy,
)

Clock = Callable[[], float]
Sleep = Callable[[float], None]


# --- commands: each returns the text to print (table, JSON or YAML) ----------------------------


def _structured(data: Any, output: str) -> str | None:
    if output == "json":
        return render.as_json(data)
    if output == "yaml":
        return render.as_yaml(data)
    return None


def _tree_order(queues: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Queues depth-first from the top-level ones (config order kept among siblings)."""
    by_name = {q["name"]: q for q in queues}
    out: list[tuple[int, dict[str, Any]]] = []

    def walk(q: dict[str, Any], depth: int) -> None:
        out.append((depth, q))
        for child in q.get("children", []):
            if child in by_name:
                walk(by_name[child], depth + 1)

    for q in queues:
        if q.get("parent") is None:
            walk(q, 0)
    return out


def _budget(b: dict[str, Any] | None) -> str:
    if not b or not b.get("maxPreemptions"):
        return "-"
    return f"{b['maxPreemptions']}/{render.setting(b['windowSeconds'])}"


def queues_data(client: RunwayClient, ns: argparse.Namespace) -> Any:
    """``queues``: ``GET /v1/queues``."""
    return client.get("/v1/queues")


def queues_text(body: Any, ns: argparse.Namespace, now: float) -> str:
    """The tree with resolved min-runtimes, budgets and workload counts."""
    structured = _structured(body, ns.output)
    if structured is not None:
        return structured
    wide = ns.output == "wide"
    headers = ["name", "strategy", "preempt", "reclaim", "budget"]
    headers += ["pending", "admitted", "backoff", "deactivated"]
    if wide:
        headers += ["preempt-from", "reclaim-from", "source"]
    rows = []
    for depth, q in _tree_order(body["queues"]):
        c = q.get("counts") or {}
        row: list[object] = [
            "  " * depth + q["name"],
            q["queueingStrategy"],
            render.setting(q["effectivePreemptMinRuntimeSeconds"]),
            render.setting(q["effectiveReclaimMinRuntimeSeconds"]),
            _budget(q.get("preemptionBudget")),
            c.get("pending", 0),
            c.get("admitted", 0),
            c.get("backoff", 0),
            c.get("deactivated", 0),
        ]
        if wide:
            row += [q["effectivePreemptFrom"], q["effectiveReclaimFrom"], q["source"]]
        rows.append(row)
    text = render.table(headers, rows)
    if body.get("queueSourceError"):
        text += f"\nwarning: the KAI Queue objects were refused: {body['queueSourceError']}\n"
    return text


def _namespace(ns: argparse.Namespace, target: Target) -> str | None:
    if getattr(ns, "all_namespaces", False):
        return None
    return ns.namespace or target.default_namespace


def workloads_data(client: RunwayClient, ns: argparse.Namespace) -> Any:
    """``workloads``: every page of ``GET /v1/workloads``."""
    ns.resolved_namespace = _namespace(ns, client.target)
    params = {"namespace": ns.resolved_namespace, "queue": ns.queue, "state": ns.state}
    return {"items": client.items("/v1/workloads", "items", {k: v for k, v in params.items() if v})}


def workloads_text(body: Any, ns: argparse.Namespace, now: float) -> str:
    """By queue, pending ones in queue order with why each waits."""
    structured = _structured(body, ns.output)
    if structured is not None:
        return structured
    items = body["items"]
    if not items:
        where = "any namespace" if ns.all_namespaces else f"namespace {ns.resolved_namespace}"
        return f"No workloads found in {where}.\n"
    wide = ns.output == "wide"
    headers = (["namespace"] if ns.all_namespaces else []) + ["name", "queue", "state", "pos"]
    headers += ["priority", "held-by", "until"]
    headers += ["pods", "protected-until", "reason"] if wide else ["reason"]
    rows = []
    for w in items:
        row: list[object] = [w["namespace"]] if ns.all_namespaces else []
        row += [w["name"], w["queue"], w["state"], w["position"] or "-", w["priority"]]
        row += [_held_by(w), render.relative(w["until"] or w["requeueAt"], now)]
        reason = w["reason"] or "-"
        if wide:
            row += [w["pods"], render.relative(w["protectedUntil"], now), reason]
        else:
            row.append(render.clip(reason, 60))
        rows.append(row)
    return render.table(headers, rows)


def _split_pod(value: str, default_ns: str) -> tuple[str, str]:
    ns, sep, name = value.rpartition("/")
    return (ns, name) if sep else (default_ns, value)


def explain_data(client: RunwayClient, ns: argparse.Namespace) -> dict[str, Any]:
    """What runway knows about one pod: its workload, why it waits or is protected, and every
    recent preempt decision that offered it as a victim or that it asked for."""
    namespace, pod = _split_pod(ns.pod, _namespace(ns, client.target) or "default")
    key = f"{namespace}/{pod}"
    found = client.get("/v1/workloads", {"namespace": namespace, "pod": pod})["items"]
    if not found:
        raise PluginError(
            EXIT_NOT_FOUND,
            f"pod {key} is not in runway's cache (not scheduled by runway's scheduler, or gone)",
        )
    summary = found[0]
    detail = client.get(workload_path(summary["namespace"], summary["name"]))
    try:
        decisions = client.items("/v1/preemptions/decisions", "decisions", {"limit": 500})
    except PluginError as exc:
        if exc.code != EXIT_FORBIDDEN:
            raise
        # A team's view of its own namespace (a RoleBinding): the decisions span namespaces
        # and need the read permission cluster-wide; the rest of the answer is the team's.
        decisions = []
        if client.warn is not None:
            client.warn(
                "preempt decisions not shown: reading them needs runway's read permission in "
                "every namespace (a ClusterRoleBinding)"
            )
    as_victim, as_preemptor = [], []
    for d in decisions:
        if d["preemptor"]["pod"] == key:
            as_preemptor.append(
                {
                    "time": d["time"],
                    "chosenNode": d["chosenNode"],
                    "reason": d["reason"],
                    "victims": len(d["victims"]),
                }
            )
        for node in d["nodes"]:
            for record in node["pods"]:
                if record["pod"] == key:
                    as_victim.append(
                        {"time": d["time"], "preemptor": d["preemptor"]["pod"], **record}
                    )
    data: dict[str, Any] = {
        "pod": key,
        "workload": summary,
        "detail": detail,
        "asVictim": as_victim,
        "asPreemptor": as_preemptor,
    }
    if ns.preemptor:
        p_ns, p_name = _split_pod(ns.preemptor, namespace)
        data["pair"] = client.get("/v1/explain", {"preemptor": f"{p_ns}/{p_name}", "victim": key})
    return data


def _held_by(w: Any) -> str:
    """The rule that holds a listed workload, and ``(gate)`` when its pods' scheduling gate
    holds them rather than the filter (``holdBy``, DESIGN §5.8)."""
    rule = w["rule"] or "-"
    gate = w.get("holdBy") == "schedulingGate"
    return f"{rule} (gate)" if gate and w["rule"] else ("(gate)" if gate else rule)


def explain_text(data: Any, ns: argparse.Namespace, now: float) -> str:
    """``explain POD``: kubectl-describe-like sections."""
    structured = _structured(data, ns.output)
    if structured is not None:
        return structured
    w, d = data["workload"], data["detail"]
    lines = [
        f"Pod:              {data['pod']}",
        f"Workload:         {w['namespace']}/{w['name']} ({d['identity']})",
        f"Queue:            {w['queue']}",
        f"State:            {w['state']}"
        + (f" (position {w['position']} in the queue)" if w["position"] else ""),
    ]
    if w["state"] == "admitted":
        lines.append("Held:             no (admitted)")
    elif w["rule"]:
        until = f" until {w['until']} ({render.relative(w['until'], now)})" if w["until"] else ""
        lines.append(f"Held by:          {_held_by(w)}{until}")
        lines.append(f"Why:              {w['reason']}")
    else:
        lines.append(f"Held:             no: {w['reason']}")
    protected = w["protectedUntil"]
    if protected:
        lines.append(
            f"Protected until:  {protected} ({render.relative(protected, now)}; preempt "
            "min-runtime, same-queue preemptor)"
        )
    record = d.get("evictionRecord")
    if record:
        lines.append(
            f"Last eviction:    {record['reason']} {render.relative(record['time'], now)}"
            + (f", requeues {record['count']}" if record["count"] else "")
            + (", deactivated" if record["deactivated"] else "")
        )
    for g in d.get("gate", []):
        lines.append(
            f"Gate:             {g['pod']} waits for {g['outstandingVictims']} victim(s) on "
            f"{g['nominatedNode']} (until {render.relative(g['until'], now)})"
        )
    lines.append("")
    if data["asVictim"]:
        lines.append("As a victim (recent preempt decisions, newest first):")
        rows = [
            [
                render.relative(v["time"], now),
                v["preemptor"],
                v["node"],
                v["outcome"],
                v["protectedBy"] or "-",
                render.relative(v["protectedUntil"], now),
                render.clip(v["reason"], 70),
            ]
            for v in data["asVictim"]
        ]
        lines.append(
            render.table(
                ["when", "preemptor", "node", "outcome", "protected-by", "protected-until", "why"],
                rows,
            ).rstrip()
        )
    else:
        lines.append("As a victim:      never offered in the decisions runway keeps")
    if data["asPreemptor"]:
        lines.append("")
        lines.append("As a preemptor:")
        rows = [
            [render.relative(p["time"], now), p["chosenNode"] or "-", p["victims"], p["reason"]]
            for p in data["asPreemptor"]
        ]
        lines.append(render.table(["when", "node", "victims", "why"], rows).rstrip())
    pair = data.get("pair")
    if pair:
        lines += ["", f"Against {pair['preemptor']}: {pair['explanation']}"]
    return "\n".join(lines) + "\n"


def preemptions_data(client: RunwayClient, ns: argparse.Namespace) -> Any:
    """``preemptions``: every page of ``GET /v1/preemptions``."""
    pages = client.pages("/v1/preemptions")
    return {
        "inFlight": [t for p in pages for t in p.get("inFlight", [])],
        "recent": [t for p in pages for t in p.get("recent", [])],
    }


def preemptions_text(body: Any, ns: argparse.Namespace, now: float) -> str:
    """Tasks in flight, then the recent ones."""
    in_flight, recent = body["inFlight"], body["recent"]
    structured = _structured(body, ns.output)
    if structured is not None:
        return structured
    if not in_flight and not recent:
        return "No preemptions in flight or recently finished.\n"
    wide = ns.output == "wide"
    headers = ["status", "preemptor", "node", "victims", "rule", "age"]
    if wide:
        headers += ["seconds", "victim-pods", "error"]
    rows = []
    for t in in_flight + recent:
        row: list[object] = [
            t["result"],
            t["preemptor"],
            t["node"],
            len(t["victims"]),
            t["rule"] or "-",
            render.age(t["started"], now),
        ]
        if wide:
            seconds = f"{t['seconds']:.2f}" if t.get("seconds") is not None else "-"
            row += [seconds, ",".join(t["victims"]) or "-", t.get("error") or "-"]
        rows.append(row)
    return render.table(headers, rows)


def activate_data(client: RunwayClient, ns: argparse.Namespace) -> Any:
    """``activate WORKLOAD``: ``POST .../NS/NAME:activate``."""
    namespace, name = _split_pod(ns.workload, _namespace(ns, client.target) or "default")
    return client.post(workload_path(namespace, name) + ":activate")


def activate_text(body: Any, ns: argparse.Namespace, now: float) -> str:
    """Count and backoff reset, deactivation cleared."""
    structured = _structured(body, ns.output)
    if structured is not None:
        return structured
    return f"workload {body['namespace']}/{body['name']} activated (state: {body['state']})\n"


def deactivate_data(client: RunwayClient, ns: argparse.Namespace) -> Any:
    """``deactivate WORKLOAD``: ``POST .../NS/NAME:deactivate``."""
    namespace, name = _split_pod(ns.workload, _namespace(ns, client.target) or "default")
    return client.post(workload_path(namespace, name) + ":deactivate")


def deactivate_text(body: Any, ns: argparse.Namespace, now: float) -> str:
    """Held until activated."""
    structured = _structured(body, ns.output)
    if structured is not None:
        return structured
    return f"workload {body['namespace']}/{body['name']} deactivated (state: {body['state']})\n"


def config_data(client: RunwayClient, ns: argparse.Namespace) -> Any:
    """``config``: ``GET /v1/config``."""
    return client.get("/v1/config")


def config_text(body: Any, ns: argparse.Namespace, now: float) -> str:
    """The effective configuration (YAML unless ``-o json``)."""
    return render.as_json(body) if ns.output == "json" else render.as_yaml(body)


Fetch = Callable[[RunwayClient, argparse.Namespace], Any]
Show = Callable[[Any, argparse.Namespace, float], str]

COMMANDS: dict[str, tuple[Fetch, Show]] = {
    "queues": (queues_data, queues_text),
    "workloads": (workloads_data, workloads_text),
    "explain": (explain_data, explain_text),
    "preemptions": (preemptions_data, preemptions_text),
    "activate": (activate_data, activate_text),
    "deactivate": (deactivate_data, deactivate_text),
    "config": (config_data, config_text),
}
WATCHABLE = {"queues", "workloads", "preemptions"}


# --- the command line ----------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    """The ``kubectl runway`` command line."""
    codes = "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items())
    top = argparse.ArgumentParser(
        prog="kubectl runway",
        description="See what runway (the kube-scheduler extender) is doing. runway is reached "
        "through the API server's service proxy with your kubeconfig, or at --url.",
        epilog=f"exit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    conn = argparse.ArgumentParser(add_help=False)
    g = conn.add_argument_group("where runway is")
    g.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    g.add_argument("--context", help="kubeconfig context (default: the current one)")
    g.add_argument(
        "--runway-namespace",
        default=os.environ.get("RUNWAY_NAMESPACE", DEFAULT_NAMESPACE),
        help="namespace of runway's Service ($RUNWAY_NAMESPACE; default %(default)s)",
    )
    g.add_argument(
        "--service",
        default=os.environ.get("RUNWAY_SERVICE", DEFAULT_SERVICE),
        help="runway's REST Service ($RUNWAY_SERVICE; default %(default)s)",
    )
    g.add_argument(
        "--port",
        default=os.environ.get("RUNWAY_PORT", DEFAULT_PORT),
        help="port name or number on that Service ($RUNWAY_PORT; default %(default)s)",
    )
    g.add_argument(
        "--scheme",
        choices=["http", "https"],
        default=os.environ.get("RUNWAY_SCHEME", DEFAULT_SCHEME),
        help="how the API server talks to runway ($RUNWAY_SCHEME; default %(default)s)",
    )
    g.add_argument("--url", default=os.environ.get("RUNWAY_URL"), help="reach runway directly")
    g.add_argument("--token", default=os.environ.get("RUNWAY_TOKEN"), help="bearer token (--url)")
    g.add_argument("--certificate-authority", help="CA bundle to verify runway (--url)")
    g.add_argument("--insecure-skip-tls-verify", action="store_true", help="(--url)")
    g.add_argument("--request-timeout", type=float, default=30.0, help="seconds (default 30)")
    g.add_argument(
        "--chunk-size",
        type=int,
        default=PAGE_SIZE,
        help="list in pages of this many items (default %(default)s)",
    )

    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("-o", "--output", choices=["table", "wide", "json", "yaml"], default="table")
    scoped = argparse.ArgumentParser(add_help=False)
    scoped.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    watch = argparse.ArgumentParser(add_help=False)
    watch.add_argument("-w", "--watch", action="store_true", help="print again when it changes")
    watch.add_argument(
        "--interval", type=float, default=2.0, help="seconds between polls (default 2)"
    )

    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("queues", parents=[conn, out, watch], help="the queue tree: settings and counts")
    wl = sub.add_parser(
        "workloads",
        parents=[conn, out, scoped, watch],
        help="workloads by queue, pending order, why each waits",
    )
    wl.add_argument("-A", "--all-namespaces", action="store_true")
    wl.add_argument("--queue", help="only this leaf queue")
    wl.add_argument("--state", choices=["pending", "admitted", "backoff", "deactivated"])
    ex = sub.add_parser(
        "explain", parents=[conn, out, scoped], help="why a pod is held, or was (not) a victim"
    )
    ex.add_argument("pod", metavar="POD", help="pod name, or namespace/name")
    ex.add_argument("--preemptor", help="also explain against this preemptor (namespace/name)")
    sub.add_parser(
        "preemptions", parents=[conn, out, watch], help="preemptions in flight and recent"
    )
    act = sub.add_parser(
        "activate", parents=[conn, out, scoped], help="reset a workload's backoff/deactivation"
    )
    act.add_argument("workload", metavar="WORKLOAD", help="workload name, or namespace/name")
    deact = sub.add_parser(
        "deactivate",
        parents=[conn, out, scoped],
        help="hold a workload until it is activated again (spec.active: false)",
    )
    deact.add_argument("workload", metavar="WORKLOAD", help="workload name, or namespace/name")
    cfg = sub.add_parser("config", parents=[conn], help="runway's effective configuration")
    cfg.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    return top


def command_first(argv: Sequence[str], top: argparse.ArgumentParser) -> list[str]:
    """``argv`` with the command moved to the front, so flags may come before it as kubectl
    allows (``kubectl runway -n team workloads``): the command is the first word that is not
    a flag or a flag's value."""
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    takes_value = {
        option
        for parser in sub.choices.values()
        for action in parser._actions
        if action.nargs != 0
        for option in action.option_strings
    }
    args = list(argv)
    i = 0
    while i < len(args):
        word = args[i]
        if word in sub.choices:
            return [word, *args[:i], *args[i + 1 :]]
        if word == "--":
            break
        if word.startswith("-") and "=" not in word and word in takes_value:
            i += 1  # skip its value
        i += 1
    return args


def connect(ns: argparse.Namespace, transport: Any = None) -> Target:
    """The target the flags name: ``--url``, else the service proxy."""
    if ns.url:
        return direct(
            ns.url,
            token=ns.token,
            ca_file=ns.certificate_authority,
            insecure=ns.insecure_skip_tls_verify,
            timeout=ns.request_timeout,
            transport=transport,
        )
    options = ProxyOptions(ns.runway_namespace, ns.service, str(ns.port), ns.scheme)
    return through_proxy(
        ns.kubeconfig, ns.context, options, timeout=ns.request_timeout, transport=transport
    )


def run(
    argv: Sequence[str],
    *,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
    clock: Clock = time.time,
    sleep: Sleep = time.sleep,
    transport: Any = None,
    max_polls: int | None = None,
) -> int:
    """Run one command; the exit code. ``max_polls`` bounds ``--watch`` (tests)."""
    try:
        top = parser()
        ns = top.parse_args(command_first(argv, top))
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        if not 1 <= ns.chunk_size <= MAX_PAGE_SIZE:
            raise PluginError(EXIT_USAGE, f"--chunk-size must be 1 to {MAX_PAGE_SIZE}")
        client = RunwayClient(
            connect(ns, transport),
            ns.chunk_size,
            warn=lambda message: print(f"warning: {message}", file=stderr),
        )
    except PluginError as exc:
        print(f"error: {exc.message}", file=stderr)
        return exc.code
    fetch, shown = COMMANDS[ns.command]

    def show(data: Any, ns: argparse.Namespace, now: float) -> str:
        # JSON and YAML escape what a terminal would act on themselves; the human formats print
        # from the answer with every string escaped (names come from tenants: issue #36).
        human = ns.output not in ("json", "yaml")
        return shown(render.escaped(data) if human else data, ns, now)

    try:
        if getattr(ns, "watch", False) and ns.command in WATCHABLE:
            return _watch(fetch, show, client, ns, stdout, clock, sleep, max_polls)
        stdout.write(show(fetch(client, ns), ns, clock()))
        return EXIT_OK
    except PluginError as exc:
        print(f"error: {render.escape(exc.message)}", file=stderr)
        return exc.code
    finally:
        client.close()


def _watch(
    fetch: Fetch,
    show: Show,
    client: RunwayClient,
    ns: argparse.Namespace,
    stdout: TextIO,
    clock: Clock,
    sleep: Sleep,
    max_polls: int | None,
) -> int:
    """Print, then poll every ``--interval`` and print again when runway's answer changed (not
    when only the ages shown would: a quiet cluster prints once). A failed poll ends the watch
    with its exit code."""
    last: Any = None
    polls = 0
    try:
        while max_polls is None or polls < max_polls:
            data = fetch(client, ns)
            if polls == 0 or data != last:
                if polls:
                    stdout.write("---\n" if ns.output in ("json", "yaml") else "\n")
                stdout.write(show(data, ns, clock()))
                stdout.flush()
                last = data
            polls += 1
            if max_polls is None or polls < max_polls:
                sleep(ns.interval)
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def main() -> None:
    """Console script entry point (``kubectl-runway``)."""
    sys.exit(run(sys.argv[1:]))
