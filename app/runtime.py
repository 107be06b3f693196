"""What a running runway holds: config, clock and (as they land) cache, gate and tasks.

Built once by ``app.server`` and reached by handlers through ``request.app.state.runtime``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from app.clock import Clock, SystemClock
from app.config import RunwayConfig
from app.kube.client import KubeClient
from app.kube.leader import LeaderElector
from app.kube.sync import ClusterSync
from app.policy.queues import QueueTree
from app.state.cache import ClusterCache
from app.state.decisions import DecisionLog
from app.state.gate import GateBook
from app.tasks.preemption import PreemptionExecutor

if TYPE_CHECKING:
    from app.kube.records import EvictionRecordStore
    from app.state.requeue import RequeueIndex
    from app.tasks.podsready import PodsReadyEvictor
    from app.tasks.wakeup import RequeueWaker


@dataclass
class Runtime:
    """The service's long-lived parts, shared by every request."""

    config: RunwayConfig
    clock: Clock = field(default_factory=SystemClock)
    ready: bool = True
    """False until the caches are synced (always true on the embedded default)."""
    gate: GateBook = field(default_factory=GateBook)
    """Preemptors held while their preemption is in flight."""
    preemptions: PreemptionExecutor | None = None
    """Runs preemption API calls; built in the app's lifespan (it needs the event loop)."""
    decisions: DecisionLog = field(default_factory=DecisionLog)
    """The last preempt decisions (``preemption.decisionHistory`` of them)."""
    kube: KubeClient | None = None
    """The API server client; None on the embedded default (no cluster: calls are dry-run)."""
    cache: ClusterCache = field(default_factory=ClusterCache)
    """Pods and nodes from list+watch (empty on the embedded default)."""
    sync: ClusterSync | None = None
    """The reflectors and leader election feeding ``cache`` (None without a cluster)."""
    records: EvictionRecordStore | None = None
    """Eviction records (SPEC §5); ``app.state.requeue.records`` builds an in-memory one."""
    requeue: RequeueIndex | None = None
    """Per-cache-generation memos of the requeue rules (``app.state.requeue.index``)."""
    evictor: PodsReadyEvictor | None = None
    """The PodsReady evictor task (started in the app's lifespan; evicts on the leader only)."""
    waker: RequeueWaker | None = None
    """Touches pending pods whose filter hold ended (app's lifespan; leader only)."""

    @property
    def leader(self) -> LeaderElector | None:
        """The Lease elector (None without a cluster or with leader election off)."""
        return self.sync.leader if self.sync is not None else None

    @property
    def is_leader(self) -> bool:
        """Whether this replica may run leader-only work (evictions). True without election."""
        leader = self.leader
        return leader.is_leader if leader is not None else True

    @cached_property
    def queues(self) -> QueueTree:
        """The queue tree built from ``config.queues`` (once, on first use)."""
        return QueueTree.from_config(self.config.queues)
