"""End-to-end fixtures: a real etcd + kube-apiserver (``control-plane.sh``), runway processes
pointed at it, and helpers with which a test plays the kubelet and the scheduler.

* ``control_plane`` (session): ``control-plane.sh up DIR`` in a temporary directory, and
  ALWAYS ``control-plane.sh down DIR`` afterwards, even when a test or ``up`` fails. Skipped with
  a reason when the binaries are not built, unless ``CI=true`` (then it must run).
* ``runway`` (function): ``runway.start(...)`` runs ``python -m app serve --kubeconfig ... --port
  <free>`` and returns a handle; every process is stopped BY ITS PID at teardown (never by name).
* ``write_scheduler_config`` / ``ControlPlane.start_scheduler``: register runway as an extender
  of a real kube-scheduler (KubeSchedulerConfiguration v1beta1: the 1.20 scheduler knows no v1).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.model.record import record_name
from tests.reference import CONTROL_PLANE
from tests.runway_process import RunwayProcess, run_runway

CRDS = Path(__file__).resolve().parents[2] / "helm" / "runway" / "crds"
"""The chart's CustomResourceDefinitions, installed on every plane."""


def binaries_present() -> bool:
    """Whether ``control-plane.sh build`` has been run on this machine."""
    cache = Path(os.environ.get("RUNWAY_K8S_CACHE", Path.home() / ".cache" / "runway-k8s"))
    bins = all((cache / "bin" / name).is_file() for name in ("kube-apiserver", "kube-scheduler"))
    return bins and any(
        (Path(d) / "etcd").is_file() for d in os.environ.get("PATH", "").split(os.pathsep)
    )


def run_control_plane(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``control-plane.sh ARGS``; the caller checks the return code."""
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
        # control-plane.sh appends a line per scheduler start: the newest is the last one.
        for line in reversed((self.dir / "env").read_text().splitlines()):
            if line.startswith("SCHEDULER_METRICS="):
                return line.split("=", 1)[1]
        raise AssertionError("control-plane.sh scheduler did not write SCHEDULER_METRICS")

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


@contextlib.contextmanager
def control_plane_up() -> Iterator[ControlPlane]:
    """Start etcd + kube-apiserver in a fresh temporary directory; ALWAYS tear it down."""
    if not binaries_present():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the control plane is not built: run `{CONTROL_PLANE} build`")
        pytest.skip(
            "control-plane binaries or etcd missing (~/.cache/runway-k8s/bin); run "
            f"`{CONTROL_PLANE} build` once (about 10 minutes)"
        )
    with tempfile.TemporaryDirectory(prefix="runway-e2e-") as tmp:
        state = Path(tmp) / "plane"
        try:
            up = run_control_plane("up", str(state))
            assert up.returncode == 0, f"control-plane up failed:\n{up.stderr}"
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
                print(f"control-plane down failed:\n{down.stderr}")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver on loopback for the whole session; always torn down."""
    with control_plane_up() as plane:
        yield plane


@pytest.fixture(scope="module")
def dedicated_plane() -> Iterator[ControlPlane]:
    """A control plane of the module's own: for tests that run a kube-scheduler (one per
    plane) or need a cluster no other test touches."""
    with control_plane_up() as plane:
        yield plane


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
        for handle in self.handles:
            handle.stop()


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
    url_prefix: str = "/scheduler",
    node_cache_capable: bool = True,
    weight: int = 1,
    http_timeout: str = "5s",
    scheduler_name: str = "default-scheduler",
    extra: dict[str, Any] | None = None,
    prioritize: bool = True,
) -> Path:
    """A KubeSchedulerConfiguration (v1beta1, as 1.20 reads) with runway as its extender.

    Pass it to ``ControlPlane.start_scheduler``; ``clientConnection.kubeconfig`` is filled in by
    control-plane.sh. ``prioritize=False``: the stanza without ``prioritizeVerb`` (what runway
    documents when no preference needs it: ``check-config``).
    """
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
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
            scheduler_name=scheduler_name,
            extra={"podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 2},
        )
        plane.start_scheduler(scheduler)
        yield rw
    finally:
        with contextlib.suppress(Exception):  # not started, or already gone
            plane.stop_scheduler()
        factory.close()
