"""End-to-end fixtures: a real etcd + kube-apiserver (``tools/kube``), runway processes
pointed at it, and helpers with which a test plays the kubelet and the scheduler.

* The release matrix: ``k8s_release`` (session) is parametrised by ``$RUNWAY_K8S_RELEASES``
  (default ``1.20.2,1.34.4,1.37.2``), so every test that uses a plane runs once per release and its
  id carries it (``test_x[k8s-1.37.2]``; ``-k k8s-1.37.2`` selects one release). A test that cannot
  run on a release says why: ``@pytest.mark.releases(">=1.25", reason="...")`` (specifiers:
  ``1.20``, ``==1.20.2``, ``>=1.25``, ``<1.32``, all must hold) skips it elsewhere with the reason.
  A release not built (``tools/kube build VERSION``) is skipped with a reason, unless ``CI=true``
  (then it must run). ``RUNWAY_E2E_KEEP_LOGS=DIR`` keeps each plane's logs (kube-apiserver,
  kube-scheduler, etcd) in DIR/RELEASE-*/ after it is torn down, and runway's in
  DIR/RELEASE-runway/.
* ``control_plane`` (session, per release): ``tools/kube up VERSION DIR`` in a temporary
  directory, and ALWAYS ``tools/kube down DIR`` afterwards, even when a test or ``up`` fails.
* ``runway`` (function): ``runway.start(...)`` runs ``python -m app serve --kubeconfig ... --port
  <free>`` and returns a handle; every process is stopped BY ITS PID at teardown (never by name).
* ``made`` (function): the clusters a test makes, closed at teardown; then the module's
  namespace (its ``NS``, on its ``plane`` fixture) is emptied (``ControlPlane.empty_namespace``).
* ``write_scheduler_config`` / ``ControlPlane.start_scheduler``: register runway as an extender
  of a real kube-scheduler, in the KubeSchedulerConfiguration API the release reads
  (``ControlPlane.config_api``: v1beta1 on 1.20, v1 from 1.25).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
import yaml

from app.model.record import record_name
from tests.reference import CONTROL_PLANE
from tests.runway_process import RunwayProcess, run_runway

CRDS = Path(__file__).resolve().parents[2] / "helm" / "runway" / "crds"
"""The chart's CustomResourceDefinitions, installed on every plane."""


DEFAULT_RELEASES = "1.20.2,1.34.4,1.37.2"
"""The matrix when ``$RUNWAY_K8S_RELEASES`` is unset: the oldest runway supports, a release users
run, and the newest the Go module proxy serves."""

V1BETA1 = "kubescheduler.config.k8s.io/v1beta1"
V1 = "kubescheduler.config.k8s.io/v1"


@functools.cache
def known_releases() -> tuple[str, ...]:
    """The releases ``tools/kube`` builds (``tools/kube versions``)."""
    out = subprocess.run(
        ["bash", str(CONTROL_PLANE), "versions"], capture_output=True, text=True, check=True
    )
    return tuple(out.stdout.split())


def resolve_release(release: str) -> str:
    """``1.34`` / ``v1.34`` / ``1.34.4`` → ``1.34.4``, as ``tools/kube`` resolves it."""
    release = release.strip().removeprefix("v")
    if re.fullmatch(r"\d+\.\d+\.\d+", release):
        return release
    for known in known_releases():
        if known.rsplit(".", 1)[0] == release:
            return known
    known = ", ".join(known_releases())
    raise ValueError(f"RUNWAY_K8S_RELEASES: unknown release {release!r} (known: {known})")


def releases() -> list[str]:
    """The release matrix: ``$RUNWAY_K8S_RELEASES`` (comma-separated), else DEFAULT_RELEASES."""
    wanted = os.environ.get("RUNWAY_K8S_RELEASES") or DEFAULT_RELEASES
    return [resolve_release(r) for r in wanted.split(",") if r.strip()]


def release_key(release: str) -> tuple[int, ...]:
    """``1.34.4`` → (1, 34, 4), for comparisons."""
    return tuple(int(part) for part in release.split("."))


