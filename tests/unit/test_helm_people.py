"""The chart's access for people: the REST API on a port of its own (rest.*), its Service and
NetworkPolicy, and the viewer/admin ClusterRoles (peopleRoles.*)."""

from __future__ import annotations

from typing import Any

import yaml

from app.__main__ import build_parser, serve_overrides
from app.config import RunwayConfig, with_overrides
from app.kubectl.target import DEFAULT_PORT, DEFAULT_SERVICE, ProxyOptions
from tests.helm_chart import find, one, render


def rules_of(role: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (group, resource, verb, name)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames", ["*all*"])
    }


def extender(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(
        d
        for d in find(objects, "Deployment")
        if d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "extender"
    )


def test_rest_port_has_its_service_and_the_flag_runway_understands() -> None:
    objects = render()
    deployment = extender(objects)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    ns = build_parser().parse_args(container["args"][3:])
    config = with_overrides(RunwayConfig(), serve_overrides(ns))
    assert config.server.rest_port == 8889 and config.server.port == 8888
    service = one(objects, "Service", "rw-runway-rest")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [
        {
            "name": "rest",
            "port": 8889,
            "targetPort": "rest",
            "protocol": "TCP",
            "appProtocol": "https",
        }
    ]
    # kubectl runway's defaults name this Service and port (with release name "runway").
    assert f"rw-{DEFAULT_SERVICE}" == "rw-runway-rest" and DEFAULT_PORT == "rest"
    policy = one(objects, "NetworkPolicy", "rw-runway-rest")
    assert policy["spec"]["ingress"] == [{"ports": [{"port": "rest", "protocol": "TCP"}]}]
    narrowed = render({"rest": {"networkPeers": [{"ipBlock": {"cidr": "10.0.0.0/28"}}]}})
    rule = one(narrowed, "NetworkPolicy", "rw-runway-rest")["spec"]["ingress"][0]
    # runway's own replicas stay allowed: a follower asks the leader's REST port
    own = {"podSelector": {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}}
    assert rule["from"] == [{"ipBlock": {"cidr": "10.0.0.0/28"}}, own]


def test_people_roles_grant_reads_and_activation_on_the_rest_service_only() -> None:
    objects = render()
    viewer = one(objects, "ClusterRole", "rw-runway-viewer")
    admin = one(objects, "ClusterRole", "rw-runway-admin")
    proxied = ProxyOptions("runway-system", "rw-runway-rest", "rest", "https").path()
    name_in_url = proxied.split("/services/")[1].removesuffix("/proxy")
    assert ("", "services/proxy", "get", name_in_url) in rules_of(viewer)
    assert ("", "services/proxy", "create", name_in_url) not in rules_of(viewer)
    assert ("", "services/proxy", "create", name_in_url) in rules_of(admin)
    assert ("runway.dev", "workloads", "get", "*all*") in rules_of(viewer)
    assert ("runway.dev", "workloads", "update", "*all*") in rules_of(admin)
    assert ("runway.dev", "workloads", "update", "*all*") not in rules_of(viewer)
    # Nothing but runway's REST Service is proxied.
    names = {r[3] for r in rules_of(viewer) | rules_of(admin) if r[1] == "services/proxy"}
    assert all("rw-runway-rest" in n for n in names)
    labels = viewer["metadata"]["labels"]
    assert labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    # Issue #36: activation is never aggregated into a namespace's `admin` (a tenant).
    assert not any("aggregate" in k for k in admin["metadata"]["labels"])
    assert not find(objects, "ClusterRoleBinding", "rw-runway-viewer")


def test_people_roles_follow_the_sar_config_and_bind_the_listed_subjects() -> None:
    objects = render(
        {
            "config": {"auth": {"sar": {"group": "example.com", "verb": "patch"}}},
            "peopleRoles": {
                "aggregate": False,
                "viewers": [
                    {
                        "kind": "Group",
                        "name": "researchers",
                        "apiGroup": "rbac.authorization.k8s.io",
                    }
                ],
                "admins": [
                    {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}
                ],
            },
        }
    )
    admin = one(objects, "ClusterRole", "rw-runway-admin")
    assert ("example.com", "workloads", "patch", "*all*") in rules_of(admin)
    assert not any("aggregate" in k for k in admin["metadata"]["labels"])
    binding = one(objects, "ClusterRoleBinding", "rw-runway-viewer")
    assert binding["roleRef"]["name"] == "rw-runway-viewer"
    assert binding["subjects"][0]["name"] == "researchers"
    assert one(objects, "ClusterRoleBinding", "rw-runway-admin")["subjects"][0]["name"] == "alice"


def test_one_port_when_rest_is_off_and_no_roles_when_not_wanted() -> None:
    objects = render({"rest": {"enabled": False}})
    assert not find(objects, "Service", "rw-runway-rest")
    assert not find(objects, "NetworkPolicy", "rw-runway-rest")
    container = extender(objects)["spec"]["template"]["spec"]["containers"][0]
    assert "--rest-port" not in container["args"]
    assert [p["name"] for p in container["ports"]] == ["http", "health"]  # + the probes
    viewer = one(objects, "ClusterRole", "rw-runway-viewer")
    assert ("", "services/proxy", "get", "https:rw-runway:http") in rules_of(viewer)
    assert not find(render({"peopleRoles": {"create": False}}), "ClusterRole", "rw-runway-viewer")


def test_reads_on_the_rest_port_need_a_token_unless_the_config_says_otherwise() -> None:
    def protect(objects: list[dict[str, Any]]) -> bool:
        configmap = one(objects, "ConfigMap", "rw-runway")
        config: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])
        return bool(config.get("auth", {}).get("protectReadOnly", False))

    assert protect(render())
    assert not protect(render({"config": {"auth": {"protectReadOnly": False}}}))
    assert not protect(render({"rest": {"enabled": False}}))


def test_teams_reach_the_proxy_in_the_release_namespace_only() -> None:
    """Issue #35 item 4: a team's subjects are bound (RoleBinding) to the viewer or admin role in
    the release namespace alone — the service proxy to runway there; runway authorises what they
    read and activate per namespace itself."""
    team_a = {"kind": "Group", "name": "team-a", "apiGroup": "rbac.authorization.k8s.io"}
    team_b = {"kind": "Group", "name": "team-b", "apiGroup": "rbac.authorization.k8s.io"}
    objects = render({"peopleRoles": {"teamViewers": [team_a], "teamAdmins": [team_b]}})
    for role, team in (("viewer", team_a), ("admin", team_b)):
        binding = one(objects, "RoleBinding", f"rw-runway-team-{role}")
        assert binding["metadata"]["namespace"] == "runway-system"
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": f"rw-runway-{role}",
        }
        assert binding["subjects"] == [team]
    assert not [o for o in objects if o["kind"] == "ClusterRoleBinding" and "team" in str(o)]
    assert not [o for o in render({}) if o["kind"] == "RoleBinding" and "team" in str(o)]
