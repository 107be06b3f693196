"""Preemption under a slow API server, on the real kube-scheduler of each release (DESIGN §4.2,
§10; issue #39: what ``preemption.async: auto`` chooses per release is read off this).

Run ``python -m bench.takeover [--preemptors 12] [--victims 4] [--unrelated 120] [--delay 0.25]
[--rounds 1] [--configs stock,executes,takeover] [--release 1.20.2,1.34.4,1.37.2]``.

Per release (``--release``, comma-separated; default ``$RUNWAY_K8S_RELEASES``, else the e2e
matrix's default), one after the other: one control plane of that release (``tools/kube up``,
always ``down``) with a validating admission webhook
on pod DELETE that sleeps ``--delay`` seconds and allows (``tests/e2e/webhook.py``, which also
counts every DELETE per pod and tells runway, kube-scheduler and the test's kubelet apart by their
DeleteOptions). Then, side by side in the same run, for each configuration:

* ``stock``: kube-scheduler with no extender;
* ``executes``: runway registered, ``preemption.async: false`` (``preempt`` returns the victims,
  kube-scheduler deletes them inside its cycle);
* ``takeover``: runway registered, ``preemption.async: true`` (``preempt`` answers ``{}``, runway
  nominates and deletes in the background).

Each configuration gets its own namespace and nodes: ``--preemptors`` full nodes (4 CPUs, each
running ``--victims`` low-priority pods of 4/victims CPUs, bound and marked Running by the test)
and two spare nodes (2 CPUs) with room for the small pods only. At t0 the test creates, from a
thread pool and interleaved, ``--preemptors`` high-priority pods of 4 CPUs (each needs a whole
full node) and ``--unrelated`` mid-priority pods of 10m. The test plays the kubelet: it marks
bound pods Running and force-deletes (grace 0) pods marked for deletion. Measured from t0: when
the last unrelated pod is bound, when the last preemptor is bound; per victim, the DELETE calls
from a scheduling component (kube-scheduler or runway: must be exactly 1); per preemptor, the time
from its last victim's disappearance to its bind; unrelated pods placed on a preemptor's node
before it bound there (a nomination not honoured).

Rounds interleave the configurations (the order reverses every round). Bars (DESIGN §10), per
release, each a ratio to the stock scheduler of the same round, median over the rounds: unrelated
pods all bound in <= 0.25x the stock scheduler's time; every preemptor binds, the last no later
than 1.2x the stock scheduler's last; no victim deleted twice. Prints a table per release and
writes ``bench/out/takeover.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.extender import OUT, machine, print_table
from bench.throughput import bench_releases, delete_pods, samples, start_extender
from tests.e2e.conftest import (
    ControlPlane,
    config_api,
    control_plane_up,
    poll,
    write_scheduler_config,
)
from tests.e2e.kubelet import Kubelet
from tests.e2e.webhook import DeleteWebhook

CONFIGS = ("stock", "executes", "takeover")
PRIORITIES = {"bench-low": 100, "bench-mid": 500, "bench-high": 1000}
FULL_CPU = 4
SPARE_NODES = 2
RUN_DEADLINE_S = 300.0
THREADS = 8


@dataclass
class Run:
    """One configuration, measured."""

    release: str
    config: str
    round: int
    unrelated_bound_s: float | None
    last_preemptor_s: float | None
    preemptors_bound: int
    preemptors: int
    victims: int
    victims_deleted: int
    deletes_per_victim_max: int
    deletes_per_victim_min: int
    deletes_by: dict[str, int]
    """Admission calls by caller (the API server validates a DELETE again when it retries its
    storage update on a conflict, so one request may make two calls)."""
    delete_requests: dict[str, float] = field(default_factory=dict)
    """DELETE requests by the client's own metric: kube-scheduler's rest_client_requests_total,
    runway's runway_kube_api_requests_total."""
    callers_per_victim_max: int = 0
    bind_after_victims_gone_s: list[float] = field(default_factory=list)
    unrelated_on_preemptor_nodes: int = 0
    repeated: list[dict[str, Any]] = field(default_factory=list)
    """Victims with more than one DELETE from a scheduling component: their calls."""
    scheduler: dict[str, float] = field(default_factory=dict)
    runway: dict[str, float] = field(default_factory=dict)
    loadavg: float | None = None
    """The machine's 1-minute load average when the burst started (other sessions share it)."""


