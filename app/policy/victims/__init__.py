"""The preempt verb's decision: which victims, on which single node, and why (DESIGN §3).

Pure: the caller turns the scheduler's offer and runway's pod cache into plain facts —
``PodFacts`` per pod (with its min-runtime ``Resolution`` already resolved through the queue tree),
``WorkloadFacts`` per workload, ``NodeOffer`` per offered node — and ``decide`` returns a
``Decision``: the reply for kube-scheduler, the victims the async executor must delete (gang
siblings on other nodes included), a record of every rule applied, and counts for metrics.

Rules, per offered node:

0. **One victim, one preemption.** A pod already chosen by another preemption in flight
   (``reserved``: on its node or as an off-node gang sibling) or already terminating is never
   chosen again: it is *awaited* — its room counts, it is neither deleted nor recorded a second
   time, and its gang is not expanded again (that preemption evicts it). A node claimed by a
   preemption in flight of equal or higher priority is dropped; one claimed by a lower priority
   may be taken, as kube-scheduler's nominator lets a higher priority through (the lower claim
   is then ``displaced``: ``app.policy.claims``).
1. An offered victim is dropped while it is **protected** (``now <= start + minRuntime``; no known
   start → not protected). A gang (non-elastic workload) with any protected pod is protected as a
   whole. A protected **elastic** workload may lose pods only while at least ``minAvailable`` of
   its running pods stay (the floor counts every eviction of the candidate decision). Both
   rules are defined once, in ``app.policy.minruntime``. A workload whose **preemption budget**
   is exhausted (``app.policy.budget``: preempted N times within W) is protected exactly the
   same way, whatever its min-runtime.
   A **shielded** pod (``app.policy.shield``: protected namespaces, runway's own pods) is never
   a victim: dropped when offered, never re-selected, and its gang cannot be evicted.
2. Evicting one pod of a gang evicts the whole gang: siblings on the node join the reply, siblings
   elsewhere are reported in ``off_node`` for the executor. A gang with a pod of priority ≥ the
   preemptor's cannot be evicted.
3. When victims were dropped, **re-selection** looks for replacements among the node's other pods
   (lower priority than the preemptor, not protected, not shielded) that free what the
   *preemptor* still lacks there: its requests (and a pod slot) less what the node has free once
   the kept victims, their on-node gang siblings and the awaited pods are gone — counted against
   the node's allocatable and the room of pods nominated there at the preemptor's priority or
   above (``NodeOffer``). Without the allocatable: in each resource the preemptor requests, the
   lesser of its request and what the dropped victims freed (kube-scheduler's dry run showed that
   is enough). Never the dropped victims' own requests in a resource the preemptor does not ask
   for (issue #35: a shielded replica's memory stranded a cpu-only preemptor); only a preemptor
   whose requests are unknown falls back to them. None suffice → the node is dropped.
4. One node wins: fewest claims of lower-priority preemptions taken, fewest PDB violations,
   lowest highest-victim priority, smallest priority sum, fewest victims (off-node siblings
   included; awaited pods are not this preemption's victims), least work lost (the sum over
   victims of the time each pod has run itself, from its own start — not its workload's; an
   unknown start counts 0), then name.

Every pod's record carries a ``Cause`` (a named constant: the counts are bucketed by it) and a
reason an operator reads; a node's place in rule 4 is a ``Rank`` (its fields in ``CRITERIA``).

The package, in three modules that each read alone: ``facts`` (what the caller hands in),
``record`` (what ``decide`` says it did, and why), ``decide`` (the algorithm).
"""

from app.policy.minruntime import Protection, ResolutionLike
from app.policy.victims.decide import CRITERIA, Rank, decide, work_lost
from app.policy.victims.facts import (
    PODS,
    NodeOffer,
    PodFacts,
    Preemptor,
    Rule,
    WorkloadFacts,
    running_since,
)
from app.policy.victims.record import (
    INELIGIBLE,
    Cause,
    Counts,
    Decision,
    NodeRecord,
    VictimRecord,
    action_for,
    bucket,
    protection,
)

__all__ = [
    "CRITERIA",
    "INELIGIBLE",
    "PODS",
    "Cause",
    "Counts",
    "Decision",
    "NodeOffer",
    "NodeRecord",
    "PodFacts",
    "Preemptor",
    "Protection",
    "Rank",
    "ResolutionLike",
    "Rule",
    "VictimRecord",
    "WorkloadFacts",
    "action_for",
    "bucket",
    "decide",
    "protection",
    "running_since",
    "work_lost",
]
