"""The chart's MutatingWebhookConfiguration (holds as scheduling gates, DESIGN §5.8): rendered
where the cluster has gates, failurePolicy Ignore, a timeout of at most 2 s, never asked about
kube-system, the release namespace or namespaces outside the scope's selector, on the REST port
with the chart's CA bundle (generated, cert-manager's by injection, or the operator's)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.helm_chart import NAMESPACE, find, one, render

NEW = "v1.34.4"


def hook(values: dict[str, Any] | None = None, kube_version: str = NEW) -> dict[str, Any]:
    config = one(render(values, kube_version=kube_version), "MutatingWebhookConfiguration")
    assert len(config["webhooks"]) == 1
    webhook: dict[str, Any] = config["webhooks"][0]
    return webhook


def test_the_webhook_never_blocks_a_pods_creation() -> None:
    w = hook()
    assert w["failurePolicy"] == "Ignore"
    assert w["timeoutSeconds"] <= 2
    assert w["sideEffects"] == "None" and w["admissionReviewVersions"] == ["v1"]
    assert w["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]


def test_it_is_called_on_the_rest_port_with_the_generated_ca() -> None:
    objects = render(kube_version=NEW)
    w = one(objects, "MutatingWebhookConfiguration")["webhooks"][0]
    assert w["clientConfig"]["service"] == {
        "namespace": NAMESPACE,
        "name": "rw-runway",
        "port": 9443,
        "path": "/webhooks/gate",
    }
    ca = one(objects, "Secret", "rw-runway-ca")["data"]["tls.crt"]
    assert w["clientConfig"]["caBundle"] == ca
    assert base64.b64decode(ca).startswith(b"-----BEGIN CERTIFICATE-----")
    port = one(objects, "Service", "rw-runway")["spec"]["ports"][1]
    assert (port["name"], port["port"], port["targetPort"]) == ("gate-webhook", 9443, "rest")
    server = one(objects, "Secret", "rw-runway-tls")["data"]["ca.crt"]
    assert server == ca, "the serving certificate is signed by the CA the API server trusts"


def test_never_kube_system_nor_its_own_namespace_nor_outside_the_scope() -> None:
    selector = hook()["namespaceSelector"]
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", NAMESPACE],
    } in selector["matchExpressions"]
    scoped = hook({"config": {"scope": {"namespaceSelector": {"matchLabels": {"ml": "yes"}}}}})
    assert scoped["namespaceSelector"]["matchLabels"] == {"ml": "yes"}
    assert scoped["namespaceSelector"]["matchExpressions"][-1]["values"] == [
        "kube-system",
        NAMESPACE,
    ]


def test_cert_manager_injects_its_ca() -> None:
    objects = render({"certManager": {"enabled": True}}, kube_version=NEW)
    config = one(objects, "MutatingWebhookConfiguration")
    assert config["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/rw-runway-tls"
    }
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]


def test_your_own_secret_needs_its_ca_bundle() -> None:
    values: dict[str, Any] = {"tls": {"secretName": "mine", "requireClientCert": False}}
    assert find(render(values, kube_version=NEW), "MutatingWebhookConfiguration") == []
    with pytest.raises(Exception, match=r"admissionWebhook\.caBundle"):
        render(values | {"admissionWebhook": {"enabled": True}}, kube_version=NEW)
    values["admissionWebhook"] = {"caBundle": "Q0E="}
    assert hook(values)["clientConfig"]["caBundle"] == "Q0E="


@pytest.mark.parametrize(
    ("values", "kube_version"),
    [
        (None, "v1.29.0"),  # auto: no gates GA on the cluster
        ({"admissionWebhook": {"enabled": False}}, NEW),
        ({"config": {"admission": {"schedulingGates": False}}}, NEW),
    ],
)
def test_not_rendered_where_holds_are_not_gates(
    values: dict[str, Any] | None, kube_version: str
) -> None:
    assert find(render(values, kube_version=kube_version), "MutatingWebhookConfiguration") == []


def test_what_it_needs_missing_auto_renders_none_and_true_says_the_fix() -> None:
    for values, fix in (
        ({"rest": {"enabled": False}}, r"rest\.enabled"),
        ({"tls": {"enabled": False}}, r"tls\.enabled"),
    ):
        assert find(render(values, kube_version=NEW), "MutatingWebhookConfiguration") == []
        with pytest.raises(Exception, match=fix):
            render(values | {"admissionWebhook": {"enabled": True}}, kube_version=NEW)


def test_an_object_selector_narrows_it() -> None:
    selector = {"matchExpressions": [{"key": "runway.dev/queue", "operator": "Exists"}]}
    assert hook({"admissionWebhook": {"objectSelector": selector}})["objectSelector"] == selector
