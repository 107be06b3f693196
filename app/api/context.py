"""What the HTTP layer reads: the parts ``app.wiring`` hands it, one object per app."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from fastapi import Request

from app.clock import Clock
from app.config import RunwayConfig
from app.policy.queues import QueueTree
from app.state.bypass import BindWatch
from app.state.cache import ClusterCache
from app.state.decisions import DecisionLog
from app.state.gate import GateBook
from app.state.preemption import PreemptDecider
from app.state.records import RecordBook
from app.state.requeue import RequeueView
from app.tasks.ports import EventSink
from app.tasks.preemption import PreemptionExecutor
from app.wire import ArgsReader
from app.wire.forwarding import LeaderReply


class ClusterInfo(Protocol):
    """The connection, readiness and leadership facts the REST API reports."""

    @property
    def connected(self) -> bool:
        """Whether runway talks to an API server."""

    @property
    def ready(self) -> bool:
        """The caches are synced."""

    @property
    def not_ready(self) -> str | None:
        """Why runway is not ready (``/readyz``'s answer); None when it is."""

    @property
    def leadership(self) -> bool | None:
        """Whether this replica leads; None without an election."""

    @property
    def identity(self) -> str | None:
        """This replica's identity in the election."""

    @property
    def queue_origin(self) -> str:
        """Where the queue tree comes from now: ``file`` or ``kai``."""

    @property
    def queue_error(self) -> str | None:
        """Why the last change of the KAI Queue objects was refused; None when current."""

    @property
    def jobs_readable(self) -> bool | None:
        """Whether Jobs' sizes are read (False: refused; None: no answer yet, or no cluster)."""

    @property
    def job_count(self) -> int:
        """Jobs whose size runway knows."""

    @property
    def pod_resource_version(self) -> str | None:
        """The pod reflector's resourceVersion."""

    @property
    def node_resource_version(self) -> str | None:
        """The node reflector's resourceVersion."""


class Forwarder(Protocol):
    """Relays a follower's verb call to the leader (``app.kube.peers.LeaderForwarder``)."""

    def leader_known(self) -> bool:
        """Whether a call would be forwarded now."""

    async def forward(self, verb: str, body: bytes) -> bytes | None:
        """The leader's reply to ``verb`` with ``body``; None when it could not be had."""


class LeaderReads(Protocol):
    """Asks the leader for a REST read of what only it holds (``app.kube.peers.LeaderReader``)."""

    async def read(self, target: str, credentials: Mapping[str, str]) -> LeaderReply | str:
        """The leader's answer to ``GET target`` with the caller's ``credentials``, or why
        there is none."""


@dataclass(frozen=True)
class ApiContext:
    """The parts handlers use (read-only but for the executor, which the verbs feed)."""

    config: RunwayConfig
    clock: Clock
    cache: ClusterCache
    queues: QueueTree
    gate: GateBook
    records: RecordBook
    requeue: RequeueView
    decider: PreemptDecider
    decisions: DecisionLog
    executor: PreemptionExecutor
    cluster: ClusterInfo
    events: EventSink
    forwarder: Forwarder | None = None
    """A follower forwards ``preempt`` to the leader through it (None: no election)."""
    reads: LeaderReads | None = None
    """A follower asks the leader for the REST reads of what only the leader holds through it
    (``app.api.leader_reads``; None: no election)."""
    bypass: BindWatch | None = None
    """Told of every filter call: binds of managed pods nobody filtered mean kube-scheduler
    skips runway (``state.bypass``)."""
    read_args: ArgsReader = field(default_factory=ArgsReader)
    """filter's and prioritize's request decoder (prioritize often repeats filter's body)."""


def context(request: Request) -> ApiContext:
    """The app's context (set by ``app.server.create_app``)."""
    ctx: ApiContext = request.app.state.context
    return ctx
