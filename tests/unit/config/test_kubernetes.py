"""The ``kubernetes:`` config section: defaults, durations, and ordering errors that name fields."""

from __future__ import annotations

import pytest

from app.config import ConfigError, parse_config


def test_defaults_follow_client_go() -> None:
    k = parse_config({}).kubernetes
    assert k.kubeconfig is None and k.qps is None
    assert (k.request_timeout, k.retry_timeout, k.page_size) == (30.0, 30.0, 500)
    le = k.leader_election
    assert le.enable and le.lease_name == "runway" and le.lease_namespace is None
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)


def test_durations_and_camel_case() -> None:
    k = parse_config(
        {
            "kubernetes": {
                "kubeconfig": "/etc/runway/kubeconfig",
                "requestTimeout": "5s",
                "retryTimeout": "1m",
                "leaderElection": {
                    "leaseDuration": "30s",
                    "renewDeadline": "20s",
                    "retryPeriod": "500ms",
                    "leaseNamespace": "kube-system",
                },
            }
        }
    ).kubernetes
    assert k.request_timeout == 5 and k.retry_timeout == 60
    assert k.leader_election.retry_period == 0.5
    assert k.leader_election.lease_namespace == "kube-system"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"leaderElection": {"renewDeadline": "15s"}},
            "renewDeadline must be shorter than leaseDuration",
        ),
        (
            {"leaderElection": {"retryPeriod": "10s"}},
            "retryPeriod must be shorter than renewDeadline",
        ),
        ({"requestTimeout": "0s"}, "kubernetes.requestTimeout"),
        ({"qps": -1}, "kubernetes.qps"),
        ({"kubeConfig": "/x"}, "kubernetes.kubeConfig: unknown field"),
    ],
)
def test_errors_name_the_field(section: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"kubernetes": section})
