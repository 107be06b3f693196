"""The prioritize verb: integer scores 0..10 per offered node (kube-scheduler multiplies them).

Two rules (DESIGN §5, KEP-1282 story 1):

- **Failed pool**: after a PodsReadyTimeout eviction, nodes in the pool (value of the pool label,
  default ``runway.dev/pool``) where the workload last failed readiness score low, so it comes
  back on capacity that freed up elsewhere.
- **Locality**: nodes already running pods of the workload get a bonus, so a gang lands together.

Formula, per node::

    pool  = 0 if the node's pool label value is one of the failed pools else 10
    local = LOCALITY_BONUS (2) if the node runs a pod of the workload else 0
    score = pool + local                               when no offered node is local
    score = round((pool + local) * 10 / (10 + 2))      otherwise (normalised into 0..10)

So without locality the scores are exactly 0 (failed pool) and 10 (elsewhere); with it they are
0 / 2 (failed pool, without / with a local pod) and 8 / 10 (elsewhere). A node without labels
(node-cache-capable mode without a node cache) is never in a failed pool.

When every node would score 10 (no failed pool, no locality: ``ScoringInput.uniform``) the verb
answers the empty list instead: kube-scheduler adds an extender's scores to the nodes' totals, so
a uniform list and no list rank the nodes alike, and the empty one spares it decoding an entry per
node (``app/api/extender.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from app.config.queues import DEFAULT_POOL_LABEL
from app.model import Pod

MAX_SCORE = 10
MIN_SCORE = 0
LOCALITY_BONUS = 2


@dataclass(frozen=True)
class NodeFacts:
    """What scoring may know about a node: its name and, when known, its labels."""

    name: str
    labels: dict[str, str] | None = None


@dataclass(frozen=True)
class ScoringInput:
    """What scoring knows about the pod's workload, built by the caller from the cache."""

    failed_pools: Collection[str] = ()
    """Pool label values where the workload last failed readiness (the eviction record)."""
    workload_nodes: Collection[str] = field(default_factory=frozenset)
    """Nodes already running pods of the workload."""
    pool_label: str = DEFAULT_POOL_LABEL

    @property
    def uniform(self) -> bool:
        """No failed pool and no locality: every node scores MAX_SCORE."""
        return not self.failed_pools and not self.workload_nodes


def _pool_score(node: NodeFacts, facts: ScoringInput) -> int:
    if not facts.failed_pools or not node.labels:
        return MAX_SCORE
    return MIN_SCORE if node.labels.get(facts.pool_label) in facts.failed_pools else MAX_SCORE


def score_nodes(
    pod: Pod, nodes: Sequence[NodeFacts], facts: ScoringInput | None = None
) -> list[int]:
    """Score each node, in order (see the module docstring for the formula)."""
    del pod  # the facts carry the workload's history
    if facts is None:
        return [MAX_SCORE for _ in nodes]
    local = [n.name in facts.workload_nodes for n in nodes]
    raw = [
        _pool_score(n, facts) + (LOCALITY_BONUS if here else 0)
        for n, here in zip(nodes, local, strict=True)
    ]
    if not any(local):
        return raw
    top = MAX_SCORE + LOCALITY_BONUS
    return [(r * MAX_SCORE + top // 2) // top for r in raw]
