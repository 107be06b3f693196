"""Which pods runway manages (``policy.scope``, DESIGN §2.0): the operator issue's cases."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.scope import ScopeConfig
from app.policy.scope import EVERY_POD, Scope, namespace_queue, unmanaged
from tests.builders import pod, raw_pod


def a_pod(
    namespace: str = "team-a",
    scheduler: str | None = None,
    labels: dict[str, str] | None = None,
) -> Any:
    obj = raw_pod("p", namespace=namespace, labels=labels)
    if scheduler is not None:
        obj["spec"]["schedulerName"] = scheduler
    return pod(obj)


def scope_of(
    own: str | None = "runway-system",
    schedulers: tuple[str, ...] = ("runway-scheduler",),
    **raw: Any,
) -> Scope:
    return Scope.from_config(ScopeConfig.model_validate(raw), schedulers, ["kube-system"], own)


QUEUED = {"runway.dev/queue": "research"}


@pytest.mark.parametrize(
    ("case", "scope", "the_pod", "why"),
    [
        (
            "a queued pod of runway's scheduler",
            scope_of(),
            a_pod(scheduler="runway-scheduler", labels=QUEUED),
            "",
        ),
        (
            "the default scheduler's Deployment in default (the operator's report)",
            scope_of(),
            a_pod("default", scheduler="default-scheduler"),
            "scheduled by 'default-scheduler'",
        ),
        (
            "an empty schedulerName is the default scheduler",
            scope_of(),
            a_pod(labels=QUEUED),
            "scheduled by 'default-scheduler'",
        ),
        (
            "kube-system, even queued and on runway's scheduler",
            scope_of(),
            a_pod("kube-system", scheduler="runway-scheduler", labels=QUEUED),
            "never managed",
        ),
        (
            "runway's own namespace (its own replica)",
            scope_of(),
            a_pod("runway-system", scheduler="runway-scheduler", labels=QUEUED),
            "never managed",
        ),
        (
            "no queue label, namespace not mapped",
            scope_of(),
            a_pod(scheduler="runway-scheduler"),
            "names no queue",
        ),
        (
            "no queue label, namespace mapped by name",
            scope_of(namespaceQueues={"team-a": "research"}),
            a_pod(scheduler="runway-scheduler"),
            "",
        ),
        (
            "no queue label, namespace mapped by pattern",
            scope_of(namespaceQueues={"team-*": "research"}),
            a_pod(scheduler="runway-scheduler"),
            "",
        ),
        (
            "no queue label, manageWithoutQueue",
            scope_of(manageWithoutQueue=True),
            a_pod(scheduler="runway-scheduler"),
            "",
        ),
        (
            "Kueue's label counts as naming a queue",
            scope_of(),
            a_pod(scheduler="runway-scheduler", labels={"kueue.x-k8s.io/queue-name": "q"}),
            "",
        ),
        (
            "an empty queue label names nothing",
            scope_of(),
            a_pod(scheduler="runway-scheduler", labels={"runway.dev/queue": ""}),
            "names no queue",
        ),
        (
            "a namespace the selector excludes",
            scope_of(namespaceSelector={"matchLabels": {"runway": "on"}}),
            a_pod(scheduler="runway-scheduler", labels=QUEUED),
            "do not match scope.namespaceSelector",
        ),
        (
            "outside a pod there is no own namespace to exclude",
            scope_of(own=None),
            a_pod("runway-system", scheduler="runway-scheduler", labels=QUEUED),
            "",
        ),
        (
            "the test scope manages everything",
            EVERY_POD,
            a_pod("kube-system"),
            "",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_which_pods_runway_manages(case: str, scope: Scope, the_pod: Any, why: str) -> None:
    got = unmanaged(scope, the_pod, {})
    if why:
        assert why in got, case
    else:
        assert got == "", (case, got)


def test_the_selector_reads_the_namespaces_labels_and_unreadable_labels_match_nothing() -> None:
    scope = scope_of(namespaceSelector={"matchLabels": {"runway": "on"}})
    queued = a_pod(scheduler="runway-scheduler", labels=QUEUED)
    assert unmanaged(scope, queued, {"runway": "on"}) == ""
    assert unmanaged(scope, queued, {"runway": "off"})
    assert unmanaged(scope, queued, None)  # more labels than runway keeps: refused


def test_the_charts_selector_lets_1_20_namespaces_in() -> None:
    """The chart's default excludes by ``kubernetes.io/metadata.name``, which 1.20 does not set:
    NotIn holds for a namespace without the label, and kube-system stays excluded by runway."""
    scope = scope_of(
        namespaceSelector={
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", "runway-system"],
                }
            ]
        }
    )
    queued = a_pod(scheduler="runway-scheduler", labels=QUEUED)
    assert unmanaged(scope, queued, {}) == ""
    system = a_pod("kube-system", scheduler="runway-scheduler", labels=QUEUED)
    assert unmanaged(scope, system, {}) != ""


def test_an_exact_namespace_wins_over_a_pattern_listed_before_it() -> None:
    scope = scope_of(namespaceQueues={"team-*": "shared", "team-a": "research"})
    assert namespace_queue(scope, "team-a") == "research"
    assert namespace_queue(scope, "team-b") == "shared"
    assert namespace_queue(scope, "other") is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"namespaceQueues": {"Team_A": "q"}}, "neither a namespace name"),
        ({"namespaceQueues": {"team-a": ""}}, "empty queue name"),
        ({"namespaceSelector": ""}, "not the string"),
        ({"manageWithoutQueues": True}, "manageWithoutQueues"),
    ],
)
def test_a_bad_scope_names_the_field_and_the_value(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScopeConfig.model_validate(raw)


@given(
    namespace=st.sampled_from(["kube-system", "runway-system", "team-a", "default"]),
    scheduler=st.sampled_from([None, "default-scheduler", "runway-scheduler", "other"]),
    labels=st.dictionaries(
        st.sampled_from(["runway.dev/queue", "kai.scheduler/queue", "app"]),
        st.sampled_from(["", "q", "research"]),
        max_size=3,
    ),
    without_queue=st.booleans(),
)
def test_a_managed_pod_meets_every_condition(
    namespace: str, scheduler: str | None, labels: dict[str, str], without_queue: bool
) -> None:
    """Managed ⇔ a served scheduler, not an excluded namespace, and a queue (or the setting)."""
    scope = scope_of(manageWithoutQueue=without_queue)
    the_pod = a_pod(namespace, scheduler=scheduler, labels=labels)
    named = any(labels.get(k) for k in ("runway.dev/queue", "kai.scheduler/queue"))
    expected = (
        scheduler == "runway-scheduler"
        and namespace not in ("kube-system", "runway-system")
        and (named or without_queue)
    )
    assert (unmanaged(scope, the_pod, {}) == "") is expected


def test_a_namespace_mapped_to_an_undeclared_queue_is_a_config_error() -> None:
    from app.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=r"scope.namespaceQueues.team-a.*'reserch'"):
        parse_config(
            {"queues": [{"name": "research"}], "scope": {"namespaceQueues": {"team-a": "reserch"}}}
        )
    parse_config(
        {"queues": [{"name": "research"}], "scope": {"namespaceQueues": {"team-a": "research"}}}
    )
