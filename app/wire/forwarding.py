"""The replicas' own addition to the extender protocol and the REST API: a follower forwards
kube-scheduler's ``preempt`` call, and the REST reads of what only the leader holds, to the leader
(``app.kube.peers``) and marks them, so the receiver never forwards them again (two replicas
that each believe the other leads would otherwise bounce them)."""

from dataclasses import dataclass, field
from typing import Final

FORWARDED_HEADER: Final = "x-runway-forwarded-by"
"""Set on a forwarded call; its value is the follower's identity in the election."""

SERVED_BY_HEADER: Final = "x-runway-served-by"
"""On every answer of a REST read of what only the leader holds (``app.api.leader_reads``):
``leader``, ``standalone`` (no election) or ``follower (<why it answered itself>)``."""

REPLICA_HEADER: Final = "x-runway-replica"
"""With ``SERVED_BY_HEADER``: the identity (in the election) of the replica that answered."""

RELAYED_BY_HEADER: Final = "x-runway-relayed-by"
"""On a leader's answer a follower relayed: the follower's identity."""

RELAYED_REPLY_HEADERS: Final = (
    "content-type",
    "runway-continue",
    "www-authenticate",
    "retry-after",
    SERVED_BY_HEADER,
    REPLICA_HEADER,
)
"""The leader's answer headers a follower passes on (the rest are the connection's)."""


@dataclass(frozen=True)
class LeaderReply:
    """The leader's answer to a forwarded REST read, as the follower relays it."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    """Only ``RELAYED_REPLY_HEADERS``, lower-cased."""
