"""runway installed as a user installs it, on a real node (issues #26, #39): ``tools/kube
cluster-up`` (kubelet, containerd 1.6, kube-controller-manager, kube-proxy, cluster DNS) of each
release of the matrix: 1.20 and 1.37 (1.34 once ``tools/kube build 1.34 --node`` has run).

The image is built from the Dockerfile (``container.sh``, podman) and imported into the node's
containerd; the chart is installed with helm-python-sdk's ``Config.install`` as README says; the
real kubelet runs runway's pods with the chart's service account, RBAC, Secrets and probes (on the
plain-HTTP health port); kube-scheduler is configured with what the chart gives it:

* **bundled** (``scheduler.enabled=true``): the chart's second scheduler, its image built ``FROM
  scratch`` from the plane's kube-scheduler binary. A low-priority Job fills the node; a
  high-priority Job waits out the low one's 30 s min-runtime, then preempts it — never runway's
  own pods or the scheduler's (``system-cluster-critical``). A never-ready Job is evicted by
  ``waitForPodsReady`` (its WorkloadRecord says so), re-created by the real Job controller and
  bound again only after its backoff.
  One replica killed: scheduling goes on; both killed: opted-in pods wait (``ignorable: false``)
  while runway's own pods come back through the default scheduler, then scheduling resumes.
* **own** (the cluster's kube-scheduler, ``tools/kube cluster-scheduler``, a host process as a
  kubeadm static pod is): configured with exactly the stanza the install's NOTES print (a fixed
  ``service.clusterIP`` and ``tlsConfig.serverName``; the certificate files taken from the
  Secrets NOTES names). With ``priorityClassName: ""`` kube-scheduler offers runway's own replicas
  (priority 0) as the cheapest victims — the failure this issue found — and runway drops them and
  takes the low Job instead. Both replicas killed: ``ignorable: true`` lets their replacements
  schedule, and scheduling through runway resumes.

The bundled scheduler's image is the release's own kube-scheduler binary and its config API is
the one the chart derives from the image tag (v1beta1 on 1.20, v1 from 1.25); the cluster's own
scheduler reads the NOTES stanza in the release's API too.

Skipped with a reason when the node or podman is missing, unless ``CI=true`` (``.ci/run`` runs
``tools/kube build RELEASE --node`` and ``container.sh setup``). One cluster per machine: the
module brings it up once per release and ALWAYS brings it down, and removes the images it built.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import httpx
import pytest
import yaml

from app.kubectl.errors import EXIT_FORBIDDEN
from app.model.timestamps import parse_time
from app.policy.releases import parse_version
from tests.e2e.conftest import poll
from tests.helm_chart import CHART, notes_stanza
from tests.reference import SHARED

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "tools" / "kube"
CONTAINER_SH = SHARED / "tools" / "container.sh"
CACHE = Path(os.environ.get("RUNWAY_K8S_CACHE", Path.home() / ".cache" / "runway-k8s"))
NAMESPACE = "runway-system"
RELEASE = "runway"
TEAM = "team"
PAUSE = "localhost/runway-pause:3.2"  # cluster.sh's own pause image: a workload that just runs
CRITICAL = 2_000_000_000  # system-cluster-critical
MIN_RUNTIME_S = 30.0
PODS_READY_TIMEOUT_S = 20.0
BACKOFF_S = 10
PREEMPT_WITHIN_S = MIN_RUNTIME_S + 540
"""How long a high pod may wait for its preemption: the min-runtime, then kube-scheduler 1.20's
retries of an unschedulable pod (its 60 s flush, checked every 30 s; sooner on cluster events:
``_wait_bound(churn=True)``). Only the leader decides a preemption; a follower the Service chose
forwards the call to it (``app/kube/peers.py``), so no retry is lost to a follower."""
CHURN_EVERY_S = 15.0
RUNWAY_CPU = "200m"  # leaves the 2-CPU node room for the Jobs


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _missing(release: str) -> str | None:
    """Why the node of ``release`` cannot run here, or None."""
    if not CONTAINER_SH.is_file():
        return f"{CONTAINER_SH} is missing (podman for the images)"
    build = f"`{KUBE} build {release} --node` once (the node's binaries: ~3-5 minutes more)"
    for name in ("kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"):
        if not (CACHE / release / name).is_file():
            return f"the node of {release} is not built: run {build}"
    for tool in ("podman", "containerd", "ctr", "kubectl", "dnsmasq", "conntrack"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: run `{KUBE} node-deps` and `{CONTAINER_SH} setup`"
    if Path("/sys/class/net/knode0").exists():
        return "another real node runs on this machine (bridge knode0): one per machine"
    return None


def config_api(release: str) -> str:
    """The KubeSchedulerConfiguration apiVersion kube-scheduler ``release`` reads."""
    done = _run(str(KUBE), "config-api", release)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return _run(str(CONTAINER_SH), "podman", *args, timeout=timeout)


@dataclass
class Node:
    """A running single-node cluster, an admin client, and the images imported into it."""

    dir: Path
    kubeconfig: Path
    api: httpx.Client = field(repr=False)
    release: str = ""
    runway_image: tuple[str, str] = ("", "")
    scheduler_image: tuple[str, str] = ("", "")

    # -- objects -------------------------------------------------------------------------------

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """POST ``obj`` (409: it exists, fine)."""
        kind, meta = obj["kind"], obj["metadata"]
        group = obj["apiVersion"]
        base = f"/api/{group}" if "/" not in group else f"/apis/{group}"
        plural = {"Job": "jobs", "Pod": "pods", "Namespace": "namespaces"}.get(
            kind, kind.lower() + "es"
        )
        ns = f"/namespaces/{meta['namespace']}" if "namespace" in meta else ""
        r = self.api.post(f"{base}{ns}/{plural}", json=obj)
        assert r.status_code in (201, 409), r.text
        created: dict[str, Any] = r.json()
        return created

    def pods(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        """Pods of ``namespace`` (by label selector), not being deleted."""
        r = self.api.get(f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": selector})
        items: list[dict[str, Any]] = r.raise_for_status().json()["items"]
        return [p for p in items if "deletionTimestamp" not in p["metadata"]]

    def job(self, name: str) -> dict[str, Any]:
        """A Job of the test namespace."""
        r = self.api.get(f"/apis/batch/v1/namespaces/{TEAM}/jobs/{name}")
        job: dict[str, Any] = r.raise_for_status().json()
        return job

    def delete_job(self, name: str) -> None:
        """Delete a Job and its pods (foreground: gone when this returns)."""
        self.api.request(
            "DELETE",
            f"/apis/batch/v1/namespaces/{TEAM}/jobs/{name}",
            json={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"},
        )
        poll(
            lambda: (
                self.api.get(f"/apis/batch/v1/namespaces/{TEAM}/jobs/{name}").status_code == 404
            ),
            # the garbage collector and the kubelet's graceful stops, on 2 loaded cores
            within=240,
            what=f"job {name} deleted",
        )

    def kill(self, pod: dict[str, Any]) -> None:
        """Delete a pod at once (grace 0), as a crashed node or an operator's mistake would."""
        meta = pod["metadata"]
        self.api.request(
            "DELETE",
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
            json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )

    def runway_pods(self) -> list[dict[str, Any]]:
        """runway's extender pods."""
        return self.pods(NAMESPACE, "app.kubernetes.io/component=extender")

    def ready_runway(self, count: int = 2) -> list[dict[str, Any]]:
        """The extender pods once ``count`` of them are Ready (fails after 3 minutes)."""

        def ready() -> list[dict[str, Any]] | None:
            pods = [p for p in self.runway_pods() if _ready(p)]
            return pods if len(pods) == count else None

        found: list[dict[str, Any]] = poll(ready, within=180, what=f"{count} runway pods Ready")
        return found

    def record(self, name: str) -> dict[str, Any]:
        """A WorkloadRecord of the test namespace ({} while there is none)."""
        r = self.api.get(f"/apis/runway.dev/v1alpha1/namespaces/{TEAM}/workloadrecords/{name}")
        if r.status_code == 404:
            return {}
        record: dict[str, Any] = r.raise_for_status().json()
        return record

    def secret(self, name: str) -> dict[str, bytes]:
        """A Secret of runway's namespace, decoded."""
        r = self.api.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}").raise_for_status()
        return {k: base64.b64decode(v) for k, v in r.json()["data"].items()}

    def pod_log(self, pod: dict[str, Any], grep: str = "") -> str:
        """A pod's log through the API server (kubelet), the lines containing ``grep``."""
        meta = pod["metadata"]
        r = self.api.get(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log")
        return "\n".join(line for line in r.text.splitlines() if grep in line)[-6000:]

    def log(self, name: str) -> str:
        """The tail of one of the node's logs (on failure)."""
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.is_file() else ""


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _silent(pod: dict[str, Any]) -> bool:
    """The pod's health port refuses connections (its process is gone)."""
    try:
        with socket.create_connection((pod["status"]["podIP"], 8081), timeout=1):
            return False
    except OSError:
        return True


def _bound(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName"))


def _build_images(tag: str, release: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """runway's image from the Dockerfile and kube-scheduler's FROM scratch (the release's
    binary; its tag starts with the release, from which the chart derives the config API)."""
    runway = ("localhost/runway-e2e", tag)
    build = _run(
        str(CONTAINER_SH),
        "build",
        str(ROOT),
        f"{runway[0]}:{runway[1]}",
        "--format",
        "docker",
        "--layers=false",
        timeout=1500,
    )
    assert build.returncode == 0, f"image build failed:\n{build.stdout[-3000:]}{build.stderr}"
    scheduler = ("localhost/kube-scheduler-e2e", f"v{release}-{tag}")
    with tempfile.TemporaryDirectory(prefix="runway-sched-") as tmp:
        shutil.copy(CACHE / release / "kube-scheduler", Path(tmp) / "kube-scheduler")
        (Path(tmp) / "Dockerfile").write_text(
            "FROM scratch\nCOPY kube-scheduler /usr/local/bin/kube-scheduler\n"
            "ENV PATH=/usr/local/bin\nUSER 65532:65532\n"
            'ENTRYPOINT ["/usr/local/bin/kube-scheduler"]\n'
        )
        done = _podman("build", "-q", "-t", f"{scheduler[0]}:{scheduler[1]}", tmp)
        assert done.returncode == 0, done.stderr
    return runway, scheduler


@pytest.fixture(scope="module")
def node(k8s_release: str) -> Iterator[Node]:
    """Images built and imported, the release's real node up for the module; ALWAYS down and
    removed after."""
    reason = _missing(k8s_release)
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:10]
    images: list[str] = []
    with tempfile.TemporaryDirectory(prefix="runway-node-") as tmp:
        state = Path(tmp) / "node"
        try:
            runway_image, scheduler_image = _build_images(tag, k8s_release)
            images = [":".join(runway_image), ":".join(scheduler_image)]
            up = _run(str(KUBE), "cluster-up", k8s_release, str(state), timeout=300)
            assert up.returncode == 0, f"tools/kube cluster-up {k8s_release} failed:\n{up.stderr}"
            imported = _run(str(KUBE), "cluster-import", str(state), *images, timeout=600)
            assert imported.returncode == 0, imported.stderr
            env = dict(
                line.split("=", 1)
                for line in (state / "env").read_text().splitlines()
                if "=" in line
            )
            with httpx.Client(
                base_url=env["APISERVER"],
                headers={"Authorization": f"Bearer {env['TOKEN']}"},
                verify=ssl.create_default_context(cafile=str(state / "pki" / "ca.crt")),
                timeout=30,
            ) as api:
                n = Node(
                    state, state / "kubeconfig", api, k8s_release, runway_image, scheduler_image
                )
                n.apply(_namespace(TEAM))
                for name, value in (("low", 10), ("high", 100)):
                    n.apply(
                        {
                            "apiVersion": "scheduling.k8s.io/v1",
                            "kind": "PriorityClass",
                            "metadata": {"name": f"e2e-{name}"},
                            "value": value,
                        }
                    )
                yield n
        finally:
            down = _run(str(KUBE), "cluster-down", str(state), timeout=180)
            if down.returncode != 0:
                print(f"tools/kube cluster-down failed:\n{down.stderr}")
            for image in images:
                _podman("rmi", "-f", image)


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _job(
    name: str,
    *,
    cpu: str,
    priority: str,
    scheduler: str | None,
    image: str = PAUSE,
    never_ready: bool = False,
    backoff_limit: int = 6,
    memory: str = "16Mi",
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "c",
        "image": image,
        "imagePullPolicy": "Never",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    if never_ready:  # runs, never Ready: waitForPodsReady's case
        container["command"] = ["python", "-c", "import time; time.sleep(3600)"]
        container["readinessProbe"] = {"exec": {"command": ["false"]}, "periodSeconds": 2}
    spec: dict[str, Any] = {
        "priorityClassName": f"e2e-{priority}",
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": TEAM},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {"metadata": {"labels": {"runway.dev/queue": "batch"}}, "spec": spec},
        },
    }


def _image(repository: str, tag: str) -> dict[str, str]:
    return {"repository": repository, "tag": tag, "pullPolicy": "Never"}


def _values(node: Node, **extra: Any) -> dict[str, Any]:
    """The values an operator writes: the image they built, runway's config, smaller requests
    (a 2-CPU node); the rest is the chart's defaults."""
    repository, tag = node.runway_image
    values: dict[str, Any] = {
        # README: the pod pulls image.repository:image.tag, loaded into the node's runtime
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "resources": {"requests": {"cpu": RUNWAY_CPU, "memory": "256Mi"}},
        "config": {
            "queues": [
                {
                    "name": "batch",
                    "preemptMinRuntime": f"{MIN_RUNTIME_S:g}s",
                    "reclaimMinRuntime": f"{MIN_RUNTIME_S:g}s",
                }
            ],
            "waitForPodsReady": {
                "enable": True,
                "timeout": f"{PODS_READY_TIMEOUT_S:g}s",
                "requeuingStrategy": {"backoffBaseSeconds": BACKOFF_S},
            },
        },
    }
    values.update(extra)
    return values


@contextlib.contextmanager
def installed(node: Node, values: dict[str, Any]) -> Iterator[str]:
    """``helm install`` as README says (helm-python-sdk); yields the NOTES; uninstalls after."""
    with helm.Config(kubeconfig_path=node.kubeconfig, namespace=NAMESPACE) as cfg:
        release = cfg.install(CHART, RELEASE, values, create_namespace=True, timeout=300)
        try:
            assert release["status"] == "deployed", release
            yield str(release["notes"])
        finally:
            cfg.uninstall(RELEASE, timeout=120, ignore_not_found=True)
            poll(lambda: not node.runway_pods(), within=120, what="runway's pods gone")


class Runway:
    """The replicas' HTTPS port, reached from the host with the chart's client certificate."""

    def __init__(self, node: Node, tmp: Path) -> None:
        self.node = node
        ca, client = node.secret(f"{RELEASE}-tls"), node.secret(f"{RELEASE}-client-tls")
        for name, data in (
            ("ca.crt", ca["ca.crt"]),
            ("tls.crt", client["tls.crt"]),
            ("tls.key", client["tls.key"]),
        ):
            (tmp / name).write_bytes(data)
        # what kube-scheduler presents: the chart's client certificate, runway's CA
        self.tls = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
        self.tls.load_cert_chain(str(tmp / "tls.crt"), str(tmp / "tls.key"))

    def metric(self, pod: dict[str, Any], name: str, **labels: str) -> float:
        """One series of one replica's /metrics (0 when absent)."""
        ip = pod["status"]["podIP"]
        # the certificate names the Service; the pod is reached by its IP
        with httpx.Client(verify=self.tls, timeout=10) as http:
            text = http.get(
                f"https://{ip}:8888/metrics",
                extensions={"sni_hostname": f"{RELEASE}.{NAMESPACE}.svc"},
            ).text
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith(f"{name}{{{want}}} ") or (not want and line.startswith(name + " ")):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def preempt(self, pod: dict[str, Any], body: dict[str, Any]) -> httpx.Response:
        """POST ``body`` to one replica's preempt verb, as kube-scheduler would (its client
        certificate)."""
        with httpx.Client(verify=self.tls, timeout=30) as http:
            return http.post(
                f"https://{pod['status']['podIP']}:8888/scheduler/preempt",
                json=body,
                extensions={"sni_hostname": f"{RELEASE}.{NAMESPACE}.svc"},
            )

    def decisions(self) -> list[dict[str, Any]]:
        """The preempt decisions every replica recorded."""
        found: list[dict[str, Any]] = []
        for pod in self.node.ready_runway():
            with httpx.Client(verify=self.tls, timeout=10) as http:
                r = http.get(
                    f"https://{pod['status']['podIP']}:8888/v1/preemptions/decisions",
                    params={"limit": 50},
                    extensions={"sni_hostname": f"{RELEASE}.{NAMESPACE}.svc"},
                )
            found += r.raise_for_status().json()["decisions"]
        return found

    def filters(self) -> float:
        """ok filter calls summed over the replicas."""
        return sum(
            self.metric(p, "runway_extender_requests_total", outcome="ok", verb="filter")
            for p in self.node.ready_runway()
        )


def _forwarding_report(node: Node, runway: Runway, replicas: list[dict[str, Any]]) -> str:
    """What a failed forwarding check prints: the Lease, each replica's IP and leadership, and
    their forwarding log lines."""
    lease = node.api.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{RELEASE}"
    ).text
    events = node.api.get(f"/api/v1/namespaces/{NAMESPACE}/events").json().get("items", [])
    lines = [
        f"event {e['involvedObject'].get('name')} {e.get('reason')}: {e.get('message')}"
        for e in events
        if e.get("reason") not in ("Pulled", "Created", "Started", "Scheduled", "SuccessfulCreate")
    ]
    lines.append(f"lease: {lease[-400:]}")
    for p in replicas:
        lines.append(
            f"{p['metadata']['name']} {p['status'].get('podIP')} "
            f"leader={runway.metric(p, 'runway_leader')}"
        )
        lines.append(node.pod_log(p, "forward") or node.pod_log(p, "lead"))
    return "\n".join(lines)


def _wait_bound(node: Node, selector: str, within: float, *, churn: bool = False) -> dict[str, Any]:
    """Wait for a pod of ``selector`` bound. ``churn``: every ``CHURN_EVERY_S`` create a Service,
    the kind of event a busy cluster has all the time: kube-scheduler 1.20 then retries its
    unschedulable pods at once (ServiceAdd) instead of on its 60 s flush, so a preemption whose
    call reached a follower is asked again soon (which replica answers is the Service's choice)."""
    churned = [time.monotonic()]

    def bound() -> dict[str, Any] | None:
        if churn and time.monotonic() - churned[0] >= CHURN_EVERY_S:
            churned[0] = time.monotonic()
            name = f"churn-{int(churned[0] * 1000) % 10**9}"
            node.api.post(
                f"/api/v1/namespaces/{TEAM}/services",
                json={
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": name, "labels": {"runway-test": "churn"}},
                    "spec": {"ports": [{"port": 80}], "clusterIP": "None"},
                },
            ).raise_for_status()
            node.api.delete(f"/api/v1/namespaces/{TEAM}/services/{name}")
        return next((p for p in node.pods(TEAM, selector) if _bound(p)), None)

    pod: dict[str, Any] = poll(bound, within=within, what=f"a pod of {selector} bound", every=0.5)
    return pod


def _since(pod: dict[str, Any], condition: str) -> float:
    """When the pod's condition turned True (unix seconds, as the API server wrote it)."""
    for c in pod["status"].get("conditions") or []:
        when = parse_time(c["lastTransitionTime"])
        if c["type"] == condition and c["status"] == "True" and when is not None:
            return when
    raise AssertionError(f"{pod['metadata']['name']}: no {condition}")


def _rest(
    runway: Runway, pod: dict[str, Any], method: str, path: str, token: str
) -> httpx.Response:
    """A call to one replica's REST port (HTTPS, no client certificate asked; a bearer token)."""
    with httpx.Client(verify=runway.tls, timeout=30) as http:
        return http.request(
            method,
            f"https://{pod['status']['podIP']}:8889{path}",
            headers={"Authorization": f"Bearer {token}"},
            extensions={"sni_hostname": f"{RELEASE}.{NAMESPACE}.svc"},
        )


def _has_gates(node: Node) -> bool:
    """Whether the node's release has scheduling gates (GA in 1.30): the chart then registers
    runway's gate webhook."""
    return parse_version(node.release) >= (1, 30, 0)


def _scheduled_reason(node: Node, pod: dict[str, Any]) -> str:
    """The pod's PodScheduled reason as the API server has it now ("bound" once it has a node;
    "" while no condition is written)."""
    meta = pod["metadata"]
    now = node.api.get(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}").json()
    if now.get("spec", {}).get("nodeName"):
        return "bound"
    for c in now.get("status", {}).get("conditions") or []:
        if c["type"] == "PodScheduled":
            return str(c.get("reason", ""))
    return ""


def _plugin(node: Node, tmp: Path, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl runway ARGS`` as the holder of ``token``: the node's kubeconfig with only that
    token for credentials (the plugin reaches runway through the API server's service proxy)."""
    config = yaml.safe_load(node.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path = tmp / f"kubeconfig-{uuid.uuid4().hex[:8]}"
    path.write_text(yaml.safe_dump(config))
    code = "import sys; from app.kubectl.cli import run; sys.exit(run(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "--kubeconfig", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _person(node: Node, namespace: str, name: str, role: str) -> str:
    """A ServiceAccount standing for a person, bound to the ClusterRole ``role`` in ``namespace``
    only (a RoleBinding); returns its token."""
    node.apply(_namespace(namespace))
    r = node.api.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    assert r.status_code in (201, 409), r.text
    r = node.api.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        json={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )
    assert r.status_code in (201, 409), r.text
    r = node.api.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    token: str = r.raise_for_status().json()["status"]["token"]
    return token


def _never_ready_deployment(namespace: str, name: str, image: str, **labels: str) -> dict[str, Any]:
    """A Deployment on the default scheduler whose pod runs and never turns Ready."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, **labels}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "c",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "command": ["python", "-c", "import time; time.sleep(3600)"],
                            "readinessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 2},
                            "resources": {"requests": {"cpu": "20m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }


def _records(node: Node, namespace: str) -> list[str]:
    """The WorkloadRecords of ``namespace``."""
    r = node.api.get(f"/apis/runway.dev/v1alpha1/namespaces/{namespace}/workloadrecords")
    return [i["metadata"]["name"] for i in r.raise_for_status().json()["items"]]


def _wrong_ca(path: Path) -> None:
    """A CA that signed nothing runway serves (the operator's mistake issue #35 found)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "not-runways-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


# ---------------------------------------------------------------------------------- the tests


def test_bundled_scheduler_install_preempts_after_min_runtime_never_itself(
    node: Node, tmp_path: Path
) -> None:
    repo, tag = node.scheduler_image
    values = _values(
        node,
        # configApiVersion left to the chart: the one the image tag's release reads
        scheduler={
            "enabled": True,
            "image": {"repository": repo, "tag": tag, "pullPolicy": "Never"},
        },
        # issue #35 item 4: two teams given a view of their own namespaces
        peopleRoles={
            "teamViewers": [{"kind": "ServiceAccount", "name": "team-viewer", "namespace": TEAM}],
            "teamAdmins": [
                {"kind": "ServiceAccount", "name": "team-b-admin", "namespace": "team-b"}
            ],
        },
    )
    # issue #35: a queue typo is refused by the chart itself, before anything reaches the
    # cluster (the same rules as check-config), not found later in a crashing pod's log
    typo = copy.deepcopy(values)
    typo["config"]["queues"].append({"name": "team-a", "parent": "reserch"})
    with (
        helm.Config(kubeconfig_path=node.kubeconfig, namespace=NAMESPACE) as cfg,
        pytest.raises(helm.HelmError, match="unknown parent queue"),
    ):
        cfg.install(CHART, RELEASE, typo, create_namespace=True, timeout=60)
    nothing = node.api.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{RELEASE}")
    assert nothing.status_code == 404 and not node.runway_pods()
    with installed(node, values) as notes:
        assert "schedulerName: runway-scheduler" in notes
        config = node.api.get(
            f"/api/v1/namespaces/{NAMESPACE}/configmaps/{RELEASE}-scheduler"
        ).raise_for_status()
        read = yaml.safe_load(config.json()["data"]["config.yaml"])
        assert read["apiVersion"] == config_api(node.release)
        first = node.ready_runway()
        sched = poll(
            lambda: [
                p
                for p in node.pods(NAMESPACE, "app.kubernetes.io/component=scheduler")
                if _ready(p)
            ],
            within=120,
            what="the bundled scheduler Ready",
        )
        protected = {p["metadata"]["uid"] for p in first + sched}
        for pod in first + sched:  # never offered as victims
            assert pod["spec"]["priority"] == CRITICAL, pod["metadata"]["name"]
        container = first[0]["spec"]["containers"][0]
        assert container["readinessProbe"]["httpGet"]["port"] == "health"
        runway = Runway(node, tmp_path)
        # issue #34: the gate webhook where the release has gates, trusting runway's CA (the
        # chart's generated one here); none on 1.20
        hook = node.api.get(
            f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{RELEASE}-gate"
        )
        if _has_gates(node):
            (webhook,) = hook.raise_for_status().json()["webhooks"]
            assert webhook["failurePolicy"] == "Ignore" and webhook["timeoutSeconds"] <= 2
            trusted = base64.b64decode(webhook["clientConfig"]["caBundle"])
            assert node.secret(f"{RELEASE}-tls")["ca.crt"].strip() in trusted
        else:
            assert hook.status_code == 404, hook.text

        # 1. a low Job fills the node; a high one waits out its min-runtime, then preempts it
        node.apply(_job("low", cpu="1000m", priority="low", scheduler="runway-scheduler"))
        low = _wait_bound(node, "job-name=low", 90)
        poll(lambda: _ready(node.pods(TEAM, "job-name=low")[0]), within=60, what="low running")
        node.apply(_job("high", cpu="800m", priority="high", scheduler="runway-scheduler"))
        high = _wait_bound(node, "job-name=high", PREEMPT_WITHIN_S, churn=True)
        # the min-runtime counts from the low pod's bind (its workload's start); seconds granularity
        waited = _since(high, "PodScheduled") - _since(low, "PodScheduled")
        assert waited >= MIN_RUNTIME_S - 1, (
            f"preempted {waited:.0f}s into a {MIN_RUNTIME_S}s min-runtime"
        )
        gone = node.api.get(f"/api/v1/namespaces/{TEAM}/pods/{low['metadata']['name']}")
        assert gone.status_code == 404 or "deletionTimestamp" in gone.json()["metadata"]
        assert high["spec"]["nodeName"] == "node-0"
        assert runway.filters() > 0  # the scheduler called runway
        # runway never preempted itself or the scheduler
        now = {p["metadata"]["uid"] for p in node.runway_pods()} | {
            p["metadata"]["uid"]
            for p in node.pods(NAMESPACE, "app.kubernetes.io/component=scheduler")
        }
        assert protected <= now
        # issue #35: every replica answers the same (a follower serves the leader's decisions
        # and preemptions), asked of each replica's REST port with an operator's token
        admin = node.api.headers["Authorization"].split(" ", 1)[1]
        for path in ("/v1/preemptions/decisions", "/v1/preemptions"):
            answers = [
                _rest(runway, p, "GET", path, admin).raise_for_status().json()
                for p in node.ready_runway()
            ]
            assert len(answers) == 2 and answers[0] == answers[1], (path, answers)
            if path.endswith("decisions"):
                assert answers[0]["decisions"], "no preempt decision recorded"
        node.delete_job("high")
        node.delete_job("low")

        # issue #35 (scope): never-ready Deployments on the default scheduler that name no queue
        # (default) or live in kube-system (even naming a queue): never evicted, never recorded.
        # Checked once the managed Job below has been evicted for the same timeout.
        image = ":".join(node.runway_image)
        unmanaged = [
            _never_ready_deployment("default", "slow-app", image),
            _never_ready_deployment(
                "kube-system", "slow-addon", image, **{"runway.dev/queue": "batch"}
            ),
        ]
        for d in unmanaged:
            r = node.api.post(
                f"/apis/apps/v1/namespaces/{d['metadata']['namespace']}/deployments", json=d
            )
            assert r.status_code == 201, r.text

        def unmanaged_pods() -> dict[str, str]:
            found = {}
            for d in unmanaged:
                ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
                for p in node.pods(ns, f"app={name}"):
                    if p["status"].get("phase") == "Running":
                        found[p["metadata"]["uid"]] = f"{ns}/{p['metadata']['name']}"
            return found

        running = poll(
            lambda: len(unmanaged_pods()) == 2 and unmanaged_pods(),
            within=120,
            what="unmanaged pods running",
        )
        running_since = time.monotonic()

        # 2. a never-ready Job: evicted after waitForPodsReady's timeout, re-created by the Job
        # controller, bound again only after its backoff
        node.apply(
            _job(
                "stuck",
                cpu="200m",
                priority="low",
                scheduler="runway-scheduler",
                image=":".join(node.runway_image),
                never_ready=True,
            )
        )
        stuck = _wait_bound(node, "job-name=stuck", 90)
        # the eviction record: the Job's WorkloadRecord (docs/state.md)
        evicted = poll(
            lambda: (
                (node.record("job.stuck").get("status", {}).get("eviction") or {}).get("count")
                and node.record("job.stuck")["status"]["eviction"]
            ),
            within=PODS_READY_TIMEOUT_S + 60,
            what="the PodsReadyTimeout eviction",
            every=0.5,
        )
        assert evicted["reason"] == "PodsReadyTimeout"
        requeue_at = parse_time(evicted["requeueAt"])
        assert requeue_at is not None, evicted
        if _has_gates(node):
            # issue #34 on the real node: the chart's webhook gates the Job's re-created pod as the
            # API server creates it, and it waits out its backoff SchedulingGated (kubectl get
            # pods), never Unschedulable, until runway's leader removes the gate
            waiting = poll(
                lambda: next(
                    (
                        p
                        for p in node.pods(TEAM, "job-name=stuck")
                        if p["metadata"]["uid"] != stuck["metadata"]["uid"]
                    ),
                    None,
                ),
                within=60,
                what="the stuck Job's re-created pod",
                every=0.5,
            )
            gates = [g["name"] for g in waiting["spec"].get("schedulingGates") or []]
            assert not _bound(waiting) and gates == ["runway.dev/admission"], waiting["spec"]
            poll(
                lambda: _scheduled_reason(node, waiting) in ("SchedulingGated", "bound"),
                within=30,
                what="the re-created pod SchedulingGated",
                every=0.5,
            )
            assert _scheduled_reason(node, waiting) == "SchedulingGated" or (
                time.time() >= requeue_at - 1
            ), "the gate was lifted before the backoff ended"
        again = poll(
            lambda: next(
                (
                    p
                    for p in node.pods(TEAM, "job-name=stuck")
                    if p["metadata"]["uid"] != stuck["metadata"]["uid"] and _bound(p)
                ),
                None,
            ),
            within=BACKOFF_S * 2 + 120,
            what="the re-created pod bound after its backoff",
            every=0.5,
        )
        # re-created by the Job controller, held by runway until its backoff ended
        assert _since(again, "PodScheduled") >= requeue_at - 1
        # the unmanaged pods outlived the timeout by far, untouched and unrecorded
        poll(
            lambda: time.monotonic() - running_since > PODS_READY_TIMEOUT_S * 2,
            within=PODS_READY_TIMEOUT_S * 2 + 5,
            what="twice the PodsReady timeout",
        )
        assert unmanaged_pods() == running, "runway evicted a pod it does not manage"
        assert _records(node, "default") == [] and _records(node, "kube-system") == []
        for d in unmanaged:
            node.api.delete(
                f"/apis/apps/v1/namespaces/{d['metadata']['namespace']}/deployments/"
                f"{d['metadata']['name']}"
            )

        # issue #35 item 4 (a team's view; docs/security.md's three users) through the API
        # server's service proxy, as kubectl runway goes: the chart's peopleRoles.teamViewers /
        # teamAdmins let each team reach the proxy in runway's namespace and nothing else there;
        # runway then authorises each namespace itself (TokenReview + SubjectAccessReview).
        # team-viewer: `view` in TEAM (runway's viewer role aggregated into it); team-b-admin:
        # runway's admin role in team-b (never aggregated into `admin`: a tenant).
        viewer = _person(node, TEAM, "team-viewer", "view")
        team_b = _person(node, "team-b", "team-b-admin", f"{RELEASE}-admin")
        proxy = f"/api/v1/namespaces/{NAMESPACE}/services/https:{RELEASE}-rest:rest/proxy"

        def proxied(method: str, path: str, token: str) -> httpx.Response:
            bearer = f"Bearer {token}"
            return node.api.request(
                method,
                proxy + path,
                headers={"Authorization": bearer, "X-Runway-Authorization": bearer},
            )

        # RBAC settles (aggregation, the new bindings) within moments of the apply
        poll(
            lambda: proxied("GET", f"/v1/workloads/{TEAM}/stuck", viewer).status_code == 200,
            within=60,
            what="the team viewer reading its namespace's workload through the proxy",
        )
        poll(
            lambda: proxied("GET", "/v1/workloads?namespace=team-b", team_b).status_code == 200,
            within=60,
            what="the team-b admin reading its namespace through the proxy",
        )
        cases = [
            (viewer, "GET", "/v1/workloads?namespace=" + TEAM, 200),
            (viewer, "GET", "/v1/workloads", 403),
            (viewer, "GET", "/v1/workloads?namespace=team-b", 403),
            (viewer, "GET", "/v1/preemptions/decisions", 403),
            (team_b, "GET", f"/v1/workloads/{TEAM}/stuck", 403),
            (team_b, "POST", f"/v1/workloads/{TEAM}/stuck:deactivate", 403),
            (team_b, "POST", f"/v1/workloads/{TEAM}/stuck:activate", 403),
            (team_b, "POST", "/v1/workloads/team-b/none:deactivate", 403),
            # its own namespace passes runway's check: 404, no such workload there
            (team_b, "POST", "/v1/workloads/team-b/none:activate", 404),
        ]
        for token, method, path, expected in cases:
            r = proxied(method, path, token)
            who = "viewer" if token == viewer else "team-b admin"
            assert r.status_code == expected, (who, method, path, r.text)
            if expected == 403:  # runway's refusal ({"error": why}), not the API server's Status
                assert "error" in r.json(), (who, path, r.text)
        # the viewer may not reach the proxy's POST at all: the API server refuses it
        refused = proxied("POST", f"/v1/workloads/{TEAM}/stuck:activate", viewer)
        assert refused.status_code == 403 and refused.json().get("kind") == "Status", refused.text
        assert node.record("job.stuck").get("spec", {}).get("active", True) is not False
        listed = proxied("GET", f"/v1/workloads?namespace={TEAM}", viewer).json()["items"]
        assert {i["namespace"] for i in listed} == {TEAM}
        # ...and the plugin itself, with a kubeconfig holding only the viewer's token (README)
        mine = _plugin(node, tmp_path, viewer, "workloads", "-n", TEAM, "-o", "json")
        assert mine.returncode == 0, mine.stderr
        assert "stuck" in {i["name"] for i in yaml.safe_load(mine.stdout)["items"]}
        everyone = _plugin(node, tmp_path, viewer, "workloads", "-A")
        assert everyone.returncode == EXIT_FORBIDDEN, (everyone.returncode, everyone.stderr)
        # the record is owned by the Job: the cluster's garbage collector deletes it with the
        # Job (issue #25; runway never writes a Job: it only reads its parallelism)
        owners = node.record("job.stuck")["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"]) for o in owners] == [("Job", "stuck")]
        node.delete_job("stuck")
        poll(
            lambda: node.record("job.stuck") == {},
            within=120,
            what="the Job's WorkloadRecord garbage-collected with it",
        )

        # 3. one replica killed: the other answers, scheduling goes on
        node.kill(node.ready_runway()[0])
        node.apply(_job("one-down", cpu="100m", priority="low", scheduler="runway-scheduler"))
        _wait_bound(node, "job-name=one-down", 90)
        node.delete_job("one-down")
        node.ready_runway()

        # 4. both killed: opted-in pods wait (ignorable: false); runway's replacements go through
        # the default scheduler and come back; then scheduling through runway resumes
        config = node.api.get(
            f"/api/v1/namespaces/{NAMESPACE}/configmaps/{RELEASE}-scheduler"
        ).raise_for_status()
        (extender,) = yaml.safe_load(config.json()["data"]["config.yaml"])["extenders"]
        assert extender["ignorable"] is False  # what the docs say of the bundled scheduler
        old = node.ready_runway()
        for pod in old:
            node.kill(pod)
        # the killed containers stop answering (the API objects go at once, the processes a
        # moment later): from here on only a new replica can answer the scheduler
        poll(lambda: all(_silent(p) for p in old), within=60, what="the killed replicas silent")
        node.apply(_job("all-down", cpu="100m", priority="low", scheduler="runway-scheduler"))
        back = node.ready_runway()
        assert all(
            p["spec"].get("schedulerName", "default-scheduler") == "default-scheduler" for p in back
        )
        _wait_bound(node, "job-name=all-down", 150)
        assert runway.filters() > 0  # the new replicas answered it
        node.delete_job("all-down")


def test_cluster_scheduler_with_the_notes_stanza_never_preempts_runway(
    node: Node, tmp_path: Path
) -> None:
    # the failure issue #26 found: runway's pods at priority 0 are kube-scheduler's cheapest
    # victims; the shield (app/policy/shield.py) must drop them whatever the request offers
    # rest.enabled false: one port, so the test reads the decisions with the client certificate
    values = _values(
        node,
        priorityClassName="",
        service={"clusterIP": "100.96.200.10"},
        rest={"enabled": False},
    )
    with installed(node, values) as notes:
        first = node.ready_runway()
        assert all(p["spec"].get("priority", 0) == 0 for p in first)
        stanza = notes_stanza(notes)
        (extender,) = stanza["extenders"]
        assert extender["urlPrefix"] == "https://100.96.200.10:8888/scheduler"
        assert extender["ignorable"] is True  # no self-deadlock with the cluster's scheduler
        # the certificate files from the Secrets NOTES names, where the operator copies them
        certs = tmp_path / "etc-kubernetes-runway"
        certs.mkdir()
        files = (("caFile", "ca.crt"), ("certFile", "tls.crt"), ("keyFile", "tls.key"))
        for key, data_key in files:
            path = extender["tlsConfig"][key]
            secret = next(
                line.rsplit("Secret ", 1)[1].strip()
                for line in notes.splitlines()
                if line.strip().startswith(f"{key}:")
            )
            (certs / Path(path).name).write_bytes(node.secret(secret)[data_key])
            extender["tlsConfig"][key] = str(certs / Path(path).name)
        config = {
            "apiVersion": config_api(node.release),
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            **stanza,
        }
        path = tmp_path / "scheduler.yaml"
        path.write_text(yaml.safe_dump(config))
        done = _run(str(KUBE), "cluster-scheduler", str(node.dir), str(path), timeout=120)
        assert done.returncode == 0, done.stderr
        runway = Runway(node, tmp_path)
        calls = runway.filters()

        # The low Job leaves 100m free; the high pod needs 250m. kube-scheduler's dry run removes
        # every lower pod, then gives back first the one runway pod the PDB would not let go,
        # then the low pod (priority 10), and offers what is left: the other runway pod
        # (priority 0, 200m, 256Mi) — the cheapest victim. runway drops it and takes the low
        # pod, once its min-runtime is over. The low pod requests 16Mi: the replacement covers
        # what the cpu-only preemptor lacks, not the dropped replica's memory (issue #35: a
        # shielded victim's own memory request stranded the preemptor).
        node.apply(_job("low", cpu="1500m", priority="low", scheduler=None))
        _wait_bound(node, "job-name=low", 90)
        assert runway.filters() > calls  # the cluster's scheduler calls runway
        replicas = node.ready_runway()

        def forwarding() -> tuple[float, float]:
            """(refused by a follower, failed to forward), summed over the replicas."""
            refused = sum(
                runway.metric(p, "runway_preemptions_refused_total", reason="not-leader")
                for p in replicas
            )
            failed = sum(
                runway.metric(p, "runway_preempt_forwarded_total", outcome=o)
                for p in replicas
                for o in ("error", "timeout")
            )
            return refused, failed

        # Counted once the Lease names one of these replicas at its own address: in the replicas'
        # first seconds it may still name the previous install's leader (killed, or its release
        # refused once Helm deleted its RBAC) until it expires as they observe it — forwarded
        # calls fail then, and are answered {}.
        def settled() -> bool:
            lease = node.api.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{RELEASE}"
            ).json()
            holder = lease.get("spec", {}).get("holderIdentity") or ""
            url = (lease["metadata"].get("annotations") or {}).get("runway.dev/leader-url", "")
            return any(
                holder.startswith(p["metadata"]["name"] + "_")
                and f"//{p['status']['podIP']}:" in url
                for p in replicas
            )

        poll(settled, within=120, what="the Lease held by one of the new replicas")
        before = forwarding()
        node.apply(_job("high", cpu="250m", priority="high", scheduler=None))
        _wait_bound(node, "job-name=high", PREEMPT_WITHIN_S, churn=True)
        # whichever replica the Service chose, the preempt call reached the leader: a follower
        # forwards it (POD_IP on the Lease, the chart's mutual TLS). First asked of the follower
        # directly (the Service may have sent every call of the storm to the leader)...
        (follower,) = [p for p in replicas if runway.metric(p, "runway_leader") == 0]
        ok = runway.metric(follower, "runway_preempt_forwarded_total", outcome="ok")
        answer = runway.preempt(
            follower,
            {"Pod": {"metadata": {"name": "nobody", "namespace": TEAM, "uid": "u-nobody"}},
             "NodeNameToMetaVictims": {}},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert runway.metric(follower, "runway_preempt_forwarded_total", outcome="ok") == ok + 1, (
            _forwarding_report(node, runway, replicas)
        )
        # ...and over the storm, for the record (not asserted: on this loaded single node a
        # follower's Lease reads can lag past leaseDuration, and then it answers {} without
        # forwarding; kube-scheduler retries the pod — what the fallback is for)
        refused, failed = (a - b for a, b in zip(forwarding(), before, strict=True))
        print(f"storm: {refused:.0f} preempt(s) refused by a follower, {failed:.0f} not forwarded")
        offered = runway.decisions()
        assert any(
            p["pod"].startswith(f"{NAMESPACE}/") and p["outcome"] == "dropped"
            for d in offered
            for n in d["nodes"]
            for p in n["pods"]
        ), "kube-scheduler never offered runway's own pods: the test no longer tests the shield"
        assert {p["metadata"]["uid"] for p in first} <= {
            p["metadata"]["uid"] for p in node.runway_pods()
        }, "runway preempted its own replicas"
        node.delete_job("high")
        node.delete_job("low")

        # both replicas killed: ignorable: true lets their replacements schedule (through this
        # very scheduler), and scheduling through runway resumes
        for pod in first:
            node.kill(pod)
        back = node.ready_runway()
        calls = runway.filters()
        node.apply(_job("after", cpu="100m", priority="low", scheduler=None))
        _wait_bound(node, "job-name=after", 90)
        poll(lambda: runway.filters() > calls, within=30, what="filter calls on the new replicas")
        assert not {p["metadata"]["uid"] for p in first} & {p["metadata"]["uid"] for p in back}
        node.delete_job("after")

        # issue #35: a scheduler that cannot reach runway (a wrong CA, ignorable: true) schedules
        # without it; runway notices: binds of managed pods no replica filtered
        def bypassed() -> float:
            return sum(
                runway.metric(p, "runway_bindings_total", filtered="no")
                for p in node.ready_runway()
            )

        skipped = bypassed()
        _wrong_ca(certs / "wrong-ca.crt")
        extender["tlsConfig"]["caFile"] = str(certs / "wrong-ca.crt")
        path.write_text(yaml.safe_dump(config))
        done = _run(str(KUBE), "cluster-scheduler", str(node.dir), str(path), timeout=120)
        assert done.returncode == 0, done.stderr
        calls = runway.filters()
        node.apply(_job("bypass", cpu="100m", priority="low", scheduler=None))
        _wait_bound(node, "job-name=bypass", 90)
        poll(lambda: bypassed() > skipped, within=60, what="runway counting the bypassed bind")
        assert runway.filters() == calls  # no filter call reached runway
        assert "x509" in node.log("scheduler"), node.log("scheduler")
        node.delete_job("bypass")


def _reissue(node: Node, days: int) -> tuple[float, float]:
    """Sign a new serving and a new client certificate with the chart's CA (kept in its Secret)
    and write them into the Secrets, as cert-manager's renewal does; returns their notAfter."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_secret = node.secret(f"{RELEASE}-ca")
    ca_cert = x509.load_pem_x509_certificate(ca_secret["tls.crt"])
    ca_key = serialization.load_pem_private_key(ca_secret["tls.key"], None)
    now = datetime.datetime.now(datetime.UTC)
    until = now + datetime.timedelta(days=days)
    host = f"{RELEASE}.{NAMESPACE}"
    issued = []
    for name, usage, dns in (
        ("tls", ExtendedKeyUsageOID.SERVER_AUTH, [RELEASE, host, f"{host}.svc"]),
        ("client-tls", ExtendedKeyUsageOID.CLIENT_AUTH, []),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-{name}")]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(until)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if dns:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
            )
        cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        data = {
            "tls.crt": cert.public_bytes(serialization.Encoding.PEM),
            "tls.key": key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        }
        r = node.api.patch(
            f"/api/v1/namespaces/{NAMESPACE}/secrets/{RELEASE}-{name}",
            json={"data": {k: base64.b64encode(v).decode() for k, v in data.items()}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text
        issued.append(cert.not_valid_after_utc.timestamp())
    return issued[0], issued[1]


class Stream:
    """Pods scheduled through the bundled scheduler while a test waits for something else: one
    created every ``every`` seconds, each deleted once bound; what a rotation must not stop."""

    def __init__(self, node: Node, every: float = 3.0) -> None:
        self.node = node
        self.every = every
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self._last = 0.0

    def tick(self) -> None:
        """Create the next pod when it is due; note and delete the bound ones."""
        now = time.monotonic()
        for pod in self.node.pods(TEAM, "runway-test=stream"):
            name = pod["metadata"]["name"]
            if _bound(pod) and name not in self.bound:
                self.bound[name] = now - self.created.get(name, now)
                self.node.kill(pod)
        if now - self._last >= self.every:
            self._last = now
            name = f"stream-{len(self.created)}"
            self.node.apply(_stream_pod(name))
            self.created[name] = now

    def wait(self, condition: Any, *, within: float, what: str) -> Any:
        """``poll(condition)`` while the stream runs."""

        def check() -> Any:
            self.tick()
            return condition()

        return poll(check, within=within, what=what, every=1.0)

    def drain(self, within: float = 120) -> None:
        """Stop creating; wait until every pod created has bound."""
        self._last = float("inf")
        self.wait(
            lambda: set(self.bound) >= set(self.created),
            within=within,
            what=f"every stream pod bound (not yet: {sorted(set(self.created) - set(self.bound))})",
        )


def _stream_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": TEAM,
            "labels": {"runway.dev/queue": "batch", "runway-test": "stream"},
        },
        "spec": {
            "schedulerName": "runway-scheduler",
            "priorityClassName": "e2e-low",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": PAUSE,
                    "imagePullPolicy": "Never",
                    "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
                }
            ],
        },
    }


def _not_after(pem: bytes) -> float:
    from app.tls import not_after

    when = not_after(pem)
    assert when is not None
    return when


def _refused(runway: Runway, pod: dict[str, Any]) -> bool:
    """``runway``'s client certificate is refused by ``pod`` (the handshake or the first read
    fails)."""
    try:
        runway.metric(pod, "runway_leader")
    except (httpx.TransportError, ssl.SSLError):
        return True
    return False


def test_certificates_and_the_ca_rotate_without_a_failed_filter_call(
    node: Node, tmp_path: Path
) -> None:
    """1. The CA rotated in ``tls.caRotation``'s three upgrades (issue #35 item 6, docs/deploy.md
    "Rotating the CA") while pods stream through the bundled scheduler (``ignorable: false``, so
    a failed filter call fails the pod's cycle with a FailedScheduling event): every pod binds,
    none fails a cycle, runway counts no failed verb call, and at the end runway refuses the old
    CA's client certificate.
    2. Then renewed serving and client certificates (same CA, as cert-manager renews; after the
    rotation, whose upgrades would conflict with this test's own writes to the Secrets): runway
    serves the new one once kubelet updates the Secret volume, and the bundled scheduler, never
    restarted, goes on calling it without a failed cycle. (That kube-scheduler re-reads its
    client certificate per connection is client-go's code, docs/deploy.md; not observed here:
    our own scrapes present client certificates too.)"""
    repo, tag = node.scheduler_image
    values = _values(
        node,
        scheduler={
            "enabled": True,
            "image": {"repository": repo, "tag": tag, "pullPolicy": "Never"},
        },
        # runway closes idle connections sooner: the scheduler's next call opens a new one
        config={"server": {"idleTimeout": "5s"}},
    )
    with installed(node, values):
        node.ready_runway()
        runway = Runway(node, tmp_path)
        # 1. the CA rotated, pods streaming through the scheduler all the while
        old = runway  # the old CA, the first client certificate (tmp_path/tls.crt)

        def serves(runway: Runway, expiry: float, certificate: str = "serving") -> bool:
            # kubelet refreshes Secret volumes on its sync (about a minute)
            return all(
                runway.metric(
                    p, "runway_tls_certificate_expiry_timestamp_seconds", certificate=certificate
                )
                == expiry
                for p in node.ready_runway()
            )

        stream = Stream(node)
        stream.wait(lambda: len(stream.bound) >= 2, within=90, what="the stream flowing")

        def upgrade(rotation: str) -> None:
            with helm.Config(kubeconfig_path=node.kubeconfig, namespace=NAMESPACE) as cfg:
                release = cfg.upgrade(
                    CHART, RELEASE, {**values, "tls": {"caRotation": rotation}}, timeout=300
                )
            assert release["status"] == "deployed", release

        def scheduler_rolled(since: set[str]) -> bool:
            pods = node.pods(NAMESPACE, "app.kubernetes.io/component=scheduler")
            return len(pods) == 1 and _ready(pods[0]) and pods[0]["metadata"]["uid"] not in since

        def scheduler_uids() -> set[str]:
            return {
                p["metadata"]["uid"]
                for p in node.pods(NAMESPACE, "app.kubernetes.io/component=scheduler")
            }

        started = time.monotonic()
        # 2a. prepare: the new CA trusted beside the old (the scheduler restarts on the bundle)
        before = scheduler_uids()
        upgrade("prepare")
        new_ca = _not_after(node.secret(f"{RELEASE}-ca-next")["tls.crt"])
        stream.wait(
            lambda: scheduler_rolled(before), within=180, what="the scheduler on the bundle"
        )
        stream.wait(
            lambda: serves(old, new_ca, "client-ca"),
            within=240,
            what="every replica trusting the new CA",
        )
        # 2b. switch: the new CA signs new certificates; both trusted
        upgrade("switch")
        serving = _not_after(node.secret(f"{RELEASE}-tls")["tls.crt"])
        (tmp_path / "switched").mkdir()
        switched = Runway(node, tmp_path / "switched")  # the bundle and the new client cert
        stream.wait(
            lambda: serves(switched, serving), within=240, what="runway serving the new CA's cert"
        )
        # 2c. done: only the new CA (the scheduler restarts on it)
        before = scheduler_uids()
        upgrade("")
        stream.wait(
            lambda: scheduler_rolled(before), within=180, what="the scheduler on the new CA"
        )
        (tmp_path / "new").mkdir()
        new = Runway(node, tmp_path / "new")
        assert len(new.tls.get_ca_certs()) == 1
        # the new CA trusted, the old CA's client certificate presented
        stale = Runway(node, tmp_path / "new")
        stale.tls = ssl.create_default_context(cafile=str(tmp_path / "new" / "ca.crt"))
        stale.tls.load_cert_chain(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
        stream.wait(
            lambda: all(_refused(stale, p) for p in node.ready_runway()),
            within=240,
            what="the old CA's client certificate refused",
        )
        stream.drain()
        took = time.monotonic() - started
        slowest = max(stream.bound.values())
        print(
            f"CA rotation on {node.release}: {took:.0f}s, {len(stream.created)} pods streamed, "
            f"slowest bind {slowest:.1f}s"
        )
        events = node.api.get(
            f"/api/v1/namespaces/{TEAM}/events", params={"fieldSelector": "reason=FailedScheduling"}
        ).raise_for_status()
        failed = [
            f"{e['involvedObject']['name']}: {e['message']}"
            for e in events.json()["items"]
            if e["involvedObject"]["name"] in stream.created
        ]
        assert not failed, failed  # a failed filter call fails the cycle (ignorable: false)
        errors = sum(
            new.metric(p, "runway_extender_requests_total", outcome=o, verb=v)
            for p in node.ready_runway()
            for o in ("bad_request", "error")
            for v in ("filter", "prioritize", "preempt")
        )
        assert errors == 0
        assert sum(
            new.metric(p, "runway_extender_requests_total", outcome="ok", verb="filter")
            for p in node.ready_runway()
        ) >= len(stream.created)

        # 2. renewed certificates under the (new) CA
        node.apply(_job("before", cpu="100m", priority="low", scheduler="runway-scheduler"))
        _wait_bound(node, "job-name=before", 90)
        serving, _ = _reissue(node, days=3)

        poll(lambda: serves(new, serving), within=180, what="the renewed certificate", every=2)
        node.apply(_job("after", cpu="100m", priority="low", scheduler="runway-scheduler"))
        _wait_bound(node, "job-name=after", 90)

        # the scheduler's calls after the renewal: none failed (a TLS error would be logged by
        # kube-scheduler as an extender error; ignorable: false, so the pod would not bind)
        sched = node.pods(NAMESPACE, "app.kubernetes.io/component=scheduler")[0]["metadata"]
        log = node.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{sched['name']}/log").text
        assert "x509" not in log and "tls:" not in log, log[-2000:]
        assert errors == sum(
            new.metric(p, "runway_extender_requests_total", outcome=o, verb=v)
            for p in node.ready_runway()
            for o in ("bad_request", "error")
            for v in ("filter", "prioritize", "preempt")
        )
        node.delete_job("before")
        node.delete_job("after")
