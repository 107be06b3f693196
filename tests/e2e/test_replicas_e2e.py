"""Issue 27 items 3 and 4: a preemption storm on two runway replicas, on the real kube-scheduler.

Two replicas (Lease election on) behind ``AlternatingProxy``: every extender call goes to the
other replica. runway's API calls go through ``DelayProxy`` (+100 ms each, a loaded API server);
every pod DELETE is slowed by a webhook (+250 ms). The storm: preemptors that each need a whole
node of low-priority victims. Only the leader decides and executes preemptions (a follower
forwards ``preempt`` to the leader's address on the Lease — ``{}`` when it cannot reach it — and
holds the gates mirrored on records), so: every preemptor
binds, the DELETEs runway sent over both replicas equal the victims, and each victim's workload
records one preemption — also when the leader is SIGKILLed in the middle (the hand-over time is
printed).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import (
    ControlPlane,
    RunwayFactory,
    RunwayHandle,
    poll,
    write_scheduler_config,
)
from tests.e2e.kubelet import Kubelet
from tests.e2e.proxies import AlternatingProxy, DelayProxy
from tests.e2e.webhook import DeleteWebhook

SCHEDULER = "runway-e2e-replicas"
PREEMPTORS, VICTIMS = 6, 4
CONFIG: dict[str, Any] = {
    "queues": [
        # a budget keeps each victim workload's preemption history: one entry per preemption
        {"name": "batch", "preemptionBudget": {"maxPreemptions": 10, "window": "1h"}},
    ],
    "kubernetes": {
        "leaderElection": {"leaseDuration": "6s", "renewDeadline": "4s", "retryPeriod": "1s"}
    },
    # takeover on every release (auto lets kube-scheduler execute from 1.33: DESIGN §1.1)
    "preemption": {"async": True, "gateTimeout": "120s", "schedulerNames": [SCHEDULER]},
    "logging": {"level": "info"},
}


@dataclass
class Stack:
    plane: ControlPlane
    replicas: list[RunwayHandle]
    proxy: AlternatingProxy
    hook: DeleteWebhook


def delayed_kubeconfig(plane: ControlPlane, port: int, path: Path) -> Path:
    """The plane's admin kubeconfig, pointed at the delaying proxy."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def stack(
    dedicated_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    plane = dedicated_plane
    tmp = tmp_path_factory.mktemp("replicas")
    for name, value in (("low", 100), ("high", 1000)):
        plane.ensure_priority_class(name, value)
    api = urlsplit(plane.url)
    assert api.hostname is not None and api.port is not None
    factory = RunwayFactory(plane, tmp)
    with contextlib.ExitStack() as stack:
        delay = stack.enter_context(DelayProxy(api.hostname, api.port, delay_s=0.1))
        kubeconfig = delayed_kubeconfig(plane, delay.port, tmp / "delayed.kubeconfig")
        stack.callback(factory.close)
        # POD_IP, as the chart sets it: the leader advertises http://127.0.0.1:<its port>/scheduler
        replicas = [
            factory.start(
                CONFIG, args=("--kubeconfig", str(kubeconfig)), env={"POD_IP": "127.0.0.1"}
            )
            for _ in range(2)
        ]
        proxy = stack.enter_context(AlternatingProxy([r.url for r in replicas]))
        hook = stack.enter_context(DeleteWebhook(delay_s=0.25))
        hook.register(plane)
        scheduler = write_scheduler_config(
            tmp / "scheduler.yaml",
            proxy.url,
            release=plane.release,
            scheduler_name=SCHEDULER,
            extra={"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 2},
        )
        plane.start_scheduler(scheduler)
        stack.callback(plane.stop_scheduler)
        poll(lambda: leader_of(replicas) is not None, within=60, what="a leader elected")
        try:
            yield Stack(plane, replicas, proxy, hook)
        except BaseException:
            for r in replicas:
                print(f"--- runway {r.url} ---\n{r.logs()[-20000:]}")
            raise


def leader_of(replicas: list[RunwayHandle]) -> RunwayHandle | None:
    for r in replicas:
        with contextlib.suppress(Exception):
            if r.get("/v1/cache/summary").get("leader") is True:
                return r
    return None


def sample(rw: RunwayHandle, name: str, **labels: str) -> float:
    """One series of one replica's /metrics (0 when absent)."""
    text = rw.client.get("/metrics").raise_for_status().text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def pod_deletes(rw: RunwayHandle) -> float:
    """DELETE requests this replica sent for pods (every answer code)."""
    return sample(rw, "runway_kube_api_requests_total", verb="delete", resource="pods")


def deleted_by(rw: RunwayHandle, ns: str) -> dict[str, int]:
    """Pods of ``ns`` this replica sent a DELETE for, with how many times (from its log, which
    outlives a SIGKILL: runway logs the DELETE before sending it)."""
    counts: dict[str, int] = {}
    for line in rw.logs().splitlines():
        found = re.search(r"deleting pod .*\bpod=(\S+)", line)
        if found and found.group(1).startswith(f"{ns}/"):
            name = found.group(1).split("/", 1)[1]
            counts[name] = counts.get(name, 0) + 1
    return counts


def pod(name: str, priority: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"runway.dev/queue": "batch"}},
        "spec": {
            "schedulerName": SCHEDULER,
            "priorityClassName": priority,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def storm(s: Stack, ns: str, kill_leader: bool) -> dict[str, Any]:
    """Full nodes of running victims, then one preemptor per node; returns what was seen."""
    plane = s.plane
    plane.ensure_namespace(ns)
    nodes = [f"{ns}-n{i}" for i in range(PREEMPTORS)]
    for node in nodes:
        plane.create_node(node, capacity={"cpu": "4", "memory": "32Gi", "pods": "110"})
    victims = [f"v-{i}-{j}" for i in range(PREEMPTORS) for j in range(VICTIMS)]
    with Kubelet(plane, ns) as kubelet:
        with ThreadPoolExecutor(8) as pool:

            def place(name: str) -> None:
                r = plane.api.post(f"/api/v1/namespaces/{ns}/pods", json=pod(name, "low", "1"))
                assert r.status_code == 201, r.text
                plane.bind(name, nodes[int(name.split("-")[1])], ns)

            list(pool.map(place, victims))
        poll(
            lambda: all(v in kubelet.bound_at for v in victims),
            within=60,
            what="the victims running",
        )
        uids = {kubelet.uid_of[v] for v in victims}
        before = {r.url: pod_deletes(r) for r in s.replicas}
        forwarded = {
            r.url: sample(r, "runway_preempt_forwarded_total", outcome="ok") for r in s.replicas
        }
        started = time.monotonic()
        for i in range(PREEMPTORS):
            r = plane.api.post(f"/api/v1/namespaces/{ns}/pods", json=pod(f"p-{i}", "high", "4"))
            assert r.status_code == 201, r.text
        handover: float | None = None
        killed: RunwayHandle | None = None
        killed_at: float | None = None
        if kill_leader:
            # In the middle of the storm: once the first victims are being deleted.
            poll(
                lambda: len([c for c in s.hook.calls if c.namespace == ns]) >= VICTIMS,
                within=120,
                what="the storm under way",
            )
            killed = leader_of(s.replicas)
            assert killed is not None
            killed_at = time.monotonic()
            killed.kill()
            t0 = killed_at
            survivor = next(r for r in s.replicas if r is not killed)
            poll(lambda: leader_of([survivor]) is survivor, within=60, what="the hand-over")
            handover = time.monotonic() - t0
        preemptors = [f"p-{i}" for i in range(PREEMPTORS)]
        poll(
            lambda: all(p in kubelet.bound_at for p in preemptors),
            within=240,
            every=0.5,
            what="every preemptor bound",
        )
        bound_in = time.monotonic() - started
        if kubelet.error is not None:
            raise kubelet.error
    alive = [r for r in s.replicas if r is not killed]
    relayed = sum(
        sample(r, "runway_preempt_forwarded_total", outcome="ok") - forwarded[r.url] for r in alive
    )
    sent = sum(pod_deletes(r) - before[r.url] for r in alive)
    by_runway: dict[str, list[Any]] = {}
    for c in s.hook.calls:
        if c.namespace == ns and c.caller == "runway" and c.uid in uids:
            by_runway.setdefault(c.uid, []).append(c)
    records = {r["metadata"]["name"]: r for r in plane.records(ns)}
    return {
        "uids": uids,
        "victims": victims,
        "sent": sent,
        "by_runway": by_runway,
        "by_scheduler": [c for c in s.hook.calls if c.namespace == ns and c.caller == "scheduler"],
        "records": records,
        "handover": handover,
        "killed_at": killed_at,
        "killed": killed,
        "deleted_by": {r.url: deleted_by(r, ns) for r in s.replicas},
        "proxy": dict(s.proxy.sent),
        "forwarded": relayed,
        "bound_in": bound_in,
    }


def assert_one_victim_one_preemption(seen: dict[str, Any]) -> None:
    assert seen["by_scheduler"] == [], "kube-scheduler deleted a victim itself"
    # Every victim got a DELETE from runway, and never one while it was being deleted already
    # (the webhook sees every DELETE and the pod as it was: a second deletion would show)...
    calls = seen["by_runway"]
    assert set(calls) == seen["uids"], calls
    assert not [c for cs in calls.values() for c in cs if c.terminating], calls
    # ...each replica sent at most one DELETE per victim...
    per_replica = seen["deleted_by"]
    for url, counts in per_replica.items():
        assert all(n == 1 for n in counts.values()), (url, counts)
    # ...and only one replica did, but for a DELETE the killed leader had in flight when it
    # died (dropped with its connection), which the new leader sent again.
    killed = seen["killed"]
    for victim in seen["victims"]:
        senders = [url for url, counts in per_replica.items() if victim in counts]
        assert senders, f"nobody deleted {victim}"
        if len(senders) > 1:
            assert killed is not None and killed.url in senders, (victim, senders)
    # ...and each victim's workload records one preemption.
    for victim in seen["victims"]:
        record = seen["records"].get(f"pod.{victim}")
        assert record is not None, f"no record for {victim}"
        eviction = record["status"]["eviction"]
        assert eviction["reason"] == "Preempted", eviction
        assert len(eviction.get("preemptionHistory", [])) == 1, eviction


def test_a_storm_on_two_replicas_deletes_each_victim_once(stack: Stack) -> None:
    seen = storm(stack, "storm", kill_leader=False)
    assert_one_victim_one_preemption(seen)
    # runway's own count, summed over both replicas: one DELETE per victim.
    assert seen["sent"] == PREEMPTORS * VICTIMS, seen["sent"]
    # The proxy really spread the calls over both replicas, and the follower's preempt calls
    # reached the leader through it (forwarded, not refused).
    assert all(n > 0 for n in seen["proxy"].values()), seen["proxy"]
    assert seen["forwarded"] > 0, "no preempt call was forwarded to the leader"
    print(
        f"storm on two replicas: every preemptor bound in {seen['bound_in']:.1f} s; "
        f"{seen['forwarded']:.0f} preempt call(s) forwarded by the follower"
    )


def test_the_leader_killed_mid_storm_deletes_nothing_twice(stack: Stack) -> None:
    seen = storm(stack, "storm-kill", kill_leader=True)
    assert_one_victim_one_preemption(seen)
    both = [v for v in seen["victims"] if all(v in c for c in seen["deleted_by"].values())]
    resent = len(both)
    print(
        f"hand-over after SIGKILL of the leader: {seen['handover']:.1f} s (leaseDuration 6s); "
        f"{resent} DELETE(s) in flight at the kill sent again by the new leader"
    )
