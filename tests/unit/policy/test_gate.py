"""Which nominations runway may clear (``policy.gate.may_clear_nomination``, DESIGN §1.1):
only those it wrote, and from 1.35 none of a preemptor whose gate opened (it may be binding:
kube-scheduler writes the nomination then)."""

from __future__ import annotations

import pytest

from app.model.gate import GateEntry, PodRef
from app.policy.gate import may_clear_nomination

ENTRY = GateEntry(PodRef("uid-p", "ns", "p"), "n1", (), since=0.0, deadline=60.0)


@pytest.mark.parametrize(
    ("case", "entry", "node", "gate_open", "scheduler_nominates", "clear"),
    [
        ("runway's preemptor, its node", ENTRY, "n1", False, False, True),
        ("runway's preemptor, gate open, 1.20", ENTRY, "n1", True, False, True),
        ("runway's preemptor, still held, 1.35+", ENTRY, "n1", False, True, True),
        ("runway's preemptor, gate open, 1.35+: may be binding", ENTRY, "n1", True, True, False),
        ("runway's preemptor nominated elsewhere", ENTRY, "n2", False, False, False),
        ("a nomination kube-scheduler wrote", None, "n1", False, False, False),
        ("kube-scheduler's, 1.35+", None, "n1", True, True, False),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_runway_clears_only_nominations_it_wrote(
    case: str,
    entry: GateEntry | None,
    node: str,
    gate_open: bool,
    scheduler_nominates: bool,
    clear: bool,
) -> None:
    assert may_clear_nomination(entry, node, gate_open, scheduler_nominates) is clear, case
