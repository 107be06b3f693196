"""helm/runway rendered by Helm itself: lint, schema, and the objects an operator relies on."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import ssl
import tempfile
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from app import metrics
from app.__main__ import build_parser
from app.config import ConfigError, RunwayConfig, parse_config
from app.tls import build_context
from tests.helm_chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    all_options,
    find,
    notes_stanza,
    one,
    parse_manifests,
    render,
    render_files,
)

VALUE_SETS = {"defaults": None, "all-options": all_options()}


@pytest.fixture(params=sorted(VALUE_SETS), scope="module")
def values(request: pytest.FixtureRequest) -> dict[str, Any] | None:
    """Each value set: the chart defaults and the all-options file."""
    chosen: dict[str, Any] | None = VALUE_SETS[request.param]
    return chosen


@pytest.fixture(scope="module")
def objects(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The chart rendered for ``values``."""
    return render(values)


def merged(values: dict[str, Any] | None) -> dict[str, Any]:
    """What an install would use: chart defaults coalesced with ``values``."""
    with helm.Chart.load(CHART) as chart:
        return chart.merge_values(values)


def runway_deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The extender's Deployment (not the bundled scheduler's)."""
    return next(
        d
        for d in find(objects, "Deployment")
        if d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "extender"
    )


def runway_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The runway container of the extender's Deployment."""
    containers = runway_deployment(objects)["spec"]["template"]["spec"]["containers"]
    container: dict[str, Any] = next(c for c in containers if c["name"] == "runway")
    return container


def chart_config(objects: list[dict[str, Any]]) -> RunwayConfig:
    """The runway config file of the ConfigMap the Deployment mounts, parsed by runway."""
    deployment = runway_deployment(objects)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mount = next(
        m for m in runway_container(objects)["volumeMounts"] if m["mountPath"].endswith(".yaml")
    )
    configmap = one(objects, "ConfigMap", volumes[mount["name"]]["configMap"]["name"])
    text = configmap["data"][mount["subPath"]]
    return parse_config(yaml.safe_load(text), "helm ConfigMap config.yaml")


def effective_config(values: dict[str, Any] | None, fullname: str) -> dict[str, Any]:
    """The config file the chart should write: ``config`` plus server.tls from ``tls.*``,
    logging from ``logLevel``/``logFormat``, the Lease named after the release, the bundled
    scheduler's name among ``preemption.schedulerNames`` and, with the REST port of its own,
    ``auth.protectReadOnly`` unless set."""
    settings = merged(values)
    config: dict[str, Any] = copy.deepcopy(settings["config"])
    tls = settings["tls"]
    if tls["enabled"]:
        server_tls = config.setdefault("server", {}).setdefault("tls", {})
        server_tls.update(certFile="/etc/runway/tls/tls.crt", keyFile="/etc/runway/tls/tls.key")
        if tls["requireClientCert"]:
            server_tls.update(clientCAFile="/etc/runway/tls/ca.crt", requireClientCert=True)
    for key, value in (("level", settings["logLevel"]), ("format", settings["logFormat"])):
        if value:
            config.setdefault("logging", {})[key] = value
    election = config.setdefault("kubernetes", {}).setdefault("leaderElection", {})
    election.setdefault("leaseName", fullname)
    if tls["enabled"]:  # a follower verifies the leader it forwards preempt to
        election.setdefault("forwardCAFile", "/etc/runway/tls/ca.crt")
    if settings["healthPort"]:
        config.setdefault("server", {}).setdefault("healthPort", settings["healthPort"])
    config.setdefault("preemption", {}).setdefault(
        "protectedPodLabels",
        {"app.kubernetes.io/name": "runway", "app.kubernetes.io/instance": RELEASE},
    )
    if settings["scheduler"]["enabled"]:
        preemption = config.setdefault("preemption", {})
        names = preemption.setdefault("schedulerNames", [settings["scheduler"]["schedulerName"]])
        if settings["scheduler"]["schedulerName"] not in names:
            names.append(settings["scheduler"]["schedulerName"])
    config.setdefault("scope", {}).setdefault(
        "namespaceSelector",
        {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", NAMESPACE],
                }
            ]
        },
    )
    if settings["rest"]["enabled"]:
        config.setdefault("auth", {}).setdefault("protectReadOnly", True)
    return config


# ---------------------------------------------------------------------------------- lint, schema


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint_has_no_warnings_or_errors(name: str) -> None:
    report = helm.lint(CHART, VALUE_SETS[name], strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == [], report


def test_all_options_file_passes_the_schema() -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(all_options())


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"replicaCount": 0}, "/replicaCount"),
        ({"replicas": 2}, "replicas"),
        ({"tls": {"enabled": "yes"}}, "/tls/enabled"),
        ({"certManager": {"enabled": True, "issuerRef": {"kind": "ClusterIssuer"}}}, "name"),
        ({"networkPolicy": {"schedulerPeers": {"podSelector": {}}}}, "schedulerPeers"),
        ({"logLevel": "verbose"}, "/logLevel"),
        ({"scheduler": {"image": {"tag": ""}}}, "/scheduler/image/tag"),
        ({"serviceMonitor": {"bearerTokenSecret": {"name": "t"}}}, "key"),
        ({"prometheusRule": {"verbLatencyP99Seconds": 0}}, "verbLatencyP99Seconds"),
        ({"scheduler": {"extender": {"httpTimeout": "5 seconds"}}}, "httpTimeout"),
        ({"scheduler": {"extender": {"weight": 0}}}, "weight"),
        ({"scheduler": {"profile": {"schedulerName": "other"}}}, "/scheduler/profile"),
        ({"service": {"port": 70000}}, "/service/port"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        # issue #26: the gaps found installing for real
        ({"resources": {"requests": {"cpu": "lots"}}}, "/resources/requests/cpu"),
        ({"scheduler": {"resources": {"limits": {"memory": "1 GB"}}}}, "memory"),
        ({"podDisruptionBudget": {"maxUnavailable": 0}}, "/podDisruptionBudget/maxUnavailable"),
        ({"podDisruptionBudget": {"minAvailable": "100%"}}, "minAvailable"),
        ({"scheduler": {"podDisruptionBudget": {"maxUnavailable": "0%"}}}, "maxUnavailable"),
        ({"certManager": {"enabled": True}, "tls": {"secretName": "mine"}}, "/certManager/enabled"),
        ({"healthPort": 0}, "/healthPort"),
        ({"service": {"clusterIP": "runway.example"}}, "/service/clusterIP"),
        ({"scheduler": {"extender": {"ignorable": "no"}}}, "ignorable"),
    ],
)
def test_schema_rejects_a_bad_value_and_names_it(bad: dict[str, Any], field: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as excinfo:
        chart.validate_schema(bad)
    assert field in str(excinfo.value)
    # an install would refuse it too: rendering validates against the schema first
    with pytest.raises(helm.HelmValuesError):
        render_files(bad)


def test_a_pdb_as_large_as_the_replicas_is_refused_with_the_values_named() -> None:
    with pytest.raises(helm.HelmError, match="minAvailable 2 with replicaCount 2"):
        render_files({"podDisruptionBudget": {"minAvailable": 2}})
    render_files({"podDisruptionBudget": {"minAvailable": 1}})  # one may go


def test_good_quantities_pass_the_schema() -> None:
    resources = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": 2}}
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema({"resources": resources, "scheduler": {"resources": resources}})


# ------------------------------------------------------------------------------ every value set


def test_rendered_objects_are_namespaced_into_the_release_namespace(
    objects: list[dict[str, Any]],
) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}
    for obj in objects:
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"], obj["metadata"]
        elif obj["metadata"]["name"].endswith("-auth-reader"):
            assert obj["metadata"]["namespace"] == "kube-system"
        else:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]