# --------------------------------------------------------------------------- objects


def pod_body(
    name: str, scheduler: str, priority: str, cpu: str, labels: dict[str, str]
) -> dict[str, Any]:
    """A pod of ``scheduler`` at PriorityClass ``priority`` requesting ``cpu``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": scheduler,
            "priorityClassName": priority,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}},
                }
            ],
        },
    }


def create(plane: ControlPlane, ns: str, body: dict[str, Any]) -> None:
    """POST a pod; fail loudly."""
    r = plane.api.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    if r.status_code != 201:
        raise RuntimeError(f"create {body['metadata']['name']}: {r.status_code} {r.text}")


def setup_cluster(plane: ControlPlane, tag: str, preemptors: int, victims: int) -> list[str]:
    """The namespace, the full nodes with their running victims, the spare nodes. Returns the
    names of the full nodes."""
    plane.ensure_namespace(tag)
    full = [f"{tag}-full-{i:02d}" for i in range(preemptors)]
    spare = [f"{tag}-spare-{i}" for i in range(SPARE_NODES)]
    with ThreadPoolExecutor(THREADS) as pool:
        list(
            pool.map(
                lambda n: plane.create_node(
                    n, capacity={"cpu": str(FULL_CPU), "memory": "32Gi", "pods": "110"}
                ),
                full,
            )
        )
        list(
            pool.map(
                lambda n: plane.create_node(
                    n, capacity={"cpu": "2", "memory": "32Gi", "pods": "110"}
                ),
                spare,
            )
        )
        cpu = f"{FULL_CPU * 1000 // victims}m"

        def victim(args: tuple[str, int]) -> None:
            node, j = args
            name = f"victim-{node.rsplit('-', 1)[1]}-{j}"
            create(plane, tag, pod_body(name, "nobody", "bench-low", cpu, {"bench/role": "victim"}))
            plane.bind(name, node, tag)
            plane.set_pod_running(name, tag)

        list(pool.map(victim, [(n, j) for n in full for j in range(victims)]))
    return full


def delete_nodes(plane: ControlPlane, tag: str) -> None:
    """Delete the nodes of configuration ``tag``."""
    for node in plane.nodes():
        if node["metadata"]["name"].startswith(f"{tag}-"):
            plane.delete_node(node["metadata"]["name"])


# --------------------------------------------------------------------------- one configuration


def scheduler_config(path: Path, tag: str, runway_url: str | None, release: str) -> Path:
    """kube-scheduler ``release``'s configuration: profile ``tag``, runway as extender unless
    stock."""
    extra = {"clientConnection": {"qps": 1000, "burst": 1000}}
    if runway_url is not None:
        return write_scheduler_config(
            path,
            runway_url,
            release=release,
            scheduler_name=tag,
            http_timeout="30s",
            extra=extra,
        )
    config = {
        "apiVersion": config_api(release),
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": tag}],
        **extra,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@contextmanager
def maybe_runway(
    config: str, plane: ControlPlane, tmp: Path, tag: str
) -> Iterator[tuple[str, int] | None]:
    """runway for ``executes``/``takeover`` (its preemption mode set), nothing for ``stock``."""
    if config == "stock":
        yield None
        return
    runway_config = {
        "kubernetes": {"leaderElection": {"enable": False}},
        "preemption": {"async": config == "takeover", "schedulerNames": [tag]},
    }
    with start_extender("runway", plane, tmp, runway_config) as started:
        yield started


def metric_values(url: str, names: Sequence[str]) -> dict[str, float]:
    """Sums of the samples of ``names`` (labels flattened into the key)."""
    out: dict[str, float] = {}
    for name, labels, value in samples(url):
        if name in names:
            key = name + "".join(f"{{{k}={v}}}" for k, v in sorted(labels.items()))
            out[key] = out.get(key, 0.0) + value
    return out


SCHEDULER_METRICS = (
    "rest_client_requests_total",
    "scheduler_schedule_attempts_total",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims_count",
    "scheduler_preemption_victims_sum",
)
RUNWAY_METRICS = (
    "runway_preemptions_refused_total",
    "runway_preemption_goroutines_execution_total",
    "runway_kube_api_requests_total",
    "runway_requeue_wakeups_total",
)


def measure(
    plane: ControlPlane,
    hook: DeleteWebhook,
    tmp: Path,
    config: str,
    rnd: int,
    ns_args: argparse.Namespace,
) -> Run:
    """Set up, run the burst, measure, clean up one configuration."""
    tag = f"tk-r{rnd}-{config}"
    full = setup_cluster(plane, tag, ns_args.preemptors, ns_args.victims)
    hook.delay_s = ns_args.delay
    sched_metrics: dict[str, float] = {}
    runway_metrics: dict[str, float] = {}
    with maybe_runway(config, plane, tmp, tag) as runway:
        url = scheduler_config(
            tmp / f"{tag}.yaml", tag, runway[0] if runway else None, plane.release
        )
        metrics_url = plane.start_scheduler(url)
        try:
            with Kubelet(plane, tag) as kubelet:
                bodies = []
                per = max(1, ns_args.unrelated // max(1, ns_args.preemptors))
                small = iter(range(ns_args.unrelated))
                for i in range(ns_args.preemptors):
                    bodies.append(
                        pod_body(
                            f"preemptor-{i:02d}",
                            tag,
                            "bench-high",
                            str(FULL_CPU),
                            {"bench/role": "preemptor"},
                        )
                    )
                    for _ in range(per):
                        if (j := next(small, None)) is not None:
                            bodies.append(
                                pod_body(
                                    f"small-{j:03d}",
                                    tag,
                                    "bench-mid",
                                    "10m",
                                    {"bench/role": "small"},
                                )
                            )
                bodies += [
                    pod_body(f"small-{j:03d}", tag, "bench-mid", "10m", {"bench/role": "small"})
                    for j in small
                ]
                load0 = os.getloadavg()[0]
                t0 = time.monotonic()
                with ThreadPoolExecutor(THREADS) as pool:
                    list(pool.map(lambda b: create(plane, tag, b), bodies))
                wanted = {b["metadata"]["name"] for b in bodies}

                def done() -> bool:
                    if kubelet.error is not None:
                        raise RuntimeError(f"kubelet: {kubelet.error}") from kubelet.error
                    return wanted <= set(kubelet.bound_at)

                try:
                    poll(done, within=RUN_DEADLINE_S, what=f"{tag}: every pod bound", every=0.1)
                except AssertionError as exc:
                    print(f"  {tag}: {exc}", flush=True)
            sched_metrics = metric_values(metrics_url, SCHEDULER_METRICS)
            if runway is not None:
                runway_metrics = metric_values(f"{runway[0]}/metrics", RUNWAY_METRICS)
        finally:
            plane.stop_scheduler()
    run = summarise_run(config, rnd, tag, t0, kubelet, hook, full, ns_args)
    run.release, run.loadavg = plane.release, load0
    run.scheduler, run.runway = sched_metrics, runway_metrics
    run.delete_requests = {
        "scheduler": sum(v for k, v in sched_metrics.items() if "{method=DELETE}" in k),
        "runway": sum(
            v
            for k, v in runway_metrics.items()
            if k.startswith("runway_kube_api_requests_total")
            and "{resource=pods}" in k
            and "{verb=delete}" in k.lower()
        ),
    }
    hook.delay_s = 0.0  # cleanup is not measured
    delete_pods(plane, tag)
    delete_nodes(plane, tag)
    print(
        f"  {plane.release} round {rnd} {config:8s}: unrelated bound "
        f"{fmt(run.unrelated_bound_s)} s, last "
        f"preemptor {fmt(run.last_preemptor_s)} s ({run.preemptors_bound}/{run.preemptors}), "
        f"DELETEs per victim {run.deletes_per_victim_min}..{run.deletes_per_victim_max} "
        f"{run.deletes_by}",
        flush=True,
    )
    return run


def summarise_run(
    config: str,
    rnd: int,
    tag: str,
    t0: float,
    kubelet: Kubelet,
    hook: DeleteWebhook,
    full: list[str],
    ns_args: argparse.Namespace,
) -> Run:
    """What one configuration measured, from the kubelet's and the webhook's records."""
    role = kubelet.role_of
    small = [n for n, r in role.items() if r == "small"]
    preemptors = [n for n, r in role.items() if r == "preemptor"]
    victims = [n for n, r in role.items() if r == "victim"]
    small_bound = [kubelet.bound_at[n] for n in small if n in kubelet.bound_at]
    pre_bound = {n: kubelet.bound_at[n] for n in preemptors if n in kubelet.bound_at}
    by_scheduling = hook.deletes(tag, "scheduler") + hook.deletes(tag, "runway")
    per_victim = [by_scheduling.get(kubelet.uid_of[v], 0) for v in victims]
    deleted = [v for v in victims if by_scheduling.get(kubelet.uid_of[v], 0) > 0]
    # Per preemptor: from its node's last victim gone to its bind; small pods that landed on
    # its node in between (the nomination not honoured).
    after_gone, intruders = [], 0
    for p, at in pre_bound.items():
        node = kubelet.node_of[p]
        mine = [v for v in victims if node.endswith(f"-{v.split('-')[1]}")]
        gone = [kubelet.gone_at[v] for v in mine if v in kubelet.gone_at]
        if gone and len(gone) == len(mine):
            after_gone.append(round(at - max(gone), 3))
        intruders += sum(
            1 for s in small if kubelet.node_of.get(s) == node and kubelet.bound_at[s] < at
        )
    assert all(n in full for n in (kubelet.node_of[p] for p in pre_bound))
    return Run(
        release="",
        config=config,
        round=rnd,
        unrelated_bound_s=(
            max(small_bound) - t0 if len(small_bound) == ns_args.unrelated else None
        ),
        last_preemptor_s=(
            max(pre_bound.values()) - t0 if len(pre_bound) == ns_args.preemptors else None
        ),
        preemptors_bound=len(pre_bound),
        preemptors=ns_args.preemptors,
        victims=len(victims),
        victims_deleted=len(deleted),
        deletes_per_victim_max=max(per_victim, default=0),
        deletes_per_victim_min=min(per_victim, default=0),
        callers_per_victim_max=max(
            (
                len({c.caller for c in hook.calls_in(tag) if c.name == v and c.caller != "kubelet"})
                for v in victims
            ),
            default=0,
        ),
        deletes_by={
            caller: sum(hook.deletes(tag, caller).values())
            for caller in ("scheduler", "runway", "kubelet")
        },
        bind_after_victims_gone_s=sorted(after_gone),
        unrelated_on_preemptor_nodes=intruders,
        repeated=[
            {
                "victim": v,
                "calls": [
                    {"caller": c.caller, "at": round(c.at - t0, 3), "allowed": c.allowed}
                    for c in hook.calls_in(tag)
                    if c.name == v
                ],
                "gone_at": round(kubelet.gone_at[v] - t0, 3) if v in kubelet.gone_at else None,
            }
            for v, n in zip(victims, per_victim, strict=True)
            if n > 1
        ],
    )


# --------------------------------------------------------------------------- main


def fmt(value: float | None) -> str:
    """Seconds for the table, or a dash (never reached)."""
    return "-" if value is None else f"{value:.2f}"


def same_round_ratios(runs: Sequence[Run], config: str, attr: str) -> list[float] | None:
    """``attr`` of ``config`` over the stock scheduler's in the same round, one per round; None
    if a run of either never got there."""
    stock = {r.round: getattr(r, attr) for r in runs if r.config == "stock"}
    out = []
    for r in runs:
        if r.config != config or r.round not in stock:
            continue
        mine, theirs = getattr(r, attr), stock[r.round]
        if mine is None or not theirs:
            return None
        out.append(mine / theirs)
    return out or None


def median_of(runs: Sequence[Run], config: str, attr: str) -> float | None:
    """The median of ``attr`` over the rounds of ``config`` (None if one never got there)."""
    values = [getattr(r, attr) for r in runs if r.config == config]
    if not values or any(v is None for v in values):
        return None
    return statistics.median(values)


def bars(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """DESIGN §10's bars per runway configuration of one release: ratios to the stock run of
    the same round, median over the rounds."""
    out: list[dict[str, Any]] = []
    for config in ("executes", "takeover"):
        mine = [r for r in runs if r.config == config]
        if not mine:
            continue
        small = same_round_ratios(runs, config, "unrelated_bound_s")
        last = same_round_ratios(runs, config, "last_preemptor_s")
        once = all(
            r.victims_deleted == r.victims
            and r.callers_per_victim_max == 1
            and sum(r.delete_requests.values()) == r.victims
            for r in mine
        )
        out.append(
            {
                "config": config,
                "unrelated_ratio": None if small is None else statistics.median(small),
                "unrelated_ratios": small,
                "last_preemptor_ratio": None if last is None else statistics.median(last),
                "last_preemptor_ratios": last,
                "every_preemptor_bound": all(r.preemptors_bound == r.preemptors for r in mine),
                "each_victim_deleted_once": once,
            }
        )
    for b in out:
        b["met"] = (
            b["unrelated_ratio"] is not None
            and b["unrelated_ratio"] <= 0.25
            and b["last_preemptor_ratio"] is not None
            and b["last_preemptor_ratio"] <= 1.2
            and b["every_preemptor_bound"]
            and b["each_victim_deleted_once"]
        )
    return out


def report(runs: Sequence[Run], release: str, delay: float) -> list[dict[str, Any]]:
    """Print one release's runs, its medians and its bars; return the bars."""
    print_table(
        f"preemption burst, kube-scheduler {release}, pod DELETE +{delay * 1000:.0f} ms "
        "(seconds from t0)",
        (
            "config",
            "round",
            "load",
            "unrelated bound",
            "last preemptor",
            "preemptors",
            "admission calls/victim",
            "DELETE requests sched/runway",
            "bind after victims gone p50/max",
            "nomination broken",
        ),
        [
            (
                r.config,
                str(r.round),
                fmt(r.loadavg),
                fmt(r.unrelated_bound_s),
                fmt(r.last_preemptor_s),
                f"{r.preemptors_bound}/{r.preemptors}",
                f"{r.deletes_per_victim_min}..{r.deletes_per_victim_max}",
                f"{r.delete_requests.get('scheduler', 0):.0f}/"
                f"{r.delete_requests.get('runway', 0):.0f}",
                (
                    f"{statistics.median(r.bind_after_victims_gone_s):.2f}/"
                    f"{max(r.bind_after_victims_gone_s):.2f}"
                    if r.bind_after_victims_gone_s
                    else "-"
                ),
                str(r.unrelated_on_preemptor_nodes),
            )
            for r in runs
        ],
    )
    verdict = bars(runs)
    by_config = {b["config"]: b for b in verdict}
    print_table(
        f"kube-scheduler {release}: medians over the rounds; x stock = same-round ratio, median",
        ("config", "unrelated bound", "x stock", "last preemptor", "x stock"),
        [
            (
                config,
                fmt(median_of(runs, config, "unrelated_bound_s")),
                "1.00" if config == "stock" else fmt(by_config[config]["unrelated_ratio"]),
                fmt(median_of(runs, config, "last_preemptor_s")),
                "1.00" if config == "stock" else fmt(by_config[config]["last_preemptor_ratio"]),
            )
            for config in CONFIGS
            if any(r.config == config for r in runs) and (config == "stock" or config in by_config)
        ],
    )
    print(f"\nbars (DESIGN §10), against stock, {release}")
    for b in verdict:
        print(
            f"  [{'MET' if b['met'] else 'MISSED':6s}] {b['config']}: unrelated "
            f"{fmt(b['unrelated_ratio'])}x (<= 0.25), last preemptor "
            f"{fmt(b['last_preemptor_ratio'])}x (<= 1.2), every preemptor bound "
            f"{b['every_preemptor_bound']}, each victim deleted once "
            f"{b['each_victim_deleted_once']}"
        )
    return verdict


