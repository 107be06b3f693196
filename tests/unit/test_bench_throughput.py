"""``bench/throughput.py``'s pure parts: the scheduler stanza each configuration is measured with
(``scheduler_config``), and the comparison with kube-scheduler alone that puts runway's
filter-only ratio beside the Go floor's (``against_stock``, ``floor_line``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.throughput import (
    FILTER_ONLY,
    FILTER_ONLY_BAR,
    KINDS,
    Run,
    against_stock,
    floor_line,
    scheduler_config,
)


@pytest.mark.parametrize(
    ("kind", "verbs", "managed"),
    [
        ("stock", None, False),
        ("go", {"filterVerb", "prioritizeVerb"}, False),
        ("go-floor", {"filterVerb"}, False),
        ("runway-filter", {"filterVerb"}, False),
        ("runway", {"filterVerb", "prioritizeVerb"}, False),
        ("runway-managed", {"filterVerb"}, True),
        ("runway-base", {"filterVerb", "prioritizeVerb"}, False),
    ],
)
@pytest.mark.parametrize(("release", "api"), [("1.20.2", "v1beta1"), ("1.37.2", "v1")])
def test_scheduler_config_per_kind(
    tmp_path: Path, kind: str, verbs: set[str] | None, managed: bool, release: str, api: str
) -> None:
    path = scheduler_config(tmp_path / "s.yaml", kind, "http://127.0.0.1:9", release, "cache", "p")
    stanza = yaml.safe_load(path.read_text())
    assert stanza["apiVersion"] == f"kubescheduler.config.k8s.io/{api}"
    assert stanza["profiles"] == [{"schedulerName": "p"}]
    assert stanza["clientConnection"] == {"qps": 1000, "burst": 1000}
    if verbs is None:  # kube-scheduler alone
        assert "extenders" not in stanza
        return
    [extender] = stanza["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:9/scheduler"
    assert extender["nodeCacheCapable"] is True
    assert {k for k in ("filterVerb", "prioritizeVerb") if k in extender} == verbs
    assert ("managedResources" in extender) is managed


def test_the_filter_only_kinds_are_measured_kinds() -> None:
    assert set(KINDS) >= FILTER_ONLY


def run(kind: str, rnd: int, pods_per_s: float) -> Run:
    return Run(
        release="1.37.2",
        extender=kind,
        mode="cache",
        round=rnd,
        pods=1000,
        seconds=1000 / pods_per_s,
        create_seconds=1.0,
        pods_per_s=pods_per_s,
        unschedulable=0,
        errors=0,
        extender_cpu_s=1.0,
        scheduler_cpu_s=2.0,
    )


def rates(**by_kind: list[float]) -> list[Run]:
    """Runs per kind (``go_floor`` for ``go-floor``), one per round in order."""
    return [
        run(kind.replace("_", "-"), rnd, rate)
        for kind, rounds in by_kind.items()
        for rnd, rate in enumerate(rounds)
    ]


@pytest.mark.parametrize(
    ("runs", "met", "mine", "floor", "says"),
    [
        # the floor itself under the bar: the call is the gap
        (
            rates(stock=[400, 300], go_floor=[260, 195], runway_filter=[248, 186]),
            False,
            0.62,
            0.65,
            "the floor is under the 0.9x bar too",
        ),
        # the floor over the bar, runway under it: runway's own cost
        (
            rates(stock=[400], go_floor=[380], runway_filter=[300]),
            False,
            0.75,
            0.95,
            "the rest of the gap is runway's own",
        ),
        (
            rates(stock=[400], go_floor=[396], runway_filter=[380]),
            True,
            0.95,
            0.99,
            "runway meets the 0.9x bar",
        ),
        # no floor measured (no Go): no line, the bar as before
        (rates(stock=[400], runway_filter=[380]), True, 0.95, None, None),
    ],
)
def test_against_stock_puts_the_floor_beside_filter_only(
    runs: list[Run], met: bool, mine: float, floor: float | None, says: str | None
) -> None:
    four_way = against_stock(runs)
    assert four_way is not None
    assert four_way["met"] is met  # the bar is runway's alone: the floor never decides it
    assert four_way["filter_only"] == pytest.approx(mine)
    line = floor_line(four_way)
    if floor is None:
        assert four_way["floor"] is None
        assert line is None
        return
    assert four_way["floor"] == pytest.approx(floor)
    row: dict[str, Any] = four_way["rows"]["go-floor"]
    assert row["ratio_to_stock"] == pytest.approx(floor)
    assert row["scheduler_cpu_per_1000"] == pytest.approx(2.0)
    assert line is not None
    assert line.startswith(
        f"runway filter-only {mine:.2f}x stock; the Go floor (bench/go_extender) {floor:.2f}x;"
    )
    assert says is not None and says in line
    assert str(FILTER_ONLY_BAR) in line