def config_api(release: str) -> str:
    """The KubeSchedulerConfiguration apiVersion kube-scheduler ``release`` reads: v1beta1 up to
    1.24 (1.20 knows no v1), v1 from 1.25 (v1beta1 is gone)."""
    return V1BETA1 if release_key(release)[:2] < (1, 25) else V1


def release_matches(release: str, spec: str) -> bool:
    """Whether ``release`` satisfies ``spec``: ``1.20`` (that minor), ``==1.20.2``, ``>=1.25``,
    ``>1.24``, ``<=1.31``, ``<1.32``; a bare or ``==`` spec of two parts matches the minor."""
    found = re.fullmatch(r"(==|>=|<=|>|<)?\s*v?(\d+(?:\.\d+){1,2})", spec.strip())
    if found is None:
        raise ValueError(f"releases marker: cannot read {spec!r} (e.g. '1.20', '>=1.25')")
    op, bound = found.group(1) or "==", release_key(found.group(2))
    have = release_key(release)[: len(bound)] if op == "==" else release_key(release)
    return {
        "==": have == bound,
        ">=": have >= bound,
        "<=": have[: len(bound)] <= bound,
        ">": have[: len(bound)] > bound,
        "<": have < bound,
    }[op]


def release_dir(release: str) -> Path:
    """Where ``tools/kube build RELEASE`` puts the release's binaries."""
    cache = Path(os.environ.get("RUNWAY_K8S_CACHE", Path.home() / ".cache" / "runway-k8s"))
    return cache / release


def binaries_present(release: str) -> bool:
    """Whether ``tools/kube build RELEASE`` has been run on this machine (and etcd is there)."""
    folder = release_dir(release)
    bins = all((folder / name).is_file() for name in ("kube-apiserver", "kube-scheduler"))
    return bins and (
        (folder / "etcd").is_file()
        or any((Path(d) / "etcd").is_file() for d in os.environ.get("PATH", "").split(os.pathsep))
    )


