"""Capture a real kube-scheduler's extender calls as golden payloads (tests/data/wire/RELEASE/).

    .venv/bin/python -m bench.capture_wire --release 1.37.2 [--out tests/data/wire]

On the project's control plane (``tools/kube up RELEASE``), a kube-scheduler of that release calls
a small recording extender (this module, a stdlib HTTP server) that answers pass-through: filter
keeps every node, prioritize scores the offered nodes 0, 1, 2… in order, preempt accepts every
node with every victim the scheduler offered. Twice, once per cache mode (``nodeCacheCapable``
true and false), the scenario of the 1.20.2 captures (tests/data/README.md):

3 nodes of 2 CPU (``runway.dev/pool`` a, a, b), priority classes ``low`` (100) and ``high``
(1000); six 1-CPU ``low`` pods of workload ``train-low`` (queue ``team-a``, owned by Job
``train-low``, annotation ``runway.dev/min-available: "4"``), then one 2-CPU ``high`` pod
(``high-0``, queue ``team-b``) that must preempt. The test kubelet (tests/e2e/kubelet.py) marks
bound pods Running and finishes deletions.

Kept per mode: ``filter`` and ``prioritize`` (the first low pod's calls), ``preempt`` (high-0's
first) and ``filter-nominated-node`` (high-0's filter after its preemption, sent its nominated node
alone). Each file: ``{"verb", "nodeCacheCapable", "release", "request", "accepted_response",
"headers"}`` — ``request`` exactly as POSTed, ``headers`` the Content-Type and User-Agent it came
with. A new capture replaces the files whole: update tests/data/SHA256SUMS in the same commit.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.e2e.conftest import (
    ControlPlane,
    control_plane_up,
    resolve_release,
    write_scheduler_config,
)
from tests.e2e.kubelet import Kubelet

WIRE = Path(__file__).resolve().parents[1] / "tests" / "data" / "wire"
NS = "default"
JOB_UID = "9779a047-4261-4443-b55c-0fdd321372e7"
"""The owner Job's UID (no Job object exists: the pods only name it, as in the 1.20 capture)."""


def pass_through(verb: str, request: dict[str, Any]) -> Any:
    """The reply that accepts everything the scheduler offered (the shape, not runway's policy)."""
    if verb == "filter":
        if request.get("NodeNames") is not None:
            return {
                "Nodes": None,
                "NodeNames": request["NodeNames"],
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": {},
                "Error": "",
            }
        return {
            "Nodes": request["Nodes"],
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }
    if verb == "prioritize":
        names = request.get("NodeNames")
        if names is None:
            names = [n["metadata"]["name"] for n in request["Nodes"]["items"]]
        return [{"Host": name, "Score": i} for i, name in enumerate(names)]
    meta = request.get("NodeNameToMetaVictims")
    if meta is not None:
        return {"NodeNameToMetaVictims": meta}
    return {
        "NodeNameToMetaVictims": {
            node: {
                "Pods": [{"UID": p["metadata"]["uid"]} for p in (v["Pods"] or [])],
                "NumPDBViolations": v["NumPDBViolations"],
            }
            for node, v in request["NodeNameToVictims"].items()
        }
    }


