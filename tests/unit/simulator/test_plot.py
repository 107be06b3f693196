"""--plot: a PNG with matplotlib, a clear error without it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.simulator.engine import simulate
from app.simulator.plot import PlotUnavailable, plot
from app.simulator.report import summarize
from tests.unit.simulator.helpers import config, cpu_nodes, trace_of


def results() -> list[dict[str, object]]:
    trace = trace_of(
        cpu_nodes(1),
        {"name": "low", "arrival": 0, "duration": 5000, "requests": {"cpu": "4"}},
        {"name": "high", "arrival": 4000, "duration": 50, "requests": {"cpu": "4"}, "priority": 1},
    )
    return [summarize("base", simulate(config(), trace))]


def test_without_matplotlib_the_error_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailable, match=r"pip install 'runway\[plot\]'"):
        plot(results(), tmp_path / "out.png")
    assert not (tmp_path / "out.png").exists()


def test_with_matplotlib_a_png_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "out.png"
    plot(results(), out, title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
