"""Which nominations runway may clear (``policy.gate.may_clear_nomination``, DESIGN §1.1):
only those it wrote, and from 1.35 none of a preemptor whose gate opened (it may be binding:
kube-scheduler writes the nomination then). Which victims kube-scheduler left running when it
asks again in scheduler-executes mode (``policy.gate.left_by_the_scheduler``, DESIGN §4.4)."""

from __future__ import annotations

import pytest

from app.model.gate import GateEntry, PodRef
from app.policy.gate import VictimState, left_by_the_scheduler, may_clear_nomination

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


A, B = PodRef("uid-a", "ns", "a"), PodRef("uid-b", "ns", "b")
PRESENT, TERMINATING, GONE = VictimState.PRESENT, VictimState.TERMINATING, VictimState.GONE
UNKNOWN = VictimState.UNKNOWN


@pytest.mark.parametrize(
    ("case", "states", "nodes", "reserved", "left"),
    [
        ("every victim deleted", {"a": TERMINATING, "b": GONE}, {}, (), ()),
        ("one DELETE refused", {"a": PRESENT, "b": TERMINATING}, {}, (), (A,)),
        ("none deleted (the refused one first)", {"a": PRESENT, "b": PRESENT}, {}, (), (A, B)),
        ("another preemption deletes it (awaited)", {"a": PRESENT}, {}, ("uid-a",), ()),
        ("a gang sibling on another node (runway's)", {"a": PRESENT}, {"a": "n2"}, (), ()),
        ("no cache: nothing is known", {"a": UNKNOWN, "b": UNKNOWN}, {}, (), ()),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_victims_left_by_the_scheduler(
    case: str,
    states: dict[str, VictimState],
    nodes: dict[str, str],
    reserved: tuple[str, ...],
    left: tuple[PodRef, ...],
) -> None:
    entry = GateEntry(PodRef("uid-p", "ns", "p"), "n1", (A, B), since=0.0, deadline=60.0)
    found = left_by_the_scheduler(
        entry,
        lambda uid: states.get(uid.removeprefix("uid-"), GONE),
        lambda uid: nodes.get(uid.removeprefix("uid-"), "n1"),
        reserved,
    )
    assert found == left, case