def run_control_plane(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``tools/kube ARGS``; the caller checks the return code."""
    return subprocess.run(
        ["bash", str(CONTROL_PLANE), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def poll(
    condition: Callable[[], Any], *, within: float = 30.0, what: str = "", every: float = 0.1
) -> Any:
    """Call ``condition`` until it returns something truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except (httpx.HTTPError, AssertionError, KeyError) as exc:
            last_error = exc
        time.sleep(every)  # polling interval, not a wait for a condition
    raise AssertionError(f"timed out after {within}s waiting for {what}; last error: {last_error}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of the shell that started it still answers kill -0; check its state.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False
    return True


def rfc3339_now() -> str:
    """Now, as the API server writes timestamps."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class ControlPlane:
    """A running control plane and a client with which the test plays kubelet and scheduler."""

    dir: Path
    env: dict[str, str]
    api: httpx.Client = field(repr=False)

    @property
    def release(self) -> str:
        """The Kubernetes release this plane runs (``1.37.2``)."""
        return self.env["K8S_VERSION"]

    @property
    def config_api(self) -> str:
        """The KubeSchedulerConfiguration apiVersion this release's kube-scheduler reads."""
        return config_api(self.release)

    def at_least(self, spec: str) -> bool:
        """Whether this plane's release is ``spec`` or newer (``plane.at_least("1.32")``)."""
        return release_matches(self.release, f">={spec}")

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (token auth, TLS without verification)."""
        return Path(self.env["KUBECONFIG"])

    @property
    def url(self) -> str:
        """The kube-apiserver's https URL."""
        return self.env["APISERVER"]

    # -- faults and the scheduler ----------------------------------------------------------

    def apiserver_stop(self) -> None:
        """Stop kube-apiserver (etcd and the state stay)."""
        done = run_control_plane("apiserver-stop", str(self.dir), timeout=60)
        assert done.returncode == 0, done.stderr

    def apiserver_start(self) -> None:
        """Start kube-apiserver again on the same port; returns once it is ready."""
        done = run_control_plane("apiserver-start", str(self.dir), timeout=180)
        assert done.returncode == 0, done.stderr

    def start_scheduler(self, config: Path) -> str:
        """Start kube-scheduler with ``config`` (see ``write_scheduler_config``); returns the URL
        of its /metrics. ``down`` stops it with the rest."""
        done = run_control_plane("scheduler", str(self.dir), str(config), timeout=120)
        assert done.returncode == 0, done.stderr
        # tools/kube appends a line per scheduler start: the newest is the last one (https with a
        # self-signed certificate from 1.21: read it without verification).
        for line in reversed((self.dir / "env").read_text().splitlines()):
            if line.startswith("SCHEDULER_METRICS="):
                return line.split("=", 1)[1]
        raise AssertionError("tools/kube scheduler did not write SCHEDULER_METRICS")

    def stop_scheduler(self) -> None:
        """Stop the kube-scheduler started by ``start_scheduler`` (by the pid it recorded)."""
        pid_file = self.dir / "scheduler.pid"
        if not pid_file.is_file():
            return
        pid = int(pid_file.read_text().strip())
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        poll(lambda: not _alive(pid), within=15, what=f"kube-scheduler pid {pid} to exit")
        pid_file.unlink()

    # -- objects ---------------------------------------------------------------------------

    def install_crds(self) -> None:
        """Create the chart's CustomResourceDefinitions (runway's WorkloadRecord) and wait until
        the API server serves them, as `helm install` does before the chart's templates."""
        for path in sorted(CRDS.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            r = self.api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
            assert r.status_code in (201, 409), r.text
            plural, group = crd["spec"]["names"]["plural"], crd["spec"]["group"]
            version = crd["spec"]["versions"][0]["name"]
            collection = f"/apis/{group}/{version}/{plural}"

            def served(path: str = collection) -> bool:
                return self.api.get(path).status_code == 200

            poll(served, within=60, what=f"the API server to serve {plural}.{group}")

    def records(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """runway's WorkloadRecords (all namespaces by default)."""
        path = "/apis/runway.dev/v1alpha1"
        path += f"/namespaces/{namespace}/workloadrecords" if namespace else "/workloadrecords"
        r = self.api.get(path)
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        return items

    def record(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The WorkloadRecord ``namespace/name`` (``app.model.record.record_name``), or None."""
        r = self.api.get(f"/apis/runway.dev/v1alpha1/namespaces/{namespace}/workloadrecords/{name}")
        if r.status_code == 404:
            return None
        assert r.status_code == 200, r.text
        found: dict[str, Any] = r.json()
        return found

    def record_status(self, namespace: str, name: str, part: str) -> dict[str, Any]:
        """``status.<part>`` of a WorkloadRecord (``life``, ``eviction``): {} when the record or
        the part is absent."""
        found = self.record(namespace, name) or {}
        value: dict[str, Any] = (found.get("status") or {}).get(part) or {}
        return value

    def write_record(
        self, namespace: str, workload: str, source: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Create (unless it exists) the WorkloadRecord of workload ``(workload, source)`` and
        merge ``status`` into its status, as an administrator (or an earlier runway) would."""
        name = record_name(workload, source)
        base = f"/apis/runway.dev/v1alpha1/namespaces/{namespace}/workloadrecords"
        body = {
            "apiVersion": "runway.dev/v1alpha1",
            "kind": "WorkloadRecord",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"workload": {"name": workload, "source": source}},
        }
        r = self.api.post(base, json=body)
        assert r.status_code in (201, 409), r.text
        r = self.api.patch(
            f"{base}/{name}/status",
            json={"status": status},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text
        written: dict[str, Any] = r.json()
        return written

    def ensure_namespace(self, name: str) -> None:
        """Create namespace ``name`` unless it exists."""
        r = self.api.post(
            "/api/v1/namespaces",
            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        assert r.status_code in (201, 409), r.text

    def ensure_priority_class(self, name: str, value: int) -> None:
        """Create PriorityClass ``name`` unless it exists (pods name it; the Priority admission
        plugin refuses a bare ``spec.priority``)."""
        r = self.api.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            json={
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )
        assert r.status_code in (201, 409), r.text

    def create_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        capacity: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A Node with status capacity/allocatable and Ready=True (set through the status
        subresource, as a kubelet would)."""
        r = self.api.post(
            "/api/v1/nodes",
            json={
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels or {}},
            },
        )
        assert r.status_code == 201, r.text
        capacity = capacity or {"cpu": "8", "memory": "32Gi", "pods": "110"}
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": rfc3339_now(),
                    "lastTransitionTime": rfc3339_now(),
                }
            ],
        }
        r = self.api.patch(
            f"/api/v1/nodes/{name}/status",
            json={"status": status},
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert r.status_code == 200, r.text
        node: dict[str, Any] = r.json()
        return node

    def nudge_node(self, name: str) -> None:
        """A node update after which kube-scheduler retries the pods it found unschedulable,
        instead of waiting for its flush (60 s on 1.20, 5 min from 1.32): the node's allocatable
        pod count raised by one. On 1.20 any node update did (a label change); from 1.32 the
        QueueingHints ask whether the change could make the pod fit, and NodeResourcesFit says
        yes only to more allocatable (any increase in the allowed pod count)."""
        node = self.api.get(f"/api/v1/nodes/{name}").raise_for_status().json()
        pods = str(int(node["status"]["allocatable"].get("pods", "110")) + 1)
        r = self.api.patch(
            f"/api/v1/nodes/{name}/status",
            json={"status": {"capacity": {"pods": pods}, "allocatable": {"pods": pods}}},
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert r.status_code == 200, r.text

    def delete_node(self, name: str) -> None:
        """Delete a node (404 is fine)."""
        r = self.api.delete(f"/api/v1/nodes/{name}")
        assert r.status_code in (200, 404), r.text

    def create_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        scheduler_name: str = "runway-e2e-nobody",
        requests: dict[str, str] | None = None,
        priority: int | None = None,
        owner: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A pending pod. By default no scheduler picks it up (the test binds it)."""
        meta: dict[str, Any] = {"name": name, "labels": labels or {}}
        if annotations:
            meta["annotations"] = annotations
        if owner:
            meta["ownerReferences"] = [owner]
        spec: dict[str, Any] = {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": requests or {"cpu": "100m"}},
                }
            ],
        }
        if priority is not None:
            spec["priority"] = priority
        r = self.api.post(
            f"/api/v1/namespaces/{namespace}/pods",
            json={"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
        )
        assert r.status_code == 201, r.text
        pod: dict[str, Any] = r.json()
        return pod

    def bind(self, name: str, node: str, namespace: str = "default") -> None:
        """Bind a pod to a node (POST pods/binding), as kube-scheduler does."""
        r = self.api.post(
            f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
            json={
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )
        assert r.status_code == 201, r.text

    def set_pod_running(self, name: str, namespace: str = "default", *, ready: bool = True) -> None:
        """Patch a bound pod's status to Running (Ready as given), as a kubelet would."""
        now = rfc3339_now()
        status = {
            "phase": "Running",
            "startTime": now,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": now,
                },
                {
                    "type": "ContainersReady",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": now,
                },
            ],
        }
        r = self.api.patch(
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            json={"status": status},
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert r.status_code == 200, r.text

    def delete_pod(self, name: str, namespace: str = "default") -> None:
        """Delete a pod at once (gracePeriodSeconds=0: there is no kubelet to wait for)."""
        r = self.api.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
        )
        assert r.status_code in (200, 404), r.text

    def empty_namespace(self, namespace: str) -> None:
        """Delete every pod and Job of ``namespace``, so the next test starts from an empty one
        (a Job in the background: orphaning, the default, waits for a garbage collector this
        plane does not run)."""
        for p in self.pods():
            if p["metadata"]["namespace"] == namespace:
                self.delete_pod(p["metadata"]["name"], namespace)
        for job in self.api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs").json()["items"]:
            r = self.api.delete(
                f"/apis/batch/v1/namespaces/{namespace}/jobs/{job['metadata']['name']}",
                params={"propagationPolicy": "Background"},
            )
            assert r.status_code in (200, 404), r.text

    def pods(self) -> list[dict[str, Any]]:
        """Every pod in the cluster."""
        items: list[dict[str, Any]] = (
            self.api.get("/api/v1/pods").raise_for_status().json()["items"]
        )
        return items

    def nodes(self) -> list[dict[str, Any]]:
        """Every node in the cluster."""
        items: list[dict[str, Any]] = (
            self.api.get("/api/v1/nodes").raise_for_status().json()["items"]
        )
        return items

    def lease(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        """A Lease, or None."""
        r = self.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
        if r.status_code == 404:
            return None
        lease: dict[str, Any] = r.raise_for_status().json()
        return lease


def require_release(release: str) -> None:
    """Skip (fail when ``CI=true``) unless ``tools/kube build RELEASE`` has been run."""
    if binaries_present(release):
        return
    build = f"{CONTROL_PLANE} build {release}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but Kubernetes {release} is not built: run `{build}`")
    pytest.skip(
        f"Kubernetes {release} not built (kube-apiserver, kube-scheduler, etcd in "
        f"{release_dir(release)}): run `{build}` once (10-25 minutes on 2 cores)"
    )


@contextlib.contextmanager
def control_plane_up(release: str | None = None) -> Iterator[ControlPlane]:
    """Start etcd + kube-apiserver of ``release`` (default: the matrix's first) in a fresh
    temporary directory; ALWAYS tear it down."""
    release = resolve_release(release) if release else releases()[0]
    require_release(release)
    with tempfile.TemporaryDirectory(prefix="runway-e2e-") as tmp:
        state = Path(tmp) / "plane"
        try:
            up = run_control_plane("up", release, str(state))
            assert up.returncode == 0, f"tools/kube up {release} failed:\n{up.stderr}"
            env = dict(
                line.split("=", 1)
                for line in (state / "env").read_text().splitlines()
                if "=" in line
            )
            # The kubeconfig says insecure-skip-tls-verify: the apiserver's cert is self-signed.
            with httpx.Client(
                base_url=env["APISERVER"],
                headers={"Authorization": f"Bearer {env['TOKEN']}"},
                verify=False,
                timeout=30,
            ) as api:
                plane = ControlPlane(state, env, api)
                plane.install_crds()
                yield plane
        finally:
            down = run_control_plane("down", str(state), timeout=120)
            if down.returncode != 0:
                print(f"tools/kube down failed:\n{down.stderr}")
            keep = os.environ.get("RUNWAY_E2E_KEEP_LOGS")
            if keep:  # the plane's logs (apiserver, scheduler, etcd) outlive the temporary dir
                target = Path(keep) / f"{release}-{Path(tmp).name}"
                target.mkdir(parents=True, exist_ok=True)
                for log in state.glob("*.log"):
                    shutil.copy(log, target / log.name)


@pytest.fixture(scope="session", params=releases(), ids=lambda release: f"k8s-{release}")
def k8s_release(request: pytest.FixtureRequest) -> str:
    """The Kubernetes release of this run of the test (the matrix, ``$RUNWAY_K8S_RELEASES``);
    skipped (failed when CI=true) when it is not built."""
    release: str = request.param
    require_release(release)
    return release


@pytest.fixture(scope="session")
def control_plane(k8s_release: str) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on loopback, one per release for the whole session; always torn
    down."""
    with control_plane_up(k8s_release) as plane:
        yield plane


@pytest.fixture(scope="module")
def dedicated_plane(k8s_release: str) -> Iterator[ControlPlane]:
    """A control plane of the module's own: for tests that run a kube-scheduler (one per
    plane) or need a cluster no other test touches."""
    with control_plane_up(k8s_release) as plane:
        yield plane


class Closes(Protocol):
    """What a test makes and must close when it ends (``test_requeue_e2e.Cluster``)."""

    def close(self) -> None: ...


@pytest.fixture
def made(request: pytest.FixtureRequest, plane: ControlPlane) -> Iterator[list[Closes]]:
    """The clusters a test makes (``made.append(c)``), closed when it ends, even when it fails;
    then the test module's namespace (its ``NS``) is emptied on the module's ``plane``, so each
    test starts from an empty namespace."""
    clusters: list[Closes] = []
    try:
        yield clusters
    finally:
        for c in clusters:
            c.close()
        plane.empty_namespace(request.module.NS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip a test on a release its ``releases`` marker excludes, saying why."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        release = callspec.params.get("k8s_release") if callspec is not None else None
        for mark in item.iter_markers("releases"):
            reason = mark.kwargs.get("reason")
            if not reason:
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.releases needs a reason=")
            if release is None:
                continue
            if not all(release_matches(release, spec) for spec in mark.args):
                wanted = ", ".join(mark.args)
                item.add_marker(pytest.mark.skip(reason=f"not on {release} ({wanted}): {reason}"))


class RunwayHandle:
    """A runway process started by the ``runway`` fixture."""

    def __init__(self, process: RunwayProcess, stack: contextlib.ExitStack) -> None:
        self.process = process
        self._stack = stack
        self.url = process.url
        self.pid = process.proc.pid
        self.client = httpx.Client(base_url=process.url, timeout=10)

    def get(self, path: str) -> Any:
        """GET a JSON document from runway."""
        return self.client.get(path).raise_for_status().json()

    def summary(self, detail: bool = False) -> dict[str, Any]:
        """``/v1/cache/summary``."""
        summary: dict[str, Any] = self.get(f"/v1/cache/summary?detail={str(detail).lower()}")
        return summary

    def ready(self) -> bool:
        """``/readyz`` answers 200."""
        try:
            return self.client.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, within: float = 30) -> None:
        """Poll ``/readyz`` until the caches are synced."""
        poll(self.ready, within=within, what=f"runway {self.url} ready")

    def stop(self) -> int | None:
        """Stop this process now (SIGTERM by pid, then SIGKILL); returns its exit code."""
        self.client.close()
        self._stack.close()
        return self.process.proc.returncode

    def kill(self) -> None:
        """SIGKILL by pid: no clean shutdown (the Lease is not released)."""
        self.process.proc.kill()
        self.process.proc.wait(timeout=10)
        self.stop()

    def logs(self) -> str:
        """What the process wrote so far."""
        return self.process.logs()


HARNESS_SCOPE: dict[str, Any] = {"manageWithoutQueue": True}
"""The scope runway runs with in e2e tests that set none (see ``harness_config``)."""
HARNESS_SCHEDULERS = ["default-scheduler", "runway-e2e-nobody"]
"""The schedulers of the harness's pods: kube-scheduler's, and the name of the pods no
scheduler picks up (``ControlPlane.create_pod``: the test binds them, playing a scheduler)."""


def harness_config(config: dict[str, Any] | None) -> dict[str, Any]:
    """``config`` as the e2e harness runs runway: the harness's pods name a queue only where a
    test is about queues, and many are bound by the test itself under a scheduler name nobody
    serves; runway manages them all unless the test sets its own ``scope`` or
    ``preemption.schedulerNames`` (the tests of the scope do)."""
    out = {"scope": HARNESS_SCOPE, **(config or {})}
    preemption = dict(out.get("preemption") or {})
    preemption.setdefault("schedulerNames", HARNESS_SCHEDULERS)
    out["preemption"] = preemption
    return out


class RunwayFactory:
    """Starts runway processes against the control plane; stops them all at teardown."""

    def __init__(self, plane: ControlPlane, tmp: Path) -> None:
        self.plane = plane
        self.tmp = tmp
        self.handles: list[RunwayHandle] = []

    def write_config(self, config: dict[str, Any], name: str = "runway.yaml") -> Path:
        """Write a runway config file under the test's tmp dir."""
        path = self.tmp / name
        path.write_text(yaml.safe_dump(config))
        return path

    def start(
        self,
        config: dict[str, Any] | None = None,
        *,
        args: tuple[str, ...] = (),
        wait_ready: bool = True,
        env: dict[str, str] | None = None,
    ) -> RunwayHandle:
        """``python -m app serve --kubeconfig <plane> --port <free> [--config <file>]``
        (``env``: added to the process's environment)."""
        full_args = ["--kubeconfig", str(self.plane.kubeconfig), *args]
        if "--config" not in args:
            config = harness_config(config)
            path = self.write_config(config, f"runway-{len(self.handles)}.yaml")
            full_args += ["--config", str(path)]
        stack = contextlib.ExitStack()
        process = stack.enter_context(run_runway(self.tmp, full_args, env=env))
        handle = RunwayHandle(process, stack)
        self.handles.append(handle)
        if wait_ready:
            try:
                handle.wait_ready()
            except AssertionError:
                print(handle.logs())
                raise
        return handle

    def close(self) -> None:
        """Stop every process still running (by pid), printing logs of those that failed."""
        keep = os.environ.get("RUNWAY_E2E_KEEP_LOGS")
        for handle in self.handles:
            handle.stop()
            if keep:  # beside the planes' logs (see the module docstring)
                target = Path(keep) / f"{self.plane.release}-runway"
                target.mkdir(parents=True, exist_ok=True)
                (target / f"{self.plane.dir.parent.name}-{handle.pid}.log").write_text(
                    handle.logs()
                )


@pytest.fixture
def runway(
    control_plane: ControlPlane, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[RunwayFactory]:
    """Start runway processes with ``runway.start(config)``; stopped by pid at teardown."""
    factory = RunwayFactory(control_plane, tmp_path)
    try:
        yield factory
    finally:
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for handle in factory.handles:
                print(f"--- runway {handle.url} (pid {handle.pid}) log ---\n{handle.logs()}")
        factory.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the item, so fixtures can print logs on failure."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def write_scheduler_config(
    path: Path,
    runway_url: str,
    *,
    release: str,
    url_prefix: str = "/scheduler",
    node_cache_capable: bool = True,
    weight: int = 1,
    http_timeout: str = "5s",
    scheduler_name: str = "default-scheduler",
    extra: dict[str, Any] | None = None,
    prioritize: bool = True,
) -> Path:
    """A KubeSchedulerConfiguration with runway as its extender, in the API kube-scheduler
    ``release`` reads (``plane.release``; required: a default written the wrong API for the
    other releases): v1beta1 on 1.20, v1 from 1.25. The keys written here mean the same in both.

    Pass it to ``ControlPlane.start_scheduler``; ``clientConnection.kubeconfig`` is filled in by
    tools/kube. ``prioritize=False``: the stanza without ``prioritizeVerb`` (what runway
    documents when no preference needs it: ``check-config``).
    """
    config: dict[str, Any] = {
        "apiVersion": config_api(resolve_release(release)),
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name}],
        "extenders": [
            {
                "urlPrefix": runway_url.rstrip("/") + url_prefix,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "preemptVerb": "preempt",
                "weight": weight,
                "nodeCacheCapable": node_cache_capable,
                "httpTimeout": http_timeout,
            }
        ],
    }
    if not prioritize:
        del config["extenders"][0]["prioritizeVerb"]
    config.update(extra or {})
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@contextlib.contextmanager
def runway_scheduling(
    plane: ControlPlane,
    tmp: Path,
    config: dict[str, Any],
    *,
    scheduler_name: str,
    priorities: dict[str, int],
) -> Iterator[RunwayHandle]:
    """The priority classes, runway started on ``config`` and a kube-scheduler whose profile
    ``scheduler_name`` calls it (backoff 1 s to 2 s, so retries come quickly); the scheduler and
    runway are stopped at exit, even on failure."""
    for name, value in priorities.items():
        plane.ensure_priority_class(name, value)
    factory = RunwayFactory(plane, tmp)
    try:
        rw = factory.start(config)
        scheduler = write_scheduler_config(
            tmp / "scheduler.yaml",
            rw.url,
            release=plane.release,
            scheduler_name=scheduler_name,
            extra={"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 2},
        )
        plane.start_scheduler(scheduler)
        yield rw
    finally:
        with contextlib.suppress(Exception):  # not started, or already gone
            plane.stop_scheduler()
        factory.close()