def test_retired_owner_kinds_fail_the_install_with_a_hint() -> None:
    with pytest.raises(Exception, match=r"rbac\.ownerKinds is retired"):
        render({"rbac": {"ownerKinds": [{"apiGroup": "batch", "resource": "jobs"}]}})


def test_the_chart_installs_the_workload_record_crd() -> None:
    crds = list((CHART / "crds").glob("*.yaml"))
    assert [p.name for p in crds] == ["workloadrecords.runway.dev.yaml"]
    crd = yaml.safe_load(crds[0].read_text())
    version = crd["spec"]["versions"][0]
    assert crd["spec"]["scope"] == "Namespaced" and version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[:3] == ["Workload", "Queue", "Active"]


def test_no_wildcard_in_any_rbac_rule(objects: list[dict[str, Any]]) -> None:
    rules = [r for o in objects if o["kind"] in {"ClusterRole", "Role"} for r in o["rules"]]
    assert rules
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert not any("*" in item for item in rule.get(key, [])), rule
    for binding in find(objects, "ClusterRoleBinding") + find(objects, "RoleBinding"):
        assert "*" not in binding["roleRef"]["name"]


def test_cluster_role_grants_exactly_what_runway_uses(
    values: dict[str, Any] | None, objects: list[dict[str, Any]]
) -> None:
    role = one(objects, "ClusterRole", runway_deployment(objects)["metadata"]["name"])
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    expected = {("", "pods", v) for v in ("get", "list", "watch", "delete", "patch")}
    expected |= {("", "pods/status", "patch")}
    expected |= {("", "nodes", v) for v in ("get", "list", "watch")}
    # a Job's parallelism (PodsReady's target): read only, never a patch
    expected |= {("batch", "jobs", v) for v in ("get", "list", "watch")}
    # which DaemonSets exist (a pod's kind: DaemonSet counts only for one runway read)
    expected |= {("apps", "daemonsets", v) for v in ("get", "list", "watch")}
    # a queue's namespaceSelector reads the namespaces' labels: read-only
    expected |= {("", "namespaces", v) for v in ("get", "list", "watch")}
    expected |= {("", "events", "create"), ("", "events", "patch")}
    expected |= {("events.k8s.io", "events", "create")}
    expected |= {("authentication.k8s.io", "tokenreviews", "create")}
    expected |= {("authorization.k8s.io", "subjectaccessreviews", "create")}
    # runway's own state: the records (list+watch feed the store; create, status update; delete
    # for retention), and no write on any owner kind
    expected |= {
        ("runway.dev", "workloadrecords", v)
        for v in ("get", "list", "watch", "create", "patch", "delete")
    }
    expected |= {("runway.dev", "workloadrecords/status", v) for v in ("get", "update")}
    assert granted == expected


def test_leader_election_role_covers_the_configured_lease_only(
    objects: list[dict[str, Any]],
) -> None:
    deployment = runway_deployment(objects)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    one(objects, "ServiceAccount", account)
    name = deployment["metadata"]["name"]
    election = chart_config(objects).kubernetes.leader_election
    role = one(objects, "Role", f"{name}-leader-election")
    assert role["metadata"]["namespace"] == (election.lease_namespace or NAMESPACE)
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [election.lease_name],
            "verbs": ["get", "update"],
        },
    ]
    for binding in (
        one(objects, "RoleBinding", f"{name}-leader-election"),
        one(objects, "ClusterRoleBinding", name),
    ):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
        ]


def test_lease_in_another_namespace_moves_the_role() -> None:
    election = {"leaseName": "sched-leader", "leaseNamespace": "kube-system"}
    objects = render({"config": {"kubernetes": {"leaderElection": election}}})
    role = one(objects, "Role", "rw-runway-leader-election")
    binding = one(objects, "RoleBinding", "rw-runway-leader-election")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "kube-system"
    assert role["rules"][1]["resourceNames"] == ["sched-leader"]
    assert binding["subjects"][0]["namespace"] == NAMESPACE


def test_deployment_runs_runway_serve_with_the_mounted_config(
    values: dict[str, Any] | None, objects: list[dict[str, Any]]
) -> None:
    settings = merged(values)
    deployment = runway_deployment(objects)
    assert deployment["spec"]["replicas"] == settings["replicaCount"]
    container = runway_container(objects)
    args = container["args"]
    assert args[:9] == [
        "python",
        "-m",
        "app",
        "serve",
        "--config",
        "/etc/runway/config.yaml",
        "--host",
        "0.0.0.0",
        "--port",
    ]
    assert args[9] == str(settings["containerPort"])
    # the flags the chart passes are flags runway's CLI really has
    parsed = build_parser().parse_args(args[3:])
    assert parsed.port == settings["containerPort"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/runway/config.yaml"]["subPath"] == "config.yaml"
    assert "/tmp" in mounts  # writable scratch space under a read-only root
    assert container["ports"][0] == {
        "name": "http",
        "containerPort": settings["containerPort"],
        "protocol": "TCP",
    }
    # the kubelet's probes: plain HTTP, /healthz and /readyz only
    assert container["ports"][1] == {
        "name": "health",
        "containerPort": settings["healthPort"],
        "protocol": "TCP",
    }
    if settings["rest"]["enabled"]:  # the REST API on a port of its own
        assert container["ports"][2:] == [
            {"name": "rest", "containerPort": settings["rest"]["containerPort"], "protocol": "TCP"}
        ]
        assert parsed.rest_port == settings["rest"]["containerPort"]
    assert container["resources"] == settings["resources"]


def test_probes_hit_healthz_and_readyz_on_the_serving_port(
    values: dict[str, Any] | None, objects: list[dict[str, Any]]
) -> None:
    container = runway_container(objects)
    tls = merged(values)["tls"]
    if merged(values)["healthPort"]:
        # the plain-HTTP health port answers /readyz from the caches, whatever the TLS
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            http = container[probe]["httpGet"]
            assert (http["path"], http["port"], http["scheme"]) == (path, "health", "HTTP")
        return
    if tls["enabled"] and tls["requireClientCert"]:
        # mutual TLS: kubelet presents no client certificate, so the probes check the port
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            assert container[probe]["tcpSocket"] == {"port": "http"}, probe
        return
    scheme = "HTTPS" if tls["enabled"] else "HTTP"
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        http = container[probe]["httpGet"]
        assert (http["path"], http["port"], http.get("scheme", "HTTP")) == (path, "http", scheme)


def test_every_container_is_locked_down(objects: list[dict[str, Any]]) -> None:
    deployments = find(objects, "Deployment")
    assert deployments
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["runAsNonRoot"] is True
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
            assert "resources" in container and container["resources"]["requests"]
            assert container["livenessProbe"] and container["readinessProbe"]


def test_config_configmap_parses_with_runways_own_model(
    values: dict[str, Any] | None, objects: list[dict[str, Any]]
) -> None:
    config = chart_config(objects)
    fullname = runway_deployment(objects)["metadata"]["name"]
    expected = parse_config(effective_config(values, fullname))
    assert config == expected


def test_service_selects_the_extender_pods_on_the_http_port(
    values: dict[str, Any] | None, objects: list[dict[str, Any]]
) -> None:
    deployment = runway_deployment(objects)
    service = one(objects, "Service", deployment["metadata"]["name"])
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    port, *webhook = service["spec"]["ports"]
    assert port["targetPort"] == "http"
    # the gate webhook's port, where rendered: the REST port under the certificate's name
    assert [p["targetPort"] for p in webhook] in ([], ["rest"])
    assert port["port"] == merged(values)["service"]["port"]


def test_pdb_selects_the_extender_pods(objects: list[dict[str, Any]]) -> None:
    deployment = runway_deployment(objects)
    pdb = one(objects, "PodDisruptionBudget", deployment["metadata"]["name"])
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert ("minAvailable" in pdb["spec"]) != ("maxUnavailable" in pdb["spec"])


def test_notes_name_the_extender_url(values: dict[str, Any] | None) -> None:
    files = render_files(values)
    notes = next(text for path, text in files.items() if path.endswith("NOTES.txt"))
    config = chart_config(parse_manifests(files))
    assert f".{NAMESPACE}.svc:" in notes and config.server.url_prefix in notes


# --------------------------------------------------------------------------- specific behaviours


def test_defaults_install_the_extender_only() -> None:
    kinds = sorted(o["kind"] for o in render())
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRole",  # people: viewer
            "ClusterRole",  # people: admin
            "ClusterRole",  # read access to WorkloadRecords, aggregated into view/edit/admin
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "MutatingWebhookConfiguration",  # holds as scheduling gates (the cluster: 1.30+)
            "NetworkPolicy",
            "NetworkPolicy",  # the REST port
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Secret",  # the generated CA
            "Secret",  # runway's serving certificate
            "Secret",  # the client certificate (kube-scheduler, Prometheus)
            "Service",
            "Service",  # the REST port
            "ServiceAccount",
        ]
    )
    assert runway_deployment(render())["spec"]["replicas"] == 2


