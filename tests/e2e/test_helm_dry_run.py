"""The chart against a real kube-apiserver: every rendered object passes a server-side dry run.

The control plane is Kubernetes 1.20 (``shared/tools/control-plane.sh``). The chart is rendered
the way ``helm install`` renders it there: with the cluster's version and its discovered API
versions, so version-dependent choices (the PodDisruptionBudget's ``policy/v1beta1``) are the ones
a real install makes. Kinds the cluster does not serve (ServiceMonitor: a Prometheus Operator CRD)
are skipped explicitly and reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.conftest import ControlPlane, control_plane_up
from tests.helm_chart import NAMESPACE, all_options, render

pytestmark = pytest.mark.e2e

# CRD-backed kinds the bare control plane has no definition for; anything else missing fails.
OPTIONAL_CRD_GROUPS = {"monitoring.coreos.com"}


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
def cluster() -> Iterator[Cluster]:
    """A control plane of the module's own (always torn down) with the chart's namespace."""
    with control_plane_up() as plane:
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
    assert pdb["apiVersion"] == "policy/v1beta1", "Kubernetes 1.20 serves no policy/v1"
    failures, skipped = _dry_run(cluster, objects)
    assert failures == []
    # ServiceMonitor is the one kind a bare cluster lacks: skipped, not silently dropped
    assert skipped == [
        "ServiceMonitor runway-ext (monitoring.coreos.com/v1): "
        "CRD not installed on the test cluster"
    ]
    assert len(objects) - len(skipped) >= 15


def test_default_render_passes_server_side_dry_run(cluster: Cluster) -> None:
    objects = render(kube_version=cluster.version, api_versions=cluster.api_versions())
    failures, skipped = _dry_run(cluster, objects)
    assert failures == [] and skipped == []


def test_real_kube_scheduler_starts_with_the_charts_configuration(cluster: Cluster) -> None:
    # 1.20 knows KubeSchedulerConfiguration v1beta1 only; the chart renders it when asked. TLS is
    # off here: the CA file the chart mounts does not exist outside a pod.
    values = all_options()
    values["tls"] = {"enabled": False}
    values["scheduler"]["configApiVersion"] = "kubescheduler.config.k8s.io/v1beta1"
    objects = render(values, kube_version=cluster.version, api_versions=cluster.api_versions())
    configmap = next(
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("scheduler")
    )
    config_file = cluster.plane.dir / "chart-scheduler.yaml"
    config_file.write_text(configmap["data"]["config.yaml"])
    cluster.plane.start_scheduler(config_file)  # asserts kube-scheduler accepted the config
    effective = yaml.safe_load((cluster.plane.dir / "scheduler-config.yaml").read_text())
    assert effective["extenders"][0]["urlPrefix"] == (
        f"http://runway-ext.{NAMESPACE}.svc:443/runway/scheduler"
    )
