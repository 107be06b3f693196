"""The container image, built from the Dockerfile and run for real (podman, ``container.sh``).

The image is built once per session (``container.sh build . TAG --format docker``, so the
HEALTHCHECK is kept) and removed at the end. Every container gets a unique name and is removed
by that name (``podman rm -f NAME``) when its test ends, pass or fail. Containers run as the chart
runs them: ``--read-only``, every capability dropped, no new privileges, host network.

* serving: uid 10001, a read-only root filesystem, ``/healthz``, ``/readyz``, a filter and a
  preempt on golden payloads, ``python -m app --version``, no tests/docs/bytecode or unused
  uvicorn extras in the virtualenv, a clean exit on SIGTERM within the chart's grace period;
* HEALTHCHECK: kept in the image, and healthy with the default command, another port, and HTTPS;
* as kube-scheduler's extender: runway from the image (the plane's kubeconfig mounted read-only)
  and a pod scheduled through it on the real control plane.

Skipped with a reason where podman is not installed, unless ``CI=true`` (``.ci/run`` runs
``container.sh setup``): then a missing podman fails.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.e2e.conftest import ControlPlane, poll, write_scheduler_config
from tests.helm_chart import CHART
from tests.reference import SHARED, wire_cases
from tests.runway_process import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CONTAINER_SH = SHARED / "tools" / "container.sh"
CASES = {c["name"]: c for c in wire_cases()}
UID = 10001
# The chart's terminationGracePeriodSeconds: SIGTERM to SIGKILL in a pod.
GRACE_S = float(
    yaml.safe_load((CHART / "values.yaml").read_text())["terminationGracePeriodSeconds"]
)
# What `--read-only --cap-drop all --security-opt no-new-privileges` mirrors from the chart's
# securityContext (readOnlyRootFilesystem, capabilities.drop [ALL], allowPrivilegeEscalation
# false); /tmp is a tmpfs, as the chart's emptyDir.
LOCKED_DOWN = ("--read-only", "--cap-drop", "all", "--security-opt", "no-new-privileges")


def podman(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``container.sh podman ARGS`` (this machine's storage and runtime settings)."""
    done = subprocess.run(
        ["bash", str(CONTAINER_SH), "podman", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.returncode}\n{done.stderr}"
    return done


def podman_missing() -> str | None:
    """Why podman cannot run here, or None."""
    if not CONTAINER_SH.is_file():
        return f"{CONTAINER_SH} is missing"
    for tool in ("podman", "runc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: run `{CONTAINER_SH} setup` once"
    info = podman("info", timeout=60, check=False)
    if info.returncode != 0:
        return f"podman cannot run here: {info.stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="session")
def image() -> Iterator[str]:
    """The Dockerfile built once per session (docker format: HEALTHCHECK kept); removed after."""
    reason = podman_missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    tag = f"localhost/runway-test:{uuid.uuid4().hex[:10]}"
    started = time.monotonic()
    build = subprocess.run(
        # --layers=false: no intermediate images left behind (vfs storage copies every layer).
        [
            "bash",
            str(CONTAINER_SH),
            "build",
            str(ROOT),
            tag,
            "--format",
            "docker",
            "--layers=false",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    try:
        assert build.returncode == 0, f"image build failed:\n{build.stdout[-3000:]}{build.stderr}"
        size = int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout)
        print(f"built {tag} in {time.monotonic() - started:.0f} s: {size / 1e6:.0f} MB")
        yield tag
    finally:
        podman("rmi", "-f", tag, check=False)


class Container:
    """A container started by ``run_container``: its name and, on host network, its URL."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url

    def exec(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` inside the container."""
        return podman("exec", self.name, *cmd, check=check)

    def state(self) -> tuple[str, int]:
        """(status, exit code) as podman reports them."""
        out = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", self.name)
        status, code = out.stdout.split()
        return status, int(code)

    def logs(self) -> str:
        """What the container wrote so far."""
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def wait_healthy(self, **client: Any) -> None:
        """Poll ``/healthz`` (httpx options ``client``); fail at once if the container exits."""

        def up() -> bool:
            if self.state()[0] != "running":
                raise RuntimeError(f"container {self.name} exited: {self.state()}")
            return httpx.get(f"{self.url}/healthz", timeout=2, **client).status_code == 200

        poll(up, within=60, what=f"runway in container {self.name} healthy")

    def healthcheck(self) -> bool:
        """``podman healthcheck run``: the image's HEALTHCHECK, run now."""
        return podman("healthcheck", "run", self.name, check=False).returncode == 0


@contextlib.contextmanager
def run_container(
    image: str,
    *command: str,
    port: int | None = None,
    scheme: str = "http",
    options: tuple[str, ...] = ("--network", "host"),
    mounts: dict[Path, str] | None = None,
) -> Iterator[Container]:
    """``podman run -d`` locked down; ``podman rm -f NAME`` afterwards, whatever happened."""
    name = f"runway-test-{uuid.uuid4().hex[:10]}"
    volumes = [f"--volume={src}:{dst}:ro" for src, dst in (mounts or {}).items()]
    try:
        podman("run", "--detach", "--name", name, *LOCKED_DOWN, *options, *volumes, image, *command)
        container = Container(name, f"{scheme}://127.0.0.1:{port}")
        try:
            yield container
        except BaseException:
            print(f"--- container {name} log ---\n{container.logs()}")
            raise
    finally:
        podman("rm", "--force", "--time", "0", name, check=False)


def serve_args(port: int, *extra: str) -> tuple[str, ...]:
    return ("python", "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port), *extra)


# --- the image serving on its own -------------------------------------------------------------


@pytest.fixture(scope="module")
def serving(image: str) -> Iterator[Container]:
    """The image on the embedded default config (no cluster), on a free port."""
    port = free_port()
    with run_container(image, *serve_args(port), port=port) as container:
        container.wait_healthy()
        yield container


def test_runs_as_uid_10001_on_a_read_only_root(image: str, serving: Container) -> None:
    user = podman("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()
    assert user == f"{UID}:{UID}"
    assert serving.exec("id", "-u").stdout.strip() == str(UID)
    assert serving.exec("id", "-g").stdout.strip() == str(UID)
    status = serving.exec("cat", "/proc/1/status").stdout
    effective = next(line for line in status.splitlines() if line.startswith("CapEff:"))
    assert int(effective.split()[1], 16) == 0, effective
    for path in ("/opt/runway/x", "/x"):
        denied = serving.exec("touch", path, check=False)
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr


def test_health_readiness_and_extender_verbs_on_golden_payloads(serving: Container) -> None:
    with httpx.Client(base_url=serving.url, timeout=10) as client:
        assert client.get("/healthz").text == "ok"
        assert client.get("/readyz").status_code == 200  # embedded default: no caches to sync
        filter_request = CASES["nodecache-filter"]["request"]
        reply = client.post("/scheduler/filter", json=filter_request)
        assert reply.status_code == 200, reply.text
        assert reply.json()["NodeNames"] == filter_request["NodeNames"]
        assert reply.json()["Error"] == ""
        preempt_request = CASES["nodecache-preempt"]["request"]
        reply = client.post("/scheduler/preempt", json=preempt_request)
        assert reply.status_code == 200, reply.text
        # Takeover (the default): kube-scheduler is told to delete nothing; runway decided a node
        # among the offered ones and executes it itself (dry-run here: no cluster).
        assert reply.json()["NodeNameToMetaVictims"] == {}
        offered = {
            node: {p["UID"] for p in meta["Pods"]}
            for node, meta in preempt_request["NodeNameToMetaVictims"].items()
        }
        (decision,) = client.get("/v1/preemptions/decisions").json()["decisions"]
        assert decision["chosenNode"] in offered
        assert decision["victims"] and set(decision["victims"]) <= offered[decision["chosenNode"]]


def test_version_inside_the_image(serving: Container) -> None:
    from importlib.metadata import version

    assert (
        serving.exec("python", "-m", "app", "--version").stdout == f"runway {version('runway')}\n"
    )


def test_virtualenv_holds_only_what_runs(serving: Container) -> None:
    leftovers = serving.exec(
        "find", "/opt/runway", "-name", "__pycache__", "-o", "-name", "*.pyc",
        "-o", "-type", "d", "(", "-name", "tests", "-o", "-name", "docs", ")",
    ).stdout  # fmt: skip
    assert leftovers == ""
    probe = (
        "import importlib.util as u; "
        "print([m for m in ('websockets', 'watchfiles', 'dotenv', 'pip', 'setuptools') "
        "if u.find_spec(m)], [m for m in ('uvloop', 'httptools') if not u.find_spec(m)])"
    )
    assert serving.exec("python", "-c", probe).stdout.strip() == "[] []"


def test_sigterm_is_a_clean_exit_within_the_grace_period(image: str) -> None:
    port = free_port()
    with run_container(image, *serve_args(port), port=port) as container:
        container.wait_healthy()
        sent = time.monotonic()
        podman("kill", "--signal", "TERM", container.name)
        _, code = poll(
            lambda: (s := container.state())[0] == "exited" and s,
            within=GRACE_S,
            what=f"the container to exit within the {GRACE_S:.0f} s grace period",
        )
        print(f"exited {time.monotonic() - sent:.1f} s after SIGTERM, code {code}")
        # As PID 1 the re-raised SIGTERM (uvicorn's) has no default action: the exit is 0.
        assert code == 0, container.logs()
        assert "Traceback" not in container.logs()


# --- HEALTHCHECK ------------------------------------------------------------------------------


def test_healthcheck_is_kept_in_the_image(image: str) -> None:
    out = podman("image", "inspect", "--format", "{{json .Config.Healthcheck}}", image).stdout
    check = json.loads(out)
    assert check["Test"] == ["CMD", "python", "/opt/runway/healthcheck.py"], check


def test_healthcheck_with_the_default_command(image: str) -> None:
    # No network of its own but loopback: the image's CMD binds 0.0.0.0:8888 without clashing
    # with anything on this machine.
    with run_container(image, options=("--network", "none")) as container:
        poll(container.healthcheck, within=60, what="HEALTHCHECK healthy on the default command")


def test_healthcheck_follows_port_and_config(
    image: str, serving: Container, tmp_path: Path
) -> None:
    assert serving.healthcheck(), "HEALTHCHECK on a --port other than 8888"
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(f"server:\n  host: 127.0.0.1\n  port: {port}\n")
    config.chmod(0o644)
    with run_container(
        image,
        *("python", "-m", "app", "serve", "--config", "/etc/runway/config.yaml"),
        port=port,
        mounts={config: "/etc/runway/config.yaml"},
    ) as container:
        container.wait_healthy()
        assert container.healthcheck(), "HEALTHCHECK on the config file's server.port"


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 and its key, readable by the container's user."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "runway")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("runway")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    for path in (cert_file, key_file):
        path.chmod(0o644)
    return cert_file, key_file


@pytest.mark.parametrize("client_cert", [False, True], ids=["https-flags", "mutual-tls-config"])
def test_healthcheck_over_https(image: str, tmp_path: Path, client_cert: bool) -> None:
    cert_file, key_file = self_signed(tmp_path)
    cert, key = "/etc/runway/tls/tls.crt", "/etc/runway/tls/tls.key"
    config: dict[str, Any]
    flags: tuple[str, ...]
    if client_cert:
        # TLS from the config file alone, and mutual: the healthcheck has no client certificate,
        # so it checks that the port accepts connections (as the chart's probes do then).
        tls = {"certFile": cert, "keyFile": key, "clientCAFile": cert, "requireClientCert": True}
        config, flags = {"server": {"tls": tls}}, ()
    else:
        config, flags = {}, ("--tls-cert-file", cert, "--tls-key-file", key)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    config_file.chmod(0o644)
    port = free_port()
    with run_container(
        image,
        *serve_args(port, "--config", "/etc/runway/config.yaml", *flags),
        port=port,
        scheme="https",
        mounts={cert_file: cert, key_file: key, config_file: "/etc/runway/config.yaml"},
    ) as container:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(cert_file, key_file)  # self-signed: its own client CA
        container.wait_healthy(verify=context)
        assert container.healthcheck(), "HEALTHCHECK over HTTPS"


# --- the image as kube-scheduler's extender ---------------------------------------------------

SCHEDULER = "runway-e2e-image"


def test_kube_scheduler_schedules_a_pod_through_the_image(
    image: str, dedicated_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = dedicated_plane
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copyfile(plane.kubeconfig, kubeconfig)
    kubeconfig.chmod(0o644)  # the container's user 10001 reads it
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"kubernetes": {"leaderElection": {"enable": False}}}))
    config.chmod(0o644)
    port = free_port()
    command = serve_args(
        port, "--config", "/etc/runway/config.yaml", "--kubeconfig", "/etc/runway/kubeconfig"
    )
    mounts = {kubeconfig: "/etc/runway/kubeconfig", config: "/etc/runway/config.yaml"}
    with run_container(image, *command, port=port, mounts=mounts) as container:
        rw = httpx.Client(base_url=container.url, timeout=10)
        with rw:
            container.wait_healthy()
            poll(
                lambda: rw.get("/readyz").status_code == 200,
                within=60,
                what="runway in the container synced with the API server",
            )
            scheduler_config = write_scheduler_config(
                tmp_path / "scheduler.yaml",
                container.url,
                release=plane.release,
                scheduler_name=SCHEDULER,
            )
            plane.start_scheduler(scheduler_config)
            try:
                node = f"image-{uuid.uuid4().hex[:6]}"
                plane.create_node(node, capacity={"cpu": "2", "memory": "4Gi", "pods": "10"})
                plane.create_pod(f"{node}-pod", scheduler_name=SCHEDULER)

                def bound() -> str | None:
                    pod = plane.api.get(f"/api/v1/namespaces/default/pods/{node}-pod").json()
                    name: str | None = pod["spec"].get("nodeName")
                    return name

                assert poll(bound, within=60, what="the pod bound by kube-scheduler") == node
                calls = [
                    line
                    for line in rw.get("/metrics").text.splitlines()
                    if line.startswith("runway_extender_requests_total{")
                ]
                assert any('verb="filter"' in c and 'outcome="ok"' in c for c in calls), calls
            finally:
                plane.stop_scheduler()
