"""helm/runway rendered by Helm itself: lint, schema, and the objects an operator relies on."""

from __future__ import annotations

import hashlib
from typing import Any

import helm_python as helm
import pytest
import yaml

from app.__main__ import build_parser
from app.config import RunwayConfig, parse_config
from tests.helm_chart import (
    CHART,
    NAMESPACE,
    all_options,
    find,
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
        ({"rbac": {"ownerKinds": [{"apiGroup": "*", "resource": "jobs"}]}}, "apiGroup"),
        ({"rbac": {"ownerKinds": [{"apiGroup": "batch", "resource": "*"}]}}, "resource"),
        ({"tls": {"enabled": True}}, "/tls/secretName"),
        ({"scheduler": {"extender": {"httpTimeout": "5 seconds"}}}, "httpTimeout"),
        ({"scheduler": {"extender": {"weight": 0}}}, "weight"),
        ({"scheduler": {"profile": {"schedulerName": "other"}}}, "/scheduler/profile"),
        ({"service": {"port": 70000}}, "/service/port"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    ],
)
def test_schema_rejects_a_bad_value_and_names_it(bad: dict[str, Any], field: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as excinfo:
        chart.validate_schema(bad)
    assert field in str(excinfo.value)
    # an install would refuse it too: rendering validates against the schema first
    with pytest.raises(helm.HelmValuesError):
        render_files(bad)


# ------------------------------------------------------------------------------ every value set


def test_rendered_objects_are_namespaced_into_the_release_namespace(
    objects: list[dict[str, Any]],
) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"}
    for obj in objects:
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"], obj["metadata"]
        elif obj["metadata"]["name"].endswith("-auth-reader"):
            assert obj["metadata"]["namespace"] == "kube-system"
        else:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["metadata"]


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
    expected |= {("", "events", "create"), ("", "events", "patch")}
    expected |= {("events.k8s.io", "events", "create")}
    expected |= {("authentication.k8s.io", "tokenreviews", "create")}
    expected |= {("authorization.k8s.io", "subjectaccessreviews", "create")}
    for owner in merged(values)["rbac"]["ownerKinds"]:
        # get + patch write the records; list + watch feed the owner reflectors (records cache)
        expected |= {
            (owner["apiGroup"], owner["resource"], v) for v in ("get", "list", "watch", "patch")
        }
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
    assert container["ports"] == [
        {"name": "http", "containerPort": settings["containerPort"], "protocol": "TCP"}
    ]
    assert container["resources"] == settings["resources"]


def test_probes_hit_healthz_and_readyz_on_the_serving_port(
    values: dict[str, Any] | None, objects: list[dict[str, Any]]
) -> None:
    container = runway_container(objects)
    scheme = "HTTPS" if merged(values)["tls"]["enabled"] else "HTTP"
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
    expected = parse_config(merged(values)["config"])
    assert config == expected


def test_service_selects_the_extender_pods_on_the_http_port(
    values: dict[str, Any] | None, objects: list[dict[str, Any]]
) -> None:
    deployment = runway_deployment(objects)
    service = one(objects, "Service", deployment["metadata"]["name"])
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "http"
    assert port["port"] == merged(values)["service"]["port"]


def test_pdb_selects_the_extender_pods(objects: list[dict[str, Any]]) -> None:
    pdb = one(objects, "PodDisruptionBudget")
    deployment = runway_deployment(objects)
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
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )
    assert runway_deployment(render())["spec"]["replicas"] == 2


def test_default_config_is_the_embedded_default() -> None:
    assert chart_config(render()) == RunwayConfig()


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
    assert extender["prioritizeVerb"] == "prioritize"
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


def test_plain_http_extender_url_by_default() -> None:
    objects = render({"scheduler": {"enabled": True}})
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


def test_scheduler_image_tag_defaults_to_the_cluster_version() -> None:
    objects = render({"scheduler": {"enabled": True}}, kube_version="v1.29.4")
    (container,) = one(objects, "Deployment", "rw-runway-scheduler")["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.29.0"


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
    objects = render({"tls": {"enabled": True, "secretName": "s"}, "scheduler": {"enabled": True}})
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
