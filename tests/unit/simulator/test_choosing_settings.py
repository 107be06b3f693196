"""README "Choosing settings": its commands name the configs and knobs this test replays, and on
a smaller trace of the same kind (short jobs, most of them high priority) each protection cuts
the work lost versus ``baseline``, as the README's worked example says."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import load_config
from app.simulator.engine import SimOptions, simulate
from app.simulator.generate import GenerateSpec, generate
from app.simulator.report import summarize

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ("baseline", "minruntime-30m", "budget", "both-30m")
KNOBS = ("--duration-median 900", "--duration-sigma 0.5", "--high-fraction 0.6")
SHORT_JOBS = GenerateSpec(
    workloads=400, nodes=40, duration_median=900.0, duration_sigma=0.5, high_fraction=0.6
)


def section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Choosing settings")
    return text[start : text.index("\n## ", start + 1)]


def test_the_example_names_these_configs_and_knobs() -> None:
    text = section()
    assert "docs/simulator/{" + ",".join(CONFIGS) + "}.yaml" in text
    for knob in KNOBS:
        assert knob in text
    assert "(docs/simulator/choosing-settings.png)" in text
    assert (ROOT / "docs/simulator/choosing-settings.png").is_file()


@pytest.mark.parametrize("name", CONFIGS)
def test_the_configs_load(name: str) -> None:
    load_config(str(ROOT / "docs/simulator" / f"{name}.yaml"))


def test_each_protection_cuts_lost_work_on_short_mostly_high_priority_jobs() -> None:
    trace = generate(SHORT_JOBS, seed=1)
    lost = {}
    for name in CONFIGS:
        config = load_config(str(ROOT / "docs/simulator" / f"{name}.yaml"))
        outcome = simulate(config, trace, options=SimOptions(seed=1))
        lost[name] = summarize(name, outcome)["workLostSeconds"]
    assert lost["minruntime-30m"] < lost["baseline"], lost
    assert lost["budget"] < lost["baseline"], lost
    assert lost["both-30m"] < min(lost["minruntime-30m"], lost["budget"]), lost
