"""The chart against a real kube-apiserver: every rendered object passes a server-side dry run.

The control plane is each release of the matrix (``tools/kube``: 1.20, 1.34, 1.37). The chart is
rendered the way ``helm install`` renders it there: with the cluster's version and its discovered
API versions, so version-dependent choices (the PodDisruptionBudget's ``policy/v1beta1`` on 1.20,
``policy/v1`` from 1.21) are the ones a real install makes. Kinds the cluster does not serve
(ServiceMonitor: a Prometheus Operator CRD) are skipped explicitly and reported.
"""

from __future__ import annotations

import base64
import re
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import httpx
import pytest
import yaml

from tests.e2e.conftest import ControlPlane, control_plane_up, poll
from tests.helm_chart import CHART, NAMESPACE, all_options, render
from tests.runway_process import free_port, run_runway

pytestmark = pytest.mark.e2e

# CRD-backed kinds the bare control plane has no definition for; anything else missing fails.
OPTIONAL_CRD_GROUPS = {"monitoring.coreos.com", "cert-manager.io"}


@dataclass
class Cluster:
    """A running control plane and what its discovery says it serves."""

    plane: ControlPlane
    client: httpx.Client
    version: str
    # "group/version" → kind → (plural resource, namespaced)
    resources: dict[str, dict[str, tuple[str, bool]]] = field(default_factory=dict)

    def api_versions(self) -> list[str]:
        """What Helm's ``.Capabilities.APIVersions`` holds on this cluster."""
        out = list(self.resources)
        out += [f"{gv}/{kind}" for gv, kinds in self.resources.items() for kind in kinds]
        return out

    def path(self, obj: dict[str, Any]) -> str | None:
        """The collection URL path to POST ``obj`` to; None when the cluster lacks the kind."""
        gv, kind = obj["apiVersion"], obj["kind"]
        found = self.resources.get(gv, {}).get(kind)
        if found is None:
            return None
        plural, namespaced = found
        base = f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"
        if namespaced:
            return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}"
        return f"{base}/{plural}"


def _discover(client: httpx.Client) -> dict[str, dict[str, tuple[str, bool]]]:
    group_versions = ["v1"]
    for group in client.get("/apis").raise_for_status().json()["groups"]:
        group_versions += [v["groupVersion"] for v in group["versions"]]
    resources: dict[str, dict[str, tuple[str, bool]]] = {}
    for gv in group_versions:
        url = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        listing = client.get(url).raise_for_status().json()
        resources[gv] = {
            r["kind"]: (r["name"], r["namespaced"])
            for r in listing["resources"]
            if "/" not in r["name"]  # subresources
        }
    return resources


@pytest.fixture(scope="module")
def cluster(k8s_release: str) -> Iterator[Cluster]:
    """A control plane of the module's own (always torn down) with the chart's namespace."""
    with control_plane_up(k8s_release) as plane:
        client = plane.api
        version = client.get("/version").raise_for_status().json()["gitVersion"]
        plane.ensure_namespace(NAMESPACE)
        yield Cluster(plane, client, version, _discover(client))


