"""A slow API server for pod DELETE: a validating admission webhook that sleeps, then allows.

What a loaded API server or a slow webhook does to every pod ``DELETE``, built on the control
plane of ``control-plane.sh`` (its kube-apiserver runs the ValidatingAdmissionWebhook plugin, on
by default in 1.20): a few lines of stdlib ``http.server`` + ``ssl`` on 127.0.0.1 with a
certificate from ``tests/certs.py``, registered by a ValidatingWebhookConfiguration
(``failurePolicy: Fail``, ``sideEffects: None``, the CA in ``caBundle``).

It also counts: every DELETE it is asked about is kept as a ``DeleteCall`` with the pod's
namespace/name/UID and the caller. kube-scheduler, runway and the test's kubelet all use the
plane's one admin token, so the caller is told apart by the ``DeleteOptions`` the AdmissionReview
carries: runway deletes with a UID precondition (``app/kube/pods.py``), kube-scheduler 1.20 with
empty options (``pkg/scheduler/util.DeletePod``), the test's kubelet with
``gracePeriodSeconds: 0``. Pods labelled ``e2e/undeletable`` are refused (the failure paths).

Shared by the e2e tests (``tests/e2e/test_takeover_e2e.py``) and the benchmark
(``bench/takeover.py``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import httpx

from tests.certs import CA
from tests.e2e.conftest import ControlPlane, RunwayHandle, poll, runway_scheduling

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
"""Where MutatingWebhookConfigurations live."""

UNDELETABLE = "e2e/undeletable"
"""Label of pods whose DELETE the webhook refuses."""

Caller = Literal["runway", "scheduler", "kubelet"]


def caller_of(options: dict[str, Any] | None) -> Caller:
    """Who sent a pod DELETE, from its DeleteOptions (see the module's docstring)."""
    options = options or {}
    if (options.get("preconditions") or {}).get("uid"):
        return "runway"
    if options.get("gracePeriodSeconds") == 0:
        return "kubelet"
    return "scheduler"


@dataclass(frozen=True)
class DeleteCall:
    """One pod DELETE the API server asked the webhook about."""

    namespace: str
    name: str
    uid: str
    caller: Caller
    user: str
    at: float
    allowed: bool
    terminating: bool = False
    """The pod was being deleted already (a DELETE of a terminating pod: a second deletion)."""


class DeleteWebhook:
    """The webhook server; ``with DeleteWebhook(...) as hook: hook.register(plane)``."""

    def __init__(self, delay_s: float = 0.25, name: str = "runway-slow-delete") -> None:
        self.delay_s = delay_s
        self.name = name
        self.calls: list[DeleteCall] = []
        self._lock = threading.Lock()
        self._ca = CA("runway-e2e-webhook-ca")
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._plane: ControlPlane | None = None

    # --- the server -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The https URL the API server calls."""
        assert self._server is not None, "not started"
        return f"https://127.0.0.1:{self._server.server_address[1]}/validate"

    def start(self) -> DeleteWebhook:
        """Listen on a free loopback port (TLS) in a daemon thread."""
        leaf = self._ca.issue("127.0.0.1", server=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory(prefix="runway-webhook-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_bytes(leaf.cert)
            key.write_bytes(leaf.key)
            context.load_cert_chain(cert, key)
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses its connections

            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                reply = json.dumps(hook.review(review)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the test's output is the table, not an access log

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                # The API server gave up on a review (the DELETE's client went away: a killed
                # replica) and closed the connection before the delayed reply: not the test's
                # failure, and nothing to print.
                if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
                    super().handle_error(request, client_address)

        server = Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True, name=self.name)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Unregister (if registered) and stop serving."""
        if self._plane is not None:
            self._plane.api.delete(
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" + self.name
            )
            self._plane = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> DeleteWebhook:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def review(self, review: dict[str, Any]) -> dict[str, Any]:
        """Answer one AdmissionReview: record the call, sleep ``delay_s``, allow unless the pod
        is labelled ``e2e/undeletable``."""
        request = review.get("request") or {}
        pod = request.get("oldObject") or {}
        meta = pod.get("metadata") or {}
        allowed = UNDELETABLE not in (meta.get("labels") or {})
        call = DeleteCall(
            namespace=request.get("namespace", ""),
            name=request.get("name", ""),
            uid=meta.get("uid", ""),
            caller=caller_of(request.get("options")),
            user=(request.get("userInfo") or {}).get("username", ""),
            at=time.monotonic(),
            allowed=allowed,
            terminating=bool(meta.get("deletionTimestamp")),
        )
        with self._lock:
            self.calls.append(call)
        if self.delay_s > 0:
            time.sleep(self.delay_s)  # the slow API server (0: set while a caller cleans up)
        response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": allowed}
        if not allowed:
            response["status"] = {"code": 403, "message": f"pod is labelled {UNDELETABLE}"}
        return {
            "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
            "kind": "AdmissionReview",
            "response": response,
        }

    # --- the API server side --------------------------------------------------------------

    def register(self, plane: ControlPlane, namespace: str = "default") -> None:
        """Create the ValidatingWebhookConfiguration and wait until the API server calls it
        (a probe pod labelled ``e2e/undeletable`` in ``namespace`` is refused)."""
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": [
                {
                    "name": f"{self.name}.runway.dev",
                    "clientConfig": {
                        "url": self.url,
                        "caBundle": base64.b64encode(self._ca.pem).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["DELETE"],
                            "resources": ["pods"],
                            "scope": "Namespaced",
                        }
                    ],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1", "v1beta1"],
                    "timeoutSeconds": 10,
                }
            ],
        }
        r = plane.api.post(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", json=body
        )
        assert r.status_code == 201, r.text
        self._plane = plane
        probe = f"webhook-probe-{uuid.uuid4().hex[:6]}"
        plane.create_pod(probe, namespace, labels={UNDELETABLE: "true"})

        def refused() -> bool:
            r = plane.api.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{probe}",
                json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )
            return r.status_code == 403 or (r.is_error and "undeletable" in r.text)

        poll(refused, within=30, what="the API server to call the DELETE webhook", every=0.2)
        plane.api.patch(
            f"/api/v1/namespaces/{namespace}/pods/{probe}",
            json={"metadata": {"labels": {UNDELETABLE: None}}},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()
        plane.delete_pod(probe, namespace)
        with self._lock:
            self.calls = [c for c in self.calls if c.name != probe]

    # --- counts -----------------------------------------------------------------------------

    def deletes(self, namespace: str, caller: Caller | None = None) -> Counter[str]:
        """DELETE calls per pod UID in ``namespace`` (by ``caller``, or by any caller)."""
        with self._lock:
            return Counter(
                c.uid
                for c in self.calls
                if c.namespace == namespace and (caller is None or c.caller == caller)
            )

    def calls_in(self, namespace: str) -> list[DeleteCall]:
        """Every recorded call for pods of ``namespace``."""
        with self._lock:
            return [c for c in self.calls if c.namespace == namespace]


class GateWebhook:
    """runway's gate webhook as kube-apiserver reaches it in the e2e tests: a loopback HTTPS
    front (kube-apiserver calls webhooks over HTTPS only; runway runs plain HTTP here) that
    relays each AdmissionReview to ``target`` (runway's ``/webhooks/gate``), registered by a
    MutatingWebhookConfiguration as the chart writes it (``failurePolicy: Ignore``, 2 s) for
    the given namespaces. ``target = None``: the front answers nothing (closes the connection),
    as a runway that is down. ``with GateWebhook(...) as hook: hook.register(plane, [ns])``."""

    def __init__(self, target: str | None = None, name: str = "runway-e2e-gate") -> None:
        self.target = target
        self.name = name
        self._ca = CA("runway-e2e-gate-ca")
        self._server: ThreadingHTTPServer | None = None
        self._plane: ControlPlane | None = None
        self.reviews = 0
        self.latencies: list[float] = []
        """Seconds runway took to answer each review relayed (over loopback HTTP)."""
        self._client = httpx.Client(timeout=2)  # kept-alive connections to runway

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"https://127.0.0.1:{self._server.server_address[1]}/webhooks/gate"

    def start(self) -> GateWebhook:
        leaf = self._ca.issue("127.0.0.1", server=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory(prefix="runway-gate-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_bytes(leaf.cert)
            key.write_bytes(leaf.key)
            context.load_cert_chain(cert, key)
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                target = hook.target
                if target is None:  # runway down: no answer at all
                    self.close_connection = True
                    return
                hook.reviews += 1
                start = time.perf_counter()
                r = hook._client.post(
                    target + "/webhooks/gate",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                hook.latencies.append(time.perf_counter() - start)
                self.send_response(r.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            def log_message(self, format: str, *args: Any) -> None:
                return

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
                    super().handle_error(request, client_address)

        server = Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name=self.name).start()
        return self

    def register(
        self,
        plane: ControlPlane,
        namespaces: list[str],
        *,
        every_namespace: bool = False,
        scheduler: str = "default-scheduler",
    ) -> None:
        """The MutatingWebhookConfiguration for pods of ``namespaces`` pointing at this front
        (``register_gate_webhook``)."""
        register_gate_webhook(
            plane,
            self.name,
            self.url,
            self._ca.pem,
            namespaces,
            every_namespace=every_namespace,
            scheduler=scheduler,
        )
        self._plane = plane

    def stop(self) -> None:
        """Unregister (if registered) and stop serving."""
        if self._plane is not None:
            unregister_gate_webhook(self._plane, self.name)
            self._plane = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._client.close()

    def __enter__(self) -> GateWebhook:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def register_gate_webhook(
    plane: ControlPlane,
    name: str,
    url: str,
    ca_pem: bytes,
    namespaces: list[str],
    *,
    every_namespace: bool = False,
    scheduler: str = "default-scheduler",
) -> None:
    """Register runway's gate webhook at ``url`` (HTTPS, its certificate signed by ``ca_pem``)
    as the chart writes it (``failurePolicy: Ignore``, 2 s) for pods of ``namespaces``
    (``every_namespace``: of every namespace but kube-system and default, as the chart leaves
    out its own); returns once a dry-run pod CREATE in ``namespaces[0]`` comes back gated (the
    API server calls the webhook; the probe names ``scheduler``, one runway serves).
    ``unregister_gate_webhook(plane, name)`` removes it."""
    expression = {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn" if every_namespace else "In",
        "values": ["kube-system", "default"] if every_namespace else namespaces,
    }
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "gate.runway.dev",
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchExpressions": [expression]},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 2,
            }
        ],
    }
    unregister_gate_webhook(plane, name)
    r = plane.api.post(WEBHOOKS, json=body)
    assert r.status_code == 201, r.text
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gate-probe", "labels": {"runway.dev/queue": "probe"}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}],
        },
    }

    def gated() -> bool:
        r = plane.api.post(
            f"/api/v1/namespaces/{namespaces[0]}/pods", params={"dryRun": "All"}, json=probe
        )
        gates = (r.json().get("spec") or {}).get("schedulingGates") or []
        return r.status_code == 201 and bool(gates)

    poll(gated, within=30, what="the API server to call the gate webhook", every=0.2)


def unregister_gate_webhook(plane: ControlPlane, name: str) -> None:
    """Delete the MutatingWebhookConfiguration ``name`` (gone already: fine)."""
    plane.api.delete(f"{WEBHOOKS}/{name}")


@contextlib.contextmanager
def gated_runway_scheduling(
    plane: ControlPlane,
    tmp: Path,
    config: dict[str, Any],
    *,
    scheduler_name: str,
    priorities: dict[str, int],
    probe_namespace: str,
) -> Iterator[RunwayHandle]:
    """``runway_scheduling`` with runway's gate webhook registered as the chart registers it
    where the release has gates (1.30+; issue #34): a pod reaches the scheduler only once
    runway has it, so a preemptor is never refused as unknown. ``probe_namespace``: where the
    registration's dry-run probe is created."""
    with (
        runway_scheduling(
            plane, tmp, config, scheduler_name=scheduler_name, priorities=priorities
        ) as rw,
        GateWebhook(rw.url) as gates,
    ):
        if plane.at_least("1.30"):
            plane.ensure_namespace(probe_namespace)
            gates.register(plane, [probe_namespace], every_namespace=True, scheduler=scheduler_name)
        yield rw
