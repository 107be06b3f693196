"""The preempt verb's decision: which offered victims, on which single node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.model import Pod


@dataclass(frozen=True)
class Offer:
    """The victims kube-scheduler offers on one node."""

    uids: Sequence[str]
    pdb_violations: int = 0


@dataclass(frozen=True)
class PreemptDecision:
    """The answer: per node, the victim UIDs and the PDB violation count. Empty = veto."""

    nodes: Mapping[str, tuple[Sequence[str], int]]


def choose_victims(preemptor: Pod, offers: Mapping[str, Offer]) -> PreemptDecision:
    """Choose the victims to return.

    Min-runtime protection, gang expansion and the single-node choice (SPEC §3) plug in here;
    until then the offer is returned unchanged.
    """
    del preemptor
    return PreemptDecision(
        nodes={node: (list(offer.uids), offer.pdb_violations) for node, offer in offers.items()}
    )