def _dry_run(cluster: Cluster, objects: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """POST each object with ``dryRun=All``; returns (failures, skipped notes)."""
    failures: list[str] = []
    skipped: list[str] = []
    for obj in objects:
        what = f"{obj['kind']} {obj['metadata']['name']} ({obj['apiVersion']})"
        path = cluster.path(obj)
        if path is None:
            group = obj["apiVersion"].split("/")[0]
            assert group in OPTIONAL_CRD_GROUPS, f"{what}: the cluster does not serve this kind"
            skipped.append(f"{what}: CRD not installed on the test cluster")
            continue
        reply = cluster.client.post(path, params={"dryRun": "All"}, json=obj)
        if reply.status_code not in (200, 201):
            failures.append(f"{what}: HTTP {reply.status_code}: {reply.json().get('message')}")
    return failures, skipped


def test_all_options_render_passes_server_side_dry_run(cluster: Cluster) -> None:
    objects = render(
        all_options(), kube_version=cluster.version, api_versions=cluster.api_versions()
    )
    pdb = next(o for o in objects if o["kind"] == "PodDisruptionBudget")
    # Kubernetes 1.20 serves no policy/v1; 1.25 no longer serves policy/v1beta1
    wanted = "policy/v1" if cluster.plane.at_least("1.21") else "policy/v1beta1"
    assert pdb["apiVersion"] == wanted
    failures, skipped = _dry_run(cluster, objects)
    assert failures == []
    # Prometheus Operator kinds are the ones a bare cluster lacks: skipped, not silently dropped
    assert sorted(skipped) == [
        "PrometheusRule runway-ext (monitoring.coreos.com/v1): "
        "CRD not installed on the test cluster",
        "ServiceMonitor runway-ext (monitoring.coreos.com/v1): "
        "CRD not installed on the test cluster",
    ]
    assert len(objects) - len(skipped) >= 15


def test_default_render_passes_server_side_dry_run(cluster: Cluster) -> None:
    objects = render(kube_version=cluster.version, api_versions=cluster.api_versions())
    failures, skipped = _dry_run(cluster, objects)
    assert failures == [] and skipped == []


def test_real_kube_scheduler_starts_with_the_charts_configuration(cluster: Cluster) -> None:
    # 1.20 knows KubeSchedulerConfiguration v1beta1 only, 1.25+ v1 only; the chart renders the
    # one asked for. TLS is off here: the CA file the chart mounts does not exist outside a pod.
    values = all_options()
    values["tls"] = {"enabled": False}
    values["scheduler"]["configApiVersion"] = cluster.plane.config_api
    objects = render(values, kube_version=cluster.version, api_versions=cluster.api_versions())
    configmap = next(
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("scheduler")
    )
    config_file = cluster.plane.dir / "chart-scheduler.yaml"
    config_file.write_text(configmap["data"]["config.yaml"])
    try:
        cluster.plane.start_scheduler(config_file)  # asserts kube-scheduler accepted the config
        effective = yaml.safe_load((cluster.plane.dir / "scheduler-config.yaml").read_text())
        assert effective["extenders"][0]["urlPrefix"] == (
            f"http://runway-ext.{NAMESPACE}.svc:443/runway/scheduler"
        )
    finally:
        cluster.plane.stop_scheduler()


def test_default_render_with_the_bundled_scheduler_passes_server_side_dry_run(
    cluster: Cluster,
) -> None:
    objects = render(
        {"scheduler": {"enabled": True}},
        kube_version=cluster.version,
        api_versions=cluster.api_versions(),
    )
    kinds = sorted(o["kind"] for o in objects)
    # the default: mutual TLS with generated certificates, a NetworkPolicy, and a PDB each
    assert kinds.count("Secret") == 3 and kinds.count("PodDisruptionBudget") == 2
    assert "NetworkPolicy" in kinds
    failures, skipped = _dry_run(cluster, objects)
    assert failures == [] and skipped == []


def test_cert_manager_and_monitoring_render_passes_server_side_dry_run(cluster: Cluster) -> None:
    values = {
        "certManager": {"enabled": True},
        "scheduler": {"enabled": True},
        "serviceMonitor": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "config": {"auth": {"protectMetrics": True}},
    }
    objects = render(values, kube_version=cluster.version, api_versions=cluster.api_versions())
    failures, skipped = _dry_run(cluster, objects)
    assert failures == []
    # the CRD kinds are skipped (reported); everything else (the metrics reader's account, token
    # Secret and ClusterRole, the dashboard ConfigMap) went through the API server
    assert sorted(s.split(" (")[0] for s in skipped) == [
        "Certificate rw-runway-ca",
        "Certificate rw-runway-client-tls",
        "Certificate rw-runway-tls",
        "Issuer rw-runway-ca",
        "Issuer rw-runway-selfsigned",
        "PrometheusRule rw-runway",
        "ServiceMonitor rw-runway",
    ]


def _secret_files(objects: list[dict[str, Any]], name: str, directory: Path) -> Path:
    """Write a rendered Secret's keys as files, as its volume would in a pod."""
    directory.mkdir(parents=True, exist_ok=True)
    secret = next(o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == name)
    for key, value in secret["data"].items():
        (directory / key).write_bytes(base64.b64decode(value))
    return directory


def _counter(text: str, name: str, **labels: str) -> float:
    """The value of one series in a Prometheus text exposition (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_kube_scheduler_calls_runway_over_the_charts_mutual_tls(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The default chart's TLS, for real: runway runs on the rendered config and generated
    Secrets, kube-scheduler on the rendered KubeSchedulerConfiguration (https urlPrefix,
    tlsConfig caFile/certFile/keyFile/serverName), and schedules a pod through runway."""
    plane = cluster.plane
    values = {
        "scheduler": {
            "enabled": True,
            # the tag of the release running here: the chart picks the config API it reads
            "image": {"tag": f"v{plane.release}"},
            "leaderElect": False,
        }
    }
    objects = render(values, kube_version=cluster.version, api_versions=cluster.api_versions())
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    host = f"rw-runway.{NAMESPACE}.svc"

    # the pods' volumes, as files
    runway_tls = _secret_files(objects, "rw-runway-tls", tmp_path / "runway-tls")
    client_tls = _secret_files(objects, "rw-runway-client-tls", tmp_path / "client-tls")
    config_text = by_name["ConfigMap", "rw-runway"]["data"]["config.yaml"]
    config_file = tmp_path / "config.yaml"
    # the chart's health port (8081) becomes a free one: other runways may run on this machine
    assert "healthPort: 8081" in config_text
    health = free_port()
    config_text = config_text.replace("healthPort: 8081", f"healthPort: {health}")
    config_file.write_text(config_text.replace("/etc/runway/tls/", f"{runway_tls}/"))
    container = next(
        c
        for c in by_name["Deployment", "rw-runway"]["spec"]["template"]["spec"]["containers"]
        if c["name"] == "runway"
    )
    args = container["args"][4:]  # after `python -m app serve`
    paths = {"/etc/runway/config.yaml": str(config_file), "/etc/runway/tls/": f"{runway_tls}/"}
    served: list[str] = ["--kubeconfig", str(plane.kubeconfig)]
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--host", "--port"):  # loopback and a free port here
            skip = True
            continue
        for old, new in paths.items():
            arg = arg.replace(old, new)
        served.append(arg)

    trusted = ssl.create_default_context(cafile=str(runway_tls / "ca.crt"))
    with_cert = ssl.create_default_context(cafile=str(runway_tls / "ca.crt"))
    with_cert.load_cert_chain(str(client_tls / "tls.crt"), str(client_tls / "tls.key"))
    # for the health poll on 127.0.0.1: the chain is verified, the name (the Service's) is not
    poll_ctx = ssl.create_default_context(cafile=str(runway_tls / "ca.crt"))
    poll_ctx.check_hostname = False
    poll_ctx.load_cert_chain(str(client_tls / "tls.crt"), str(client_tls / "tls.key"))

    node, pod = "chart-mtls-node", "chart-mtls-pod"
    with run_runway(
        tmp_path,
        served,
        env={"POD_NAMESPACE": NAMESPACE},
        scheme="https",
        client_options={"verify": poll_ctx},
    ) as runway:
        # the kubelet's probes: plain HTTP, no certificate, /readyz from the caches
        assert httpx.get(f"http://127.0.0.1:{health}/readyz", timeout=5).text == "ok"
        sni = {"sni_hostname": host}
        with httpx.Client(base_url=runway.url, verify=with_cert, timeout=10) as client:
            # 1. /healthz with the client certificate, the server certificate checked by name
            assert client.get("/healthz", extensions=sni).text == "ok"
            poll(
                lambda: client.get("/readyz", extensions=sni).status_code == 200,
                within=30,
                what="runway ready",
            )
            # 2. no client certificate: no connection
            with (
                httpx.Client(base_url=runway.url, verify=trusted, timeout=10) as anonymous,
                pytest.raises(httpx.TransportError),
            ):
                anonymous.get("/healthz", extensions=sni)

            # 3. kube-scheduler with the chart's config, pointed at this runway
            sched_text = by_name["ConfigMap", "rw-runway-scheduler"]["data"]["config.yaml"]
            sched_text = sched_text.replace(f"https://{host}:8888", runway.url)
            sched_text = sched_text.replace("/etc/runway-tls/", f"{runway_tls}/")
            sched_text = sched_text.replace("/etc/runway-client-tls/", f"{client_tls}/")
            assert yaml.safe_load(sched_text)["apiVersion"] == plane.config_api
            extender = yaml.safe_load(sched_text)["extenders"][0]
            assert extender["tlsConfig"]["serverName"] == host
            sched_file = tmp_path / "scheduler.yaml"
            sched_file.write_text(sched_text)
            plane.create_node(node)
            try:
                plane.start_scheduler(sched_file)
                effective = yaml.safe_load((plane.dir / "scheduler-config.yaml").read_text())
                assert effective["extenders"][0]["tlsConfig"] == extender["tlsConfig"]
                plane.create_pod(pod, NAMESPACE, scheduler_name="runway-scheduler")

                def bound() -> bool:
                    got = plane.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")
                    return bool(got.raise_for_status().json()["spec"].get("nodeName"))

                poll(bound, within=60, what=f"{pod} bound by kube-scheduler through runway")
                # 4. the proof kube-scheduler called runway: its per-verb request counter
                text = client.get("/metrics", extensions=sni).raise_for_status().text
                assert (
                    _counter(text, "runway_extender_requests_total", verb="filter", outcome="ok")
                    >= 1
                )
                assert not re.search(r'runway_extender_requests_total\{[^}]*outcome="error"', text)
                # 5. the Lease is the release's
                lease = poll(
                    lambda: plane.lease("rw-runway", NAMESPACE),
                    within=30,
                    what="runway's Lease rw-runway",
                )
                assert lease["spec"]["holderIdentity"]
            finally:
                plane.stop_scheduler()
                plane.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")
                plane.delete_node(node)


def test_install_then_upgrade_keeps_the_generated_certificates(cluster: Cluster) -> None:
    """A real ``helm install`` and ``helm upgrade`` (Helm's own code, through helm-python-sdk):
    the upgrade's ``lookup`` finds the Secrets and keeps the CA and both certificates, so the
    client certificate copied to a kube-scheduler stays valid. Nothing runs (no kubelet)."""
    release = "upgrade-check"
    secrets = [f"{release}-runway-{s}" for s in ("ca", "tls", "client-tls")]

    def read() -> dict[str, dict[str, str]]:
        out = {}
        for name in secrets:
            got = cluster.client.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}")
            out[name] = got.raise_for_status().json()["data"]
        return out

    with helm.Config(kubeconfig_path=cluster.plane.kubeconfig, namespace=NAMESPACE) as config:
        try:
            installed = config.install(CHART, release, {"scheduler": {"enabled": True}})
            assert (installed["revision"], installed["status"]) == (1, "deployed")
            before = read()
            assert before[secrets[1]]["ca.crt"] == before[secrets[0]]["tls.crt"]
            upgraded = config.upgrade(
                CHART, release, {"scheduler": {"enabled": True}, "logLevel": "debug"}
            )
            assert (upgraded["revision"], upgraded["status"]) == (2, "deployed")
            assert read() == before
        finally:
            config.uninstall(release, ignore_not_found=True)
