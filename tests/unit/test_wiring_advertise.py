"""Where a replica tells the others to forward ``preempt`` (``wiring.advertise_url``) and the
REST reads of what only the leader holds (``wiring.advertise_rest_url``)."""

from __future__ import annotations

from typing import Any

import pytest

from app.config import parse_config
from app.wiring import advertise_rest_url, advertise_url


@pytest.mark.parametrize(
    ("config", "environ", "expected"),
    [
        ({}, {}, None),  # no address known: no forwarding to this replica
        ({}, {"POD_IP": "10.1.2.3"}, "http://10.1.2.3:8888/scheduler"),
        ({}, {"POD_IP": "fd00::7"}, "http://[fd00::7]:8888/scheduler"),
        (
            {"server": {"port": 9443, "urlPrefix": "/x", "tls": {"certFile": "c", "keyFile": "k"}}},
            {"POD_IP": "10.1.2.3"},
            "https://10.1.2.3:9443/x",
        ),
        (
            {"kubernetes": {"leaderElection": {"advertiseURL": "https://runway-0.runway:8888/s/"}}},
            {"POD_IP": "10.1.2.3"},
            "https://runway-0.runway:8888/s",
        ),
    ],
)
def test_advertise_url(
    config: dict[str, Any], environ: dict[str, str], expected: str | None
) -> None:
    assert advertise_url(parse_config(config), environ) == expected


TLS = {"certFile": "c", "keyFile": "k"}


@pytest.mark.parametrize(
    ("config", "environ", "expected"),
    [
        ({}, {}, None),
        ({}, {"POD_IP": "10.1.2.3"}, "http://10.1.2.3:8888"),  # one port serves everything
        ({}, {"POD_IP": "fd00::7"}, "http://[fd00::7]:8888"),
        # the chart's: HTTPS, the REST API on a port of its own
        (
            {"server": {"restPort": 8889, "tls": TLS}},
            {"POD_IP": "10.1.2.3"},
            "https://10.1.2.3:8889",
        ),
        (
            {
                "kubernetes": {
                    "leaderElection": {"advertiseURL": "https://runway-0.runway:8888/scheduler"}
                }
            },
            {"POD_IP": "10.1.2.3"},
            "https://runway-0.runway:8888",
        ),
        (
            {
                "server": {"restPort": 9000, "urlPrefix": "/s"},
                "kubernetes": {"leaderElection": {"advertiseURL": "https://[fd00::7]:8888/via/s/"}},
            },
            {},
            "https://[fd00::7]:9000/via",
        ),
    ],
)
def test_advertise_rest_url(
    config: dict[str, Any], environ: dict[str, str], expected: str | None
) -> None:
    assert advertise_rest_url(parse_config(config), environ) == expected


@pytest.mark.parametrize("bad", ["runway:8888", "ftp://x", "https://a b/"])
def test_a_bad_advertise_url_names_the_field(bad: str) -> None:
    from app.config import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config({"kubernetes": {"leaderElection": {"advertiseURL": bad}}})
    assert "advertiseURL" in str(err.value)