class Recorder:
    """Every call the scheduler made, in order: (verb, request, reply, headers)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], Any, dict[str, str]]] = []
        self.lock = threading.Lock()

    def find(self, verb: str, test: Callable[[dict[str, Any]], bool]) -> list[int]:
        with self.lock:
            return [i for i, c in enumerate(self.calls) if c[0] == verb and test(c[1])]


@contextmanager
def recording_extender() -> Iterator[tuple[str, Recorder]]:
    """A pass-through extender on a free loopback port; yields its URL and the recorder."""
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            verb = self.path.rstrip("/").rsplit("/", 1)[-1]
            request = json.loads(body)
            reply = pass_through(verb, request)
            headers = {k: self.headers.get(k, "") for k in ("Content-Type", "User-Agent")}
            with recorder.lock:
                recorder.calls.append((verb, request, reply, headers))
            out = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    finally:
        server.shutdown()
        server.server_close()


def poll(check: Callable[[], Any], within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise TimeoutError(f"waited {within} s for {what}")


def create_pod(plane: ControlPlane, name: str, *, high: bool) -> None:
    """A pod shaped as the 1.20 capture's (container ``c``, busybox, cpu requests = limits)."""
    cpu = "2" if high else "1"
    meta: dict[str, Any] = {"name": name}
    if high:
        meta["labels"] = {"runway.dev/queue": "team-b", "runway.dev/workload": "serve-high"}
    else:
        meta["labels"] = {
            "job-name": "train-low",
            "runway.dev/queue": "team-a",
            "runway.dev/workload": "train-low",
        }
        meta["annotations"] = {"runway.dev/min-available": "4"}
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "train-low",
                "uid": JOB_UID,
                "controller": True,
            }
        ]
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
            }
        ],
        "priorityClassName": "high" if high else "low",
    }
    r = plane.api.post(
        f"/api/v1/namespaces/{NS}/pods",
        json={"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
    )
    assert r.status_code == 201, r.text


def bound(plane: ControlPlane, name: str) -> bool:
    r = plane.api.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    return r.status_code == 200 and bool(r.json()["spec"].get("nodeName"))


def capture_mode(plane: ControlPlane, tmp: Path, node_cache: bool) -> dict[str, dict[str, Any]]:
    """One scenario run with ``nodeCacheCapable: node_cache``; returns {file stem: case}."""
    mode = "nodecache" if node_cache else "nodelist"
    with recording_extender() as (url, rec), Kubelet(plane, NS) as kubelet:
        config = write_scheduler_config(
            tmp / f"{mode}.yaml",
            url,
            release=plane.release,
            url_prefix="",
            node_cache_capable=node_cache,
            extra={"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 2},
        )
        plane.start_scheduler(config)
        try:
            for i in range(6):
                create_pod(plane, f"low-{i}", high=False)
            poll(lambda: all(bound(plane, f"low-{i}") for i in range(6)), 60, "six low pods bound")
            poll(
                lambda: (
                    len(kubelet.bound_at) >= 6
                    and all(
                        p["status"].get("phase") == "Running"
                        for p in plane.api.get(f"/api/v1/namespaces/{NS}/pods").json()["items"]
                    )
                ),
                30,
                "six low pods Running",
            )
            create_pod(plane, "high-0", high=True)
            poll(lambda: bound(plane, "high-0"), 120, "high-0 bound after preempting")
        finally:
            plane.stop_scheduler()
        assert kubelet.error is None, kubelet.error
    first_low = rec.calls[rec.find("filter", lambda r: r["Pod"]["metadata"]["name"] == "low-0")[0]]
    low_uid = first_low[1]["Pod"]["metadata"]["uid"]

    def of_pod(uid: str) -> Callable[[dict[str, Any]], bool]:
        return lambda r: r["Pod"]["metadata"]["uid"] == uid

    high = rec.find("preempt", lambda r: r["Pod"]["metadata"]["name"] == "high-0")
    assert high, "high-0 was never sent to preempt"
    high_uid = rec.calls[high[0]][1]["Pod"]["metadata"]["uid"]
    nominated = rec.find(
        "filter",
        lambda r: of_pod(high_uid)(r) and bool(r["Pod"].get("status", {}).get("nominatedNodeName")),
    )
    picks = {
        "filter": rec.find("filter", of_pod(low_uid))[0],
        "prioritize": rec.find("prioritize", of_pod(low_uid))[0],
        "preempt": high[0],
    }
    if nominated:
        picks["filter-nominated-node"] = nominated[0]
    else:
        print(f"{plane.release} {mode}: no filter call for high-0 with its nominated node")
    out = {}
    for stem, index in picks.items():
        verb, request, reply, headers = rec.calls[index]
        out[f"{mode}-{stem}"] = {
            "verb": verb,
            "nodeCacheCapable": node_cache,
            "release": plane.release,
            "request": request,
            "accepted_response": reply,
            "headers": headers,
        }
    return out


def clear_pods(plane: ControlPlane) -> None:
    for p in plane.api.get(f"/api/v1/namespaces/{NS}/pods").json()["items"]:
        plane.delete_pod(p["metadata"]["name"], NS)
    poll(
        lambda: not plane.api.get(f"/api/v1/namespaces/{NS}/pods").json()["items"],
        60,
        "pods gone",
    )


def capture(release: str, out: Path) -> list[Path]:
    """Both modes on a fresh plane of ``release``; writes ``out/RELEASE/*.json``."""
    import tempfile

    written = []
    with control_plane_up(release) as plane, tempfile.TemporaryDirectory() as tmp:
        plane.ensure_priority_class("low", 100)
        plane.ensure_priority_class("high", 1000)
        for i, pool in enumerate("aab"):
            plane.create_node(
                f"node-{i}",
                labels={"kubernetes.io/hostname": f"node-{i}", "runway.dev/pool": pool},
                capacity={"cpu": "2", "memory": "8Gi", "pods": "110"},
            )
            plane.api.patch(  # the Ready condition's message, as in the 1.20 capture
                f"/api/v1/nodes/node-{i}/status",
                json={"status": {"conditions": [{"type": "Ready", "message": "simulated"}]}},
                headers={"Content-Type": "application/strategic-merge-patch+json"},
            ).raise_for_status()
        cases: dict[str, dict[str, Any]] = {}
        for node_cache in (True, False):
            cases |= capture_mode(plane, Path(tmp), node_cache)
            clear_pods(plane)
        folder = out / plane.release
        folder.mkdir(parents=True, exist_ok=True)
        for stem, case in sorted(cases.items()):
            path = folder / f"{stem}.json"
            path.write_text(json.dumps(case, indent=1))
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", action="append", required=True, help="e.g. 1.37.2")
    parser.add_argument("--out", type=Path, default=WIRE)
    args = parser.parse_args()
    for release in args.release:
        for path in capture(resolve_release(release), args.out):
            print(path)


if __name__ == "__main__":
    main()