def test_default_config_is_the_embedded_default_plus_mtls_and_the_lease() -> None:
    config = chart_config(render())
    expected = RunwayConfig().model_dump()
    expected["server"]["tls"].update(
        cert_file="/etc/runway/tls/tls.crt",
        key_file="/etc/runway/tls/tls.key",
        client_ca_file="/etc/runway/tls/ca.crt",
        require_client_cert=True,
    )
    expected["kubernetes"]["leader_election"]["lease_name"] = "rw-runway"
    expected["kubernetes"]["leader_election"]["forward_ca_file"] = "/etc/runway/tls/ca.crt"
    expected["server"]["health_port"] = 8081  # the kubelet's probes
    expected["preemption"]["protected_pod_labels"] = {  # never preempt its own release
        "app.kubernetes.io/name": "runway",
        "app.kubernetes.io/instance": "rw",
    }
    expected["auth"]["protect_read_only"] = True  # the REST port asks for no client certificate
    expected["scope"]["namespace_selector"] = config.model_dump()["scope"]["namespace_selector"]
    assert str(config.scope.namespace_selector) == (
        "kubernetes.io/metadata.name notin (kube-system,runway-system)"
    )
    assert config.model_dump() == expected


def test_config_change_rolls_the_pods() -> None:
    def checksum(config: dict[str, Any]) -> str:
        deployment = runway_deployment(render({"config": config}))
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    files = render_files({"config": {"logging": {"level": "debug"}}})
    configmap_text = next(text for path, text in files.items() if path.endswith("/configmap.yaml"))
    debug = checksum({"logging": {"level": "debug"}})
    assert debug == hashlib.sha256(configmap_text.encode()).hexdigest()
    assert debug == checksum({"logging": {"level": "debug"}})
    assert debug != checksum({"logging": {"level": "info"}})


@pytest.mark.parametrize(
    ("kube_version", "api_versions", "expected"),
    [
        # a live install: discovery decides
        ("v1.20.2", ["policy/v1beta1", "policy/v1beta1/PodDisruptionBudget"], "policy/v1beta1"),
        (
            "v1.24.0",
            ["policy/v1/PodDisruptionBudget", "policy/v1beta1/PodDisruptionBudget"],
            "policy/v1",
        ),
        ("v1.30.0", ["policy/v1/PodDisruptionBudget"], "policy/v1"),
        # helm template --kube-version: the version decides
        ("v1.20.2", None, "policy/v1beta1"),
        ("v1.21.0", None, "policy/v1"),
        (None, None, "policy/v1"),
    ],
)
def test_pdb_api_version_follows_the_cluster(
    kube_version: str | None, api_versions: list[str] | None, expected: str
) -> None:
    objects = render(kube_version=kube_version, api_versions=api_versions)
    assert one(objects, "PodDisruptionBudget")["apiVersion"] == expected


