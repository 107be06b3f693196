"""What runway does for kube-scheduler, per release (``policy.releases``, DESIGN §1.1): each
decision against the release where kube-scheduler changed (read in its ``pkg/scheduler``)."""

from __future__ import annotations

import pytest

from app.api.extender import scheduler_reply
from app.clock import ManualClock
from app.config import parse_config
from app.policy.releases import (
    TAKEOVER_MEASURED,
    UNKNOWN,
    VersionError,
    parse_version,
    release_of,
)
from app.wiring import build


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("v1.20.2", (1, 20, 2)),
        ("1.34", (1, 34, 0)),
        ("v1.38.0-alpha.1+abc123", (1, 38, 0)),
        (" v1.37.2 ", (1, 37, 2)),
    ],
)
def test_versions_as_the_api_server_writes_them(text: str, version: tuple[int, int, int]) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize("text", ["", "latest", "one.two", "x1.20"])
def test_an_unreadable_version_names_itself(text: str) -> None:
    with pytest.raises(VersionError, match="not a Kubernetes version"):
        parse_version(text)


@pytest.mark.parametrize(
    ("version", "config_api", "zero_victims", "flush", "gates", "nominates", "takeover"),
    [
        ("1.20.2", "v1beta1", True, 60.0, False, False, True),
        ("1.24.0", "v1beta1", False, 300.0, False, False, True),
        ("1.25.0", "v1", False, 300.0, False, False, True),
        ("1.30.0", "v1", False, 300.0, True, False, True),
        ("1.31.9", "v1", False, 300.0, True, False, True),
        ("1.32.9", "v1", False, 300.0, True, False, True),
        # from 1.33 the scheduler's own preemption is asynchronous; measured on 1.34 and 1.37,
        # takeover loses the storm to the scheduler executing (bench/RESULTS.md §3)
        ("1.33.0", "v1", False, 300.0, True, False, False),
        ("1.34.4", "v1", False, 300.0, True, False, False),
        ("1.35.4", "v1", False, 300.0, True, True, False),
        ("1.37.2", "v1", False, 300.0, True, True, False),
        ("1.38.0", "v1", False, 300.0, True, True, False),
    ],
)
def test_decisions_per_release(
    version: str,
    config_api: str,
    zero_victims: bool,
    flush: float,
    gates: bool,
    nominates: bool,
    takeover: bool,
) -> None:
    release = release_of(version, "config")
    assert release.config_api == f"kubescheduler.config.k8s.io/{config_api}"
    assert release.zero_victim_nodes is zero_victims
    assert release.flush_seconds == flush
    assert release.scheduling_gates is gates
    assert release.scheduler_nominates is nominates
    assert release.takeover("auto") is takeover
    # an explicit setting wins on every release
    assert release.takeover(True) is True and release.takeover(False) is False
    # from 1.32 QueueingHints: a touch does not re-queue a pod NodeResourcesFit rejected
    assert release.touch_requeues is (release.minor < (1, 32))


def test_the_auto_preemption_mode_is_the_measured_one() -> None:
    """``auto`` on a measured release is what its storm measured; elsewhere, what the measured
    releases on its side of 1.33 (in-tree asynchronous preemption) measured."""
    for minor, takeover_won in TAKEOVER_MEASURED.items():
        release = release_of(f"{minor[0]}.{minor[1]}.0", "config")
        assert release.takeover_measured and release.takeover("auto") is takeover_won
    sides = {
        in_tree: {won for minor, won in TAKEOVER_MEASURED.items() if (minor >= (1, 33)) is in_tree}
        for in_tree in (False, True)
    }
    assert sides == {False: {True}, True: {False}}, "a side of 1.33 measured both ways"


def test_what_an_operator_should_know_is_said_per_release() -> None:
    assert release_of("1.20.2", "apiserver").notes() == ()
    assert release_of("1.34.4", "apiserver").notes() == ()
    assert "not measured" not in " ".join(release_of("1.37.2", "apiserver").notes())
    unmeasured = " ".join(release_of("1.35.4", "apiserver").notes())
    assert "not measured on 1.35.4" in unmeasured and "scheduler-executes" in unmeasured
    assert "chooses takeover" in " ".join(release_of("1.30.0", "apiserver").notes())
    notes = " ".join(release_of("1.36.1", "apiserver").notes())
    assert "workload-aware preemption" in notes and "nominatedNodeName" in notes
    assert "older than runway supports" in " ".join(release_of("1.19.0", "config").notes())


def test_a_node_with_no_victims_is_never_named_to_a_release_that_refuses_it() -> None:
    reply = {"n1": (["uid-a"], 0), "n2": ([], 0)}
    assert scheduler_reply(reply, release_of("1.20.2", "config")) == reply
    assert scheduler_reply(reply, release_of("1.22.0", "config")) == {"n1": (["uid-a"], 0)}
    assert scheduler_reply({"n2": ([], 0)}, release_of("1.37.2", "config")) == {}


async def test_the_configured_release_decides_the_preemption_mode() -> None:
    runway = build(
        parse_config({"kubernetes": {"schedulerVersion": "v1.37.2"}}), clock=ManualClock(0.0)
    )
    release = await runway.detect_release()
    assert release.text == "1.37.2" and release.source == "config"
    # auto on 1.37: the scheduler executes (measured: takeover loses the storm there)
    assert runway.executor.takeover is False and runway.decider.release is release
    old = build(parse_config({"kubernetes": {"schedulerVersion": "v1.20.2"}}), clock=ManualClock(0))
    await old.detect_release()
    assert old.executor.takeover is True
    fixed = build(
        parse_config({"kubernetes": {"schedulerVersion": "1.37"}, "preemption": {"async": True}}),
        clock=ManualClock(0.0),
    )
    await fixed.detect_release()
    assert fixed.executor.takeover is True
    embedded = build(parse_config({}), clock=ManualClock(0.0))
    assert await embedded.detect_release() is UNKNOWN
    assert embedded.executor.takeover is True


def test_a_bad_scheduler_version_is_a_config_error() -> None:
    from app.config import ConfigError

    with pytest.raises(ConfigError, match="schedulerVersion"):
        parse_config({"kubernetes": {"schedulerVersion": "latest"}})