def main(argv: Sequence[str] | None = None) -> int:
    """Run the configurations, print the table and the bars, write the JSON results."""
    parser = argparse.ArgumentParser(prog="python -m bench.takeover", description=__doc__)
    parser.add_argument("--preemptors", type=int, default=12)
    parser.add_argument("--victims", type=int, default=4, help="victims per preemptor")
    parser.add_argument("--unrelated", type=int, default=120)
    parser.add_argument("--delay", type=float, default=0.25, help="seconds per pod DELETE")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", type=Path, default=OUT / "takeover.json")
    parser.add_argument(
        "--release",
        default=None,
        help="comma-separated Kubernetes releases, measured one after the other (default: "
        "$RUNWAY_K8S_RELEASES, else the e2e matrix's default)",
    )
    ns = parser.parse_args(argv)
    configs = ns.configs.split(",")
    if unknown := set(configs) - set(CONFIGS):
        parser.error(f"unknown configuration(s) {', '.join(sorted(unknown))}")
    releases = bench_releases(ns.release)
    info = machine()
    print(
        f"{info['cpu']}, {info['cores']} cores, load {info['loadavg_start'][0]:.2f}; "
        f"{ns.preemptors} preemptors x {ns.victims} victims, {ns.unrelated} unrelated pods, "
        f"DELETE +{ns.delay * 1000:.0f} ms; releases {', '.join(releases)}",
        flush=True,
    )
    started = time.time()
    runs: list[Run] = []
    verdicts: dict[str, list[dict[str, Any]]] = {}
    for release in releases:
        mine: list[Run] = []
        with (
            tempfile.TemporaryDirectory(prefix="runway-takeover-") as tmp,
            control_plane_up(release) as plane,
            DeleteWebhook(delay_s=0.0) as hook,
        ):
            for name, value in PRIORITIES.items():
                plane.ensure_priority_class(name, value)
            hook.register(plane)
            for rnd in range(ns.rounds):
                order = configs if rnd % 2 == 0 else configs[::-1]
                for config in order:
                    mine.append(measure(plane, hook, Path(tmp), config, rnd, ns))
        runs += mine
        verdicts[release] = report(mine, release, ns.delay)
    info["loadavg_end"] = os.getloadavg()
    result = {
        "machine": info,
        "args": {k: str(v) for k, v in vars(ns).items()},
        "releases": releases,
        "started": started,
        "seconds": round(time.time() - started, 1),
        "runs": [asdict(r) for r in runs],
        "bars": verdicts,
    }
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {ns.out} ({result['seconds']} s)")
    met = all(b["met"] for v in verdicts.values() for b in v if b["config"] == "takeover")
    return 0 if verdicts and met else 1


if __name__ == "__main__":
    sys.exit(main())