def test_all_options_extender_url_matches_the_service() -> None:
    values = all_options()
    objects = render(values)
    service = one(objects, "Service", runway_deployment(objects)["metadata"]["name"])
    scheduler_cm = one(objects, "ConfigMap", "runway-ext-scheduler")
    config = yaml.safe_load(scheduler_cm["data"]["config.yaml"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    port = service["spec"]["ports"][0]["port"]
    prefix = chart_config(objects).server.url_prefix
    assert extender["urlPrefix"] == (
        f"https://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:{port}{prefix}"
    )
    assert extender["urlPrefix"] == "https://runway-ext.runway-system.svc:443/runway/scheduler"
    wanted = values["scheduler"]["extender"]
    assert extender["filterVerb"] == "filter"
    assert extender["preemptVerb"] == "preempt"
    assert extender["nodeCacheCapable"] is True
    assert extender["weight"] == wanted["weight"]
    assert extender["httpTimeout"] == wanted["httpTimeout"]
    assert extender["ignorable"] is wanted["ignorable"]
    assert extender["managedResources"] == wanted["managedResources"]
    assert extender["enableHTTPS"] is True
    assert extender["tlsConfig"] == {
        "caFile": "/etc/runway-tls/ca.crt",
        "serverName": values["tls"]["serverName"],
        "certFile": "/etc/runway-client-tls/tls.crt",
        "keyFile": "/etc/runway-client-tls/tls.key",
    }
    name = values["scheduler"]["schedulerName"]
    assert config["profiles"][0]["schedulerName"] == name
    assert config["profiles"][0]["plugins"] == values["scheduler"]["profile"]["plugins"]
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceName": name,
        "resourceNamespace": NAMESPACE,
    }


def test_plain_http_extender_url_when_tls_is_opted_out() -> None:
    objects = render({"scheduler": {"enabled": True}, "tls": {"enabled": False}})
    config = yaml.safe_load(one(objects, "ConfigMap", "rw-runway-scheduler")["data"]["config.yaml"])
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == f"http://rw-runway.{NAMESPACE}.svc:8888/scheduler"
    assert extender["enableHTTPS"] is False and "tlsConfig" not in extender
    assert (extender["weight"], extender["httpTimeout"], extender["ignorable"]) == (1, "5s", False)


def test_all_options_scheduler_deployment_mounts_its_config_and_the_ca() -> None:
    values = all_options()
    objects = render(values)
    deployment = one(objects, "Deployment", "runway-ext-scheduler")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.30.2"
    assert container["command"][:2] == [
        "kube-scheduler",
        "--config=/etc/kubernetes/scheduler/config.yaml",
    ]
    assert container["command"][2:] == values["scheduler"]["extraArgs"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert volumes[mounts["/etc/kubernetes/scheduler"]]["configMap"]["name"] == (
        "runway-ext-scheduler"
    )
    ca = volumes[mounts["/etc/runway-tls"]]["secret"]
    assert ca == {"secretName": "runway-ext-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    client = volumes[mounts["/etc/runway-client-tls"]]["secret"]
    assert client["secretName"] == values["tls"]["clientCertSecretName"]
    assert sorted(item["key"] for item in client["items"]) == ["tls.crt", "tls.key"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert len(annotations["checksum/config"]) == 64


def test_all_options_scheduler_rbac() -> None:
    objects = render(all_options())
    account = one(objects, "Deployment", "runway-ext-scheduler")["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    one(objects, "ServiceAccount", account)
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    bound = {
        b["roleRef"]["name"]
        for b in find(objects, "ClusterRoleBinding")
        if b["subjects"] == subject
    }
    assert bound == {"system:kube-scheduler", "system:volume-scheduler"}
    role = one(objects, "Role", "runway-ext-scheduler-leader-election")
    assert {"leases"} == {r for rule in role["rules"] for r in rule["resources"]}
    named = next(rule for rule in role["rules"] if "resourceNames" in rule)
    assert named["resourceNames"] == ["runway-scheduler"]
    assert sorted(named["verbs"]) == ["get", "update"]
    reader = one(objects, "RoleBinding", f"runway-ext-scheduler-{NAMESPACE}-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert reader["subjects"] == subject


def test_all_options_tls_runway_serves_https() -> None:
    objects = render(all_options())
    container = runway_container(objects)
    parsed = build_parser().parse_args(container["args"][3:])
    assert parsed.tls_cert_file == "/etc/runway/tls/tls.crt"
    assert parsed.tls_key_file == "/etc/runway/tls/tls.key"
    volumes = {
        v["name"]: v for v in runway_deployment(objects)["spec"]["template"]["spec"]["volumes"]
    }
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert volumes[mounts["/etc/runway/tls"]]["secret"]["secretName"] == "runway-ext-tls"


def test_all_options_service_monitor_scrapes_metrics() -> None:
    objects = render(all_options())
    monitor = one(objects, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"], endpoint["scheme"]) == ("http", "/metrics", "https")
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "runway-ext-tls", "key": "ca.crt"}}
    service = one(objects, "Service", "runway-ext")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )


@pytest.mark.parametrize("kube_version", [None, "v1.29.4", "v1.36.0"])
def test_scheduler_image_tag_comes_from_values_not_the_cluster(kube_version: str | None) -> None:
    # offline renderers (GitOps tools) fill .Capabilities with their own version: never used
    tag = merged(None)["scheduler"]["image"]["tag"]
    for values, expected in (
        ({"scheduler": {"enabled": True}}, tag),
        ({"scheduler": {"enabled": True, "image": {"tag": "v1.28.9"}}}, "v1.28.9"),
    ):
        objects = render(values, kube_version=kube_version)
        deployment = one(objects, "Deployment", "rw-runway-scheduler")
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"registry.k8s.io/kube-scheduler:{expected}"


def test_existing_service_account_is_required_by_name() -> None:
    with pytest.raises(helm.HelmError, match=r"serviceAccount\.name is required"):
        render({"serviceAccount": {"create": False}})
    objects = render({"serviceAccount": {"create": False, "name": "prebuilt"}})
    assert not find(objects, "ServiceAccount")
    assert (
        runway_deployment(objects)["spec"]["template"]["spec"]["serviceAccountName"] == "prebuilt"
    )


def test_config_example_in_values_yaml_is_valid() -> None:
    # the commented example operators copy from must keep up with the config model
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    block = text[text.index("#   config:") : text.index("\nconfig: {}")]
    example = yaml.safe_load("\n".join(line[3:] for line in block.splitlines()))
    parse_config(example["config"], "values.yaml example")


def test_tls_without_client_certificate_only_verifies_the_server() -> None:
    tls = {"enabled": True, "secretName": "s", "requireClientCert": False}
    objects = render({"tls": tls, "scheduler": {"enabled": True}})
    config = yaml.safe_load(one(objects, "ConfigMap", "rw-runway-scheduler")["data"]["config.yaml"])
    assert config["extenders"][0]["tlsConfig"] == {
        "caFile": "/etc/runway-tls/ca.crt",
        "serverName": f"rw-runway.{NAMESPACE}.svc",
    }
    pod = one(objects, "Deployment", "rw-runway-scheduler")["spec"]["template"]["spec"]
    assert {v["name"] for v in pod["volumes"]} == {"config", "tmp", "runway-ca"}


def test_mutual_tls_probes_check_the_port_only() -> None:
    """kubelet's probes present no client certificate: with requireClientCert they use TCP."""
    values = {
        "healthPort": None,
        "tls": {"enabled": True, "secretName": "runway-tls"},
        "config": {
            "server": {
                "tls": {
                    "certFile": "/etc/runway/tls/tls.crt",
                    "keyFile": "/etc/runway/tls/tls.key",
                    "clientCAFile": "/etc/runway/tls/ca.crt",
                    "requireClientCert": True,
                }
            }
        },
    }
    container = runway_container(render(values))
    for probe in ("livenessProbe", "readinessProbe"):
        assert "httpGet" not in container[probe]
        assert container[probe]["tcpSocket"] == {"port": "http"}


# ------------------------------------------------ issue 15: mutual TLS, NetworkPolicy, monitoring


def secret_pem(objects: list[dict[str, Any]], name: str, key: str) -> bytes:
    """A PEM file out of a rendered Secret."""
    return base64.b64decode(one(objects, "Secret", name)["data"][key])


def scheduler_config(objects: list[dict[str, Any]], name: str = "rw-runway-scheduler") -> Any:
    """The bundled scheduler's KubeSchedulerConfiguration."""
    return yaml.safe_load(one(objects, "ConfigMap", name)["data"]["config.yaml"])


def mounted_secret(deployment: dict[str, Any], container: str, path: str) -> dict[str, Any]:
    """The secret volume a container of ``deployment`` mounts at ``path``."""
    pod = deployment["spec"]["template"]["spec"]
    mounts = {
        m["mountPath"]: m["name"]
        for c in pod["containers"]
        if c["name"] == container
        for m in c["volumeMounts"]
    }
    volume: dict[str, Any] = next(v for v in pod["volumes"] if v["name"] == mounts[path])["secret"]
    return volume


def handshake(objects: list[dict[str, Any]], server_name: str, *, client_cert: bool) -> str:
    """A TLS handshake in memory between runway's server context (built by app.tls from the
    chart's config and Secrets) and a client with the chart's CA (and client certificate).
    Returns the subject CN runway saw, or raises ssl.SSLError."""
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for secret, key in (
            ("rw-runway-tls", "tls.crt"),
            ("rw-runway-tls", "tls.key"),
            ("rw-runway-tls", "ca.crt"),
            ("rw-runway-client-tls", "tls.crt"),
            ("rw-runway-client-tls", "tls.key"),
        ):
            path = Path(tmp) / f"{secret}-{key}"
            path.write_bytes(secret_pem(objects, secret, key))
            files[secret, key] = str(path)
        config = chart_config(objects).server.tls
        server_ctx = build_context(
            config.model_copy(
                update={
                    "cert_file": files["rw-runway-tls", "tls.crt"],
                    "key_file": files["rw-runway-tls", "tls.key"],
                    "client_ca_file": files["rw-runway-tls", "ca.crt"],
                }
            )
        )
        client_ctx = ssl.create_default_context(cafile=files["rw-runway-tls", "ca.crt"])
        if client_cert:
            client_ctx.load_cert_chain(
                files["rw-runway-client-tls", "tls.crt"], files["rw-runway-client-tls", "tls.key"]
            )
        c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
        client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_name)
        server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
        done = {"client": False, "server": False}
        for _ in range(10):
            for side, conn in (("client", client), ("server", server)):
                if not done[side]:
                    try:
                        conn.do_handshake()
                        done[side] = True
                    except ssl.SSLWantReadError:
                        pass
            s_in.write(c_out.read())
            c_in.write(s_out.read())
            if all(done.values()):
                break
        # TLS 1.3: the server's verdict on the client certificate reaches the client with the
        # first read
        client.write(b"x")
        s_in.write(c_out.read())
        server.read(1)
        peer = server.getpeercert()
        if not peer:
            return ""
        subject = dict(item[0] for item in peer["subject"])
        return str(subject["commonName"])


def test_default_is_mutual_tls_with_generated_certificates() -> None:
    objects = render({"scheduler": {"enabled": True}})
    config = chart_config(objects).server.tls
    assert config.enabled and config.require_client_cert
    assert config.client_ca_file == "/etc/runway/tls/ca.crt"
    # runway serves the generated server certificate; the scheduler trusts the CA and presents
    # the generated client certificate
    deployment = runway_deployment(objects)
    assert mounted_secret(deployment, "runway", "/etc/runway/tls")["secretName"] == "rw-runway-tls"
    scheduler = one(objects, "Deployment", "rw-runway-scheduler")
    ca = mounted_secret(scheduler, "kube-scheduler", "/etc/runway-tls")
    assert ca["secretName"] == "rw-runway-tls"
    client = mounted_secret(scheduler, "kube-scheduler", "/etc/runway-client-tls")
    assert client["secretName"] == "rw-runway-client-tls"
    for name in ("rw-runway-ca", "rw-runway-tls", "rw-runway-client-tls"):
        assert one(objects, "Secret", name)["type"] == "kubernetes.io/tls"
    # the CA's key stays in its own Secret, mounted by nobody
    assert "ca.key" not in one(objects, "Secret", "rw-runway-tls")["data"]
    assert secret_pem(objects, "rw-runway-tls", "ca.crt") == secret_pem(
        objects, "rw-runway-ca", "tls.crt"
    )
    # a real handshake: the server certificate names the Service, the client one is accepted
    assert handshake(objects, f"rw-runway.{NAMESPACE}.svc", client_cert=True) == "rw-runway-client"
    with pytest.raises(ssl.SSLError):
        handshake(objects, f"rw-runway.{NAMESPACE}.svc", client_cert=False)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(objects, "elsewhere.example.com", client_cert=True)


def test_default_scheduler_config_calls_https_with_the_client_certificate() -> None:
    (extender,) = scheduler_config(render({"scheduler": {"enabled": True}}))["extenders"]
    assert extender["urlPrefix"] == f"https://rw-runway.{NAMESPACE}.svc:8888/scheduler"
    assert extender["enableHTTPS"] is True
    # kube-scheduler's ExtenderTLSConfig (pkg/scheduler/apis/config/types.go): caFile, certFile,
    # keyFile, serverName
    assert extender["tlsConfig"] == {
        "caFile": "/etc/runway-tls/ca.crt",
        "certFile": "/etc/runway-client-tls/tls.crt",
        "keyFile": "/etc/runway-client-tls/tls.key",
        "serverName": f"rw-runway.{NAMESPACE}.svc",
    }


def test_notes_extender_stanza_matches_the_scheduler_config() -> None:
    files = render_files(None)
    notes = next(text for path, text in files.items() if path.endswith("NOTES.txt"))
    (extender,) = notes_stanza(notes)["extenders"]
    bundled = scheduler_config(render({"scheduler": {"enabled": True}}))["extenders"][0]
    keys = ("urlPrefix", "filterVerb", "prioritizeVerb", "preemptVerb", "enableHTTPS", "weight")
    for key in (*keys, "httpTimeout", "nodeCacheCapable"):
        assert extender.get(key) == bundled.get(key), key
    # no self-deadlock by default: the cluster's own scheduler goes on without runway, the
    # bundled one (only opted-in pods) waits for it
    assert (extender["ignorable"], bundled["ignorable"]) == (True, False)
    assert extender["tlsConfig"]["serverName"] == bundled["tlsConfig"]["serverName"]
    assert {"caFile", "certFile", "keyFile"} <= extender["tlsConfig"].keys()
    assert "rw-runway-client-tls" in notes and "--cert client.crt" in notes


def test_default_network_policy_admits_the_scheduler_and_prometheus_only() -> None:
    objects = render({"scheduler": {"enabled": True}})
    policy = one(objects, "NetworkPolicy", "rw-runway")
    deployment = runway_deployment(objects)
    assert (
        policy["spec"]["podSelector"]["matchLabels"]
        == (deployment["spec"]["selector"]["matchLabels"])
    )
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    verbs, replicas, metrics = policy["spec"]["ingress"]
    for rule in (verbs, replicas, metrics):
        assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    # a follower forwards preempt to the leader: runway's own pods, nobody else
    assert replicas["from"] == [
        {"podSelector": {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}}
    ]
    scheduler_pods = one(objects, "Deployment", "rw-runway-scheduler")["spec"]["template"]
    peers = [p["podSelector"]["matchLabels"] for p in verbs["from"] if "namespaceSelector" not in p]
    assert peers and peers[0].items() <= scheduler_pods["metadata"]["labels"].items()
    assert {"component": "kube-scheduler"} in [
        p["podSelector"]["matchLabels"] for p in verbs["from"] if "namespaceSelector" in p
    ]
    assert metrics["from"] == [
        {
            "namespaceSelector": {},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]


def test_network_policy_selectors_are_configurable() -> None:
    block = {"ipBlock": {"cidr": "10.0.0.0/24"}}
    prom = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    extra = {"from": [{"podSelector": {"matchLabels": {"app": "ops"}}}], "ports": [{"port": 8888}]}
    objects = render(
        {
            "networkPolicy": {
                "schedulerPeers": [block],
                "metricsPeers": [prom],
                "extraIngress": [extra],
            }
        }
    )
    verbs, _replicas, metrics, more = one(objects, "NetworkPolicy", "rw-runway")["spec"]["ingress"]
    assert (verbs["from"], metrics["from"], more) == ([block], [prom], extra)
    assert not find(render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")


def test_cert_manager_variant_issues_the_same_secrets() -> None:
    objects = render({"certManager": {"enabled": True}, "scheduler": {"enabled": True}})
    assert not find(objects, "Secret")  # cert-manager writes them
    issuers = {i["metadata"]["name"]: i["spec"] for i in find(objects, "Issuer")}
    assert issuers == {
        "rw-runway-selfsigned": {"selfSigned": {}},
        "rw-runway-ca": {"ca": {"secretName": "rw-runway-ca"}},
    }
    certs = {c["metadata"]["name"]: c["spec"] for c in find(objects, "Certificate")}
    assert certs["rw-runway-ca"]["isCA"] is True
    assert certs["rw-runway-ca"]["issuerRef"]["name"] == "rw-runway-selfsigned"
    server, client = certs["rw-runway-tls"], certs["rw-runway-client-tls"]
    assert (
        server["secretName"] == "rw-runway-tls" and client["secretName"] == "rw-runway-client-tls"
    )
    assert f"rw-runway.{NAMESPACE}.svc" in server["dnsNames"]
    assert "server auth" in server["usages"] and "client auth" in client["usages"]
    for cert in (server, client):
        assert cert["issuerRef"] == {
            "name": "rw-runway-ca",
            "kind": "Issuer",
            "group": "cert-manager.io",
        }
    # what the pods mount is what cert-manager writes
    deployment = runway_deployment(objects)
    assert mounted_secret(deployment, "runway", "/etc/runway/tls")["secretName"] == "rw-runway-tls"
    scheduler = one(objects, "Deployment", "rw-runway-scheduler")
    client_volume = mounted_secret(scheduler, "kube-scheduler", "/etc/runway-client-tls")
    assert client_volume["secretName"] == "rw-runway-client-tls"
    assert chart_config(objects).server.tls.require_client_cert is True


def test_cert_manager_with_an_issuer_of_yours() -> None:
    ref = {"name": "platform-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    objects = render({"certManager": {"enabled": True, "issuerRef": ref}})
    assert not find(objects, "Issuer")
    certs = find(objects, "Certificate")
    assert sorted(c["metadata"]["name"] for c in certs) == ["rw-runway-client-tls", "rw-runway-tls"]
    assert all(c["spec"]["issuerRef"] == ref for c in certs)


def test_plain_http_is_an_explicit_opt_out() -> None:
    objects = render(
        {
            "tls": {"enabled": False},
            "scheduler": {"enabled": True},
            "serviceMonitor": {"enabled": True},
        }
    )
    assert not find(objects, "Secret") and not find(objects, "Certificate")
    assert chart_config(objects).server.tls.enabled is False
    container = runway_container(objects)
    assert "--tls-cert-file" not in container["args"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    (extender,) = scheduler_config(objects)["extenders"]
    assert extender["urlPrefix"].startswith("http://") and "tlsConfig" not in extender
    (endpoint,) = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "http" and "tlsConfig" not in endpoint


def test_server_tls_only_when_client_certificates_are_not_required() -> None:
    objects = render(
        {"tls": {"requireClientCert": False}, "scheduler": {"enabled": True}, "healthPort": None}
    )
    tls = chart_config(objects).server.tls
    assert tls.enabled and not tls.require_client_cert and tls.client_ca_file is None
    container = runway_container(objects)
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["startupProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_lease_is_named_after_the_release() -> None:
    names = set()
    for release in ("alpha", "beta"):
        objects = render(release=release)
        fullname = f"{release}-runway"
        election = chart_config(objects).kubernetes.leader_election
        assert election.lease_name == fullname
        role = one(objects, "Role", f"{fullname}-leader-election")
        assert role["rules"][1]["resourceNames"] == [fullname]
        names.add(election.lease_name)
    assert len(names) == 2
    # an explicit leaseName wins
    objects = render({"config": {"kubernetes": {"leaderElection": {"leaseName": "mine"}}}})
    assert chart_config(objects).kubernetes.leader_election.lease_name == "mine"


def test_pod_name_is_not_passed_since_nothing_reads_it() -> None:
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in runway_container(render())["env"]
    }
    # the namespace (the Lease's) and the IP the leader advertises for forwarded preempt calls
    assert env == {"POD_NAMESPACE": "metadata.namespace", "POD_IP": "status.podIP"}


def test_the_serving_certificate_also_authenticates_a_follower_to_the_leader() -> None:
    objects = render({"certManager": {"enabled": True}})
    (serving,) = [
        c for c in find(objects, "Certificate") if c["metadata"]["name"] == "rw-runway-tls"
    ]
    assert "client auth" in serving["spec"]["usages"] and "server auth" in serving["spec"]["usages"]


def test_startup_probe_covers_the_startup_records_wait() -> None:
    for values in (None, {"tls": {"enabled": False}}, {"healthPort": None}):
        objects = render(values)
        probe = runway_container(objects)["startupProbe"]
        if values == {"healthPort": None}:
            assert probe["tcpSocket"] == {"port": "http"}  # mutual TLS, no health port
        else:  # the health port, whatever the TLS
            assert probe["httpGet"] == {"path": "/healthz", "port": "health", "scheme": "HTTP"}
        window = probe["periodSeconds"] * probe["failureThreshold"]
        wait = chart_config(objects).kubernetes.startup_records_timeout
        assert window >= 3 * wait  # room for the LIST of pods and nodes besides
    assert "startupProbe" not in runway_container(render({"startupProbe": None}))


def test_scheduler_has_a_pdb() -> None:
    objects = render({"scheduler": {"enabled": True}})
    pdb = one(objects, "PodDisruptionBudget", "rw-runway-scheduler")
    deployment = one(objects, "Deployment", "rw-runway-scheduler")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["maxUnavailable"] == 1
    objects = render({"scheduler": {"enabled": True, "podDisruptionBudget": {"minAvailable": 1}}})
    spec = one(objects, "PodDisruptionBudget", "rw-runway-scheduler")["spec"]
    assert spec["minAvailable"] == 1 and "maxUnavailable" not in spec
    disabled = {"scheduler": {"enabled": True, "podDisruptionBudget": {"enabled": False}}}
    assert [p["metadata"]["name"] for p in find(render(disabled), "PodDisruptionBudget")] == [
        "rw-runway"
    ]


@pytest.mark.parametrize(
    ("auth", "reviews"),
    [
        ({}, True),  # auto in a pod without tokens = kubernetes
        ({"mode": "kubernetes"}, True),
        ({"mode": "auto", "staticTokenFile": "/etc/runway/tokens"}, False),
        ({"mode": "static", "staticTokenFile": "/etc/runway/tokens"}, False),
        ({"mode": "none"}, False),
    ],
)
def test_token_and_access_review_rbac_only_with_kubernetes_auth(
    auth: dict[str, Any], reviews: bool
) -> None:
    role = one(render({"config": {"auth": auth}}), "ClusterRole", "rw-runway")
    groups = {g for rule in role["rules"] for g in rule["apiGroups"]}
    assert ("authentication.k8s.io" in groups) is reviews
    assert ("authorization.k8s.io" in groups) is reviews


def test_log_level_and_format_values_reach_the_config() -> None:
    config = chart_config(render({"logLevel": "debug", "logFormat": "json"}))
    assert (config.logging.level, config.logging.format) == ("debug", "json")
    config = chart_config(render({"config": {"logging": {"level": "warning"}}}))
    assert config.logging.level == "warning"


def test_service_monitor_presents_the_client_certificate() -> None:
    objects = render({"serviceMonitor": {"enabled": True}})
    (endpoint,) = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {
        "serverName": f"rw-runway.{NAMESPACE}.svc",
        "ca": {"secret": {"name": "rw-runway-tls", "key": "ca.crt"}},
        "cert": {"secret": {"name": "rw-runway-client-tls", "key": "tls.crt"}},
        "keySecret": {"name": "rw-runway-client-tls", "key": "tls.key"},
    }
    assert "authorization" not in endpoint


def test_service_monitor_token_for_protected_metrics_with_kubernetes_auth() -> None:
    objects = render(
        {"serviceMonitor": {"enabled": True}, "config": {"auth": {"protectMetrics": True}}}
    )
    (endpoint,) = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    name = "rw-runway-metrics-reader"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": name, "key": "token"},
    }
    token = one(objects, "Secret", name)
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": name}
    one(objects, "ServiceAccount", name)
    # what runway's SubjectAccessReview asks for /metrics (docs/security.md)
    assert one(objects, "ClusterRole", name)["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    binding = one(objects, "ClusterRoleBinding", name)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]


def test_service_monitor_token_for_protected_metrics_with_static_tokens() -> None:
    config = {"auth": {"protectMetrics": True, "staticTokenFile": "/etc/runway/tokens"}}
    with pytest.raises(helm.HelmError, match="bearerTokenSecret"):
        render({"serviceMonitor": {"enabled": True}, "config": config})
    secret = {"name": "scrape-token", "key": "token"}
    objects = render(
        {"serviceMonitor": {"enabled": True, "bearerTokenSecret": secret}, "config": config}
    )
    (endpoint,) = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["authorization"]["credentials"] == secret
    assert not find(objects, "ServiceAccount", "rw-runway-metrics-reader")


def exported_metric_names() -> set[str]:
    """Every series name runway's registry can export, plus process_cpu_seconds_total (the
    process collector, being added to that registry)."""
    names = {"process_cpu_seconds_total"}
    suffixes = {
        "counter": ("_total",),
        "gauge": ("",),
        "histogram": ("_bucket", "_sum", "_count"),
    }
    for family in metrics.REGISTRY.collect():
        names |= {family.name + suffix for suffix in suffixes[family.type]}
    return names


METRIC_TOKEN = re.compile(r"\b((?:runway|process)_[a-z0-9_]+)\b")
DEPLOY_ANCHORS = {
    re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
    for line in (CHART.parents[1] / "docs" / "deploy.md").read_text().splitlines()
    if line.startswith("#")
}
"""GitHub's anchors of docs/deploy.md's headings."""


def test_grafana_dashboard_panels_use_existing_metrics() -> None:
    objects = render({"grafanaDashboard": {"enabled": True}})
    configmap = one(objects, "ConfigMap", "rw-runway-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(configmap["data"]["runway.json"])
    known = exported_metric_names()
    used: set[str] = set()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(METRIC_TOKEN.findall(target["expr"]))
            assert names, (panel["title"], target["expr"])
            assert names <= known, (panel["title"], names - known)
            used |= names
    wanted = {
        "runway_extender_request_duration_seconds_bucket",  # verb latency
        "runway_filter_rejections_total",  # rejections by rule
        "runway_preemption_goroutines_execution_total",  # preemptions and results
        "runway_gate_pods",
        "runway_workloads_backoff",
        "runway_workloads_deactivated",
        "runway_kube_api_requests_total",
        "process_cpu_seconds_total",
    }
    assert wanted <= used
    assert not find(render(), "ConfigMap", "rw-runway-dashboard")


def test_prometheus_rule_alerts_use_existing_metrics() -> None:
    objects = render({"prometheusRule": {"enabled": True, "alertLabels": {"team": "platform"}}})
    rule = one(objects, "PrometheusRule", "rw-runway")
    (group,) = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert {
        "RunwayVerbErrors",
        "RunwayVerbLatencyHigh",
        "RunwayCacheNotFed",
        "RunwayPreemptionFailures",
        "RunwayGateStuck",
    } <= alerts.keys()
    assert {"RunwayTargetDown", "RunwayCertificateExpiresSoon"} <= alerts.keys()
    known = exported_metric_names() | {"up"}  # up: Prometheus' own, per scraped target
    for name, alert in alerts.items():
        names = set(METRIC_TOKEN.findall(alert["expr"])) | (
            {"up"} if "up{" in alert["expr"] else set()
        )
        assert names and names <= known, (name, names - known)
        # a runbook per alert: a section of docs/deploy.md
        anchor = alert["annotations"]["runbook_url"].split("docs/deploy.md#", 1)[1]
        assert anchor == name.lower() and anchor in DEPLOY_ANCHORS, name
        # the ServiceMonitor's job label is the Service's name
        assert 'job="rw-runway"' in alert["expr"], name
        assert alert["labels"]["team"] == "platform" and alert["labels"]["severity"]
    latency = alerts["RunwayVerbLatencyHigh"]["expr"]
    threshold = float(latency.rsplit(">", 1)[1])
    assert threshold < 5  # kube-scheduler's default extender httpTimeout
    assert not find(render(), "PrometheusRule")


@pytest.mark.parametrize(
    "variant",
    [
        {"certManager": {"enabled": True}, "scheduler": {"enabled": True}},
        {"tls": {"enabled": False}, "networkPolicy": {"enabled": False}},
        {
            "scheduler": {"enabled": True},
            "serviceMonitor": {"enabled": True},
            "grafanaDashboard": {"enabled": True},
            "prometheusRule": {"enabled": True},
            "config": {"auth": {"protectMetrics": True}},
            "logLevel": "debug",
            "logFormat": "json",
        },
    ],
    ids=["cert-manager", "plain-http", "monitoring"],
)
def test_lint_is_clean_for_the_variants(variant: dict[str, Any]) -> None:
    report = helm.lint(CHART, variant, strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == [], report


def test_mutual_tls_with_your_own_secret_needs_a_client_certificate() -> None:
    values = {"tls": {"secretName": "mine"}, "scheduler": {"enabled": True}}
    with pytest.raises(helm.HelmError, match=r"tls\.clientCertSecretName"):
        render(values)
    # server TLS only is fine without one; so is the extender alone (no chart client)
    render(
        {"tls": {"secretName": "mine", "requireClientCert": False}, "scheduler": {"enabled": True}}
    )
    assert not find(render({"tls": {"secretName": "mine"}}), "Secret")


def test_the_bundled_schedulers_preemptors_pass_the_cross_check() -> None:
    """A preemptor of the chart's own scheduler names it in spec.schedulerName: runway's config
    must list it in preemption.schedulerNames, or every such preemption is refused."""
    default = chart_config(render(None))
    assert default.preemption.scheduler_names == ["default-scheduler"]
    # bundled mode manages the bundled scheduler's pods only (the operator issue: runway held
    # and evicted the default scheduler's Deployments in every namespace)
    bundled = chart_config(render({"scheduler": {"enabled": True}}))
    assert bundled.preemption.scheduler_names == ["runway-scheduler"]
    assert bundled.scope.namespace_selector is not None
    assert "kube-system" in str(bundled.scope.namespace_selector)
    mine = chart_config(
        render(
            {
                "scheduler": {"enabled": True},
                "config": {"preemption": {"schedulerNames": ["runway-scheduler"]}},
            }
        )
    )
    assert mine.preemption.scheduler_names == ["runway-scheduler"]


@pytest.mark.parametrize(("source", "granted"), [("kai", True), ("auto", True), ("file", False)])
def test_kai_queue_source_may_read_queue_objects(source: str, granted: bool) -> None:
    objects = render({"config": {"queueSource": source}})
    role = one(objects, "ClusterRole", runway_deployment(objects)["metadata"]["name"])
    rules = [r for r in role["rules"] if r["apiGroups"] == ["scheduling.run.ai"]]
    assert rules == (
        [
            {
                "apiGroups": ["scheduling.run.ai"],
                "resources": ["queues"],
                "verbs": ["get", "list", "watch"],
            }
        ]
        if granted
        else []
    )


# ---------------------------------------------------- issue 26: the docs match what the chart does


def test_readme_scheduler_stanza_is_what_notes_print() -> None:
    """README's "Register with the cluster's kube-scheduler" block, for release runway in
    runway-system with service.clusterIP 10.96.100.100, is exactly the stanza NOTES print."""
    readme = (CHART.parents[1] / "README.md").read_text()
    section = readme[readme.index("### Register with the cluster's kube-scheduler") :]
    block = section[section.index("```yaml\n") + 8 : section.index("```\n", 8)]
    files = render_files(
        {"service": {"clusterIP": "10.96.100.100"}}, release="runway", namespace="runway-system"
    )
    notes = next(text for path, text in files.items() if path.endswith("NOTES.txt"))
    assert yaml.safe_load(block) == notes_stanza(notes)
    (extender,) = notes_stanza(notes)["extenders"]
    assert {"caFile", "certFile", "keyFile", "serverName"} == extender["tlsConfig"].keys()


@pytest.mark.parametrize(
    ("config", "needed"),
    [
        ({}, False),
        ({"waitForPodsReady": {"enable": True}}, True),
        ({"waitForPodsReady": {"timeout": "5m"}}, True),  # v1beta2 shape: present = enabled
        ({"waitForPodsReady": {"enable": False}}, False),
        ({"waitForPodsReady": {"enable": True}, "prioritize": {"poolPreference": False}}, False),
        ({"prioritize": {"locality": True}}, True),
    ],
)
def test_the_stanzas_name_prioritize_only_when_a_preference_needs_it(
    config: dict[str, Any], needed: bool
) -> None:
    """Issue 29: the chart follows `check-config` (app/config/prioritize.py)."""
    values = {"config": config, "scheduler": {"enabled": True}}
    (bundled,) = scheduler_config(render(values))["extenders"]
    files = render_files({"config": config})
    notes = next(text for path, text in files.items() if path.endswith("NOTES.txt"))
    (own,) = notes_stanza(notes)["extenders"]
    assert ("prioritizeVerb" in bundled, "prioritizeVerb" in own) == (needed, needed)
    parsed = parse_config(config)  # as runway reads the file the chart renders
    assert bool(parsed.prioritize.needed(parsed.wait_for_pods_ready.enable)) is needed


def test_readme_names_the_image_the_chart_pulls() -> None:
    deployment = runway_deployment(render())
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    readme = (CHART.parents[1] / "README.md").read_text()
    assert image == "runway:0.1.0" and f"default `{image}`" in readme


def test_runway_and_the_bundled_scheduler_outrank_every_workload() -> None:
    objects = render({"scheduler": {"enabled": True}})
    for name in ("rw-runway", "rw-runway-scheduler"):
        pod = one(objects, "Deployment", name)["spec"]["template"]["spec"]
        assert pod["priorityClassName"] == "system-cluster-critical", name


def test_bundled_scheduler_rolls_when_the_chart_makes_a_new_ca() -> None:
    def annotations() -> dict[str, str]:
        deployment = one(
            render({"scheduler": {"enabled": True}}), "Deployment", "rw-runway-scheduler"
        )
        found: dict[str, str] = deployment["spec"]["template"]["metadata"]["annotations"]
        return found

    # offline (no lookup): a new CA on every render, so a new checksum
    assert annotations()["checksum/runway-ca"] != annotations()["checksum/runway-ca"]
    # the checksum is the CA the same render writes: the first upgrade (which reads that CA
    # back) computes the same one and restarts nothing (the operator issue's low item)
    objects = render({"scheduler": {"enabled": True}})
    pod = one(objects, "Deployment", "rw-runway-scheduler")["spec"]["template"]["metadata"]
    ca = one(objects, "Secret", "rw-runway-ca")["data"]["tls.crt"]
    assert pod["annotations"]["checksum/runway-ca"] == hashlib.sha256(ca.encode()).hexdigest()
    assert one(objects, "Secret", "rw-runway-tls")["data"]["ca.crt"] == ca
    with_own = render(
        {"scheduler": {"enabled": True}, "tls": {"secretName": "mine", "clientCertSecretName": "c"}}
    )
    pod = one(with_own, "Deployment", "rw-runway-scheduler")["spec"]["template"]["metadata"]
    assert "checksum/runway-ca" not in pod["annotations"]


def test_ca_rotation_prepare_trusts_a_new_ca_beside_the_current_one() -> None:
    """tls.caRotation=prepare (docs/deploy.md, Rotating the CA): a second CA in -ca-next, both
    in ca.crt (the new one first: runway's client-ca expiry metric shows it once a replica reads
    the bundle), the certificates still signed by the current CA, the bundled scheduler rolled
    onto the bundle. Offline (no lookup) the current CA is new too; the shape is what counts."""
    objects = render({"scheduler": {"enabled": True}, "tls": {"caRotation": "prepare"}})
    current = one(objects, "Secret", "rw-runway-ca")["data"]["tls.crt"]
    nxt = one(objects, "Secret", "rw-runway-ca-next")["data"]["tls.crt"]
    assert nxt != current
    for name in ("rw-runway-tls", "rw-runway-client-tls"):
        secret = one(objects, "Secret", name)
        bundle = base64.b64decode(secret["data"]["ca.crt"]).decode()
        pems = [p for p in bundle.split("-----END CERTIFICATE-----") if "BEGIN" in p]
        assert len(pems) == 2
        assert pems[0].strip() in base64.b64decode(nxt).decode()
        assert pems[1].strip() in base64.b64decode(current).decode()
        # signed by the current CA, which the annotation names
        assert (
            secret["metadata"]["annotations"]["runway.dev/ca-sha256"]
            == hashlib.sha256(current.encode()).hexdigest()
        )
        ctx = ssl.create_default_context(cadata=bundle)  # a bundle Python's ssl reads
        assert len(ctx.get_ca_certs()) == 2
    pod = one(objects, "Deployment", "rw-runway-scheduler")["spec"]["template"]["metadata"]
    trust = one(objects, "Secret", "rw-runway-tls")["data"]["ca.crt"]
    assert pod["annotations"]["checksum/runway-ca"] == hashlib.sha256(trust.encode()).hexdigest()
    # no rotation: no -ca-next, no -ca-previous (an upgrade back to "" removes them)
    plain = render({"scheduler": {"enabled": True}})
    assert {s["metadata"]["name"] for s in find(plain, "Secret")} == {
        "rw-runway-ca",
        "rw-runway-tls",
        "rw-runway-client-tls",
    }


def test_ca_rotation_switch_needs_a_prepared_ca_and_the_live_cluster() -> None:
    with pytest.raises(helm.HelmError, match=r"tls\.caRotation=switch: there is no new CA"):
        render({"tls": {"caRotation": "switch"}})
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError):
        chart.render({"tls": {"caRotation": "later"}}, name=RELEASE, namespace=NAMESPACE)


@pytest.mark.parametrize(
    ("queues", "scope", "message"),
    [
        (
            [{"name": "research"}, {"name": "team-a", "parent": "reserch"}],
            {},
            r"config.queues\[1\].parent: queue \"team-a\": unknown parent queue \"reserch\"",
        ),
        (
            [{"name": "research"}, {"name": "team-a", "parentQueue": "reserch"}],
            {},
            r"unknown parent queue \"reserch\"",
        ),
        (
            [{"name": "a"}, {"name": "a"}],
            {},
            r"config.queues\[1\].name: queue \"a\" is declared twice",
        ),
        (
            [{"name": "research"}],
            {"namespaceQueues": {"team-a": "reserch"}},
            r"config.scope.namespaceQueues.team-a: .* queue \"reserch\"",
        ),
    ],
)
def test_the_chart_refuses_a_config_check_config_refuses(
    queues: list[dict[str, Any]], scope: dict[str, Any], message: str
) -> None:
    """The operator issue: `parent: reserch` passed the schema and the upgrade timed out on a
    crashing pod; the chart fails it with check-config's words."""
    with pytest.raises(helm.HelmError, match=message):
        render({"config": {"queues": queues, "scope": scope}})
    with pytest.raises(ConfigError):
        parse_config({"queues": queues, "scope": scope})


@pytest.mark.parametrize(
    ("scheduler", "kube_version", "expected"),
    [
        ({}, None, "kubescheduler.config.k8s.io/v1"),  # the default tag v1.30.0
        ({"image": {"tag": "v1.20.2"}}, None, "kubescheduler.config.k8s.io/v1beta1"),
        ({"image": {"tag": "v1.22.0"}}, None, "kubescheduler.config.k8s.io/v1beta2"),
        ({"image": {"tag": "1.24.1"}}, None, "kubescheduler.config.k8s.io/v1beta3"),
        ({"image": {"tag": "v1.25.0"}}, None, "kubescheduler.config.k8s.io/v1"),
        ({"image": {"tag": "v1.37.2"}}, "v1.20.2", "kubescheduler.config.k8s.io/v1"),
        # a tag that is no version: the cluster's version decides
        ({"image": {"tag": "latest"}}, "v1.21.0", "kubescheduler.config.k8s.io/v1beta1"),
        ({"image": {"tag": "latest"}}, "v1.37.2", "kubescheduler.config.k8s.io/v1"),
        # set: taken as given
        (
            {
                "image": {"tag": "v1.37.2"},
                "configApiVersion": "kubescheduler.config.k8s.io/v1beta3",
            },
            None,
            "kubescheduler.config.k8s.io/v1beta3",
        ),
    ],
)
def test_bundled_scheduler_config_api_follows_its_release(
    scheduler: dict[str, Any], kube_version: str | None, expected: str
) -> None:
    """Issue #39: v1beta1 is gone from 1.25 and 1.20 knows no v1: the bundled scheduler's config
    is in the API its own release (the image tag) reads."""
    objects = render({"scheduler": {"enabled": True, **scheduler}}, kube_version=kube_version)
    config = yaml.safe_load(one(objects, "ConfigMap", "rw-runway-scheduler")["data"]["config.yaml"])
    assert config["apiVersion"] == expected
