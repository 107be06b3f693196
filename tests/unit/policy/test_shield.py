"""``app.policy.shield``: the pods runway never preempts (protected namespaces, its own)."""

from __future__ import annotations

import pytest

from app.config.preemption import PreemptionConfig
from app.policy.shield import NO_SHIELD, Shield, shielded

RELEASE = {"app.kubernetes.io/name": "runway", "app.kubernetes.io/instance": "rw"}


def shield_of(own: str | None = "runway-system", **config: object) -> Shield:
    return Shield.from_config(PreemptionConfig.model_validate(config), own)


@pytest.mark.parametrize(
    ("shield", "namespace", "labels", "why"),
    [
        # defaults: kube-system and runway's own namespace
        (shield_of(), "kube-system", None, "protected namespace kube-system"),
        (shield_of(), "runway-system", {}, "runway-system (runway's own namespace)"),
        (shield_of(), "team-a", RELEASE, ""),
        (shield_of(), "default", None, ""),
        # outside a pod runway has no namespace of its own: only kube-system
        (shield_of(None), "runway-system", None, ""),
        (shield_of(None), "kube-system", None, "kube-system"),
        # the operator's list replaces the default
        (shield_of(protectedNamespaces=["infra"]), "kube-system", None, ""),
        (shield_of(protectedNamespaces=["infra"]), "infra", None, "protected namespace infra"),
        # own namespace not protected: the release's labels still shield runway's own pods...
        (
            shield_of(protectOwnNamespace=False, protectedPodLabels=RELEASE),
            "runway-system",
            {**RELEASE, "extra": "x"},
            "runway's own pods",
        ),
        # ...all of them must match...
        (
            shield_of(protectOwnNamespace=False, protectedPodLabels=RELEASE),
            "runway-system",
            {"app.kubernetes.io/name": "runway"},
            "",
        ),
        # ...and only in runway's namespace: a tenant's copy of the labels counts for nothing
        (
            shield_of(protectOwnNamespace=False, protectedPodLabels=RELEASE),
            "team-a",
            RELEASE,
            "",
        ),
        (shield_of(protectOwnNamespace=False), "runway-system", RELEASE, ""),
        (NO_SHIELD, "kube-system", RELEASE, ""),
    ],
)
def test_shielded(shield: Shield, namespace: str, labels: dict[str, str] | None, why: str) -> None:
    got = shielded(shield, namespace, labels)
    if why:
        assert why in got and "never preempts" in got
    else:
        assert got == ""


def test_config_defaults_are_kube_system_and_own_namespace() -> None:
    assert shield_of("rs").namespaces == frozenset({"kube-system", "rs"})
    assert shield_of("").namespaces == frozenset({"kube-system"})
