"""The replicas' own addition to the extender protocol: a follower forwards kube-scheduler's
``preempt`` call to the leader (``app.kube.peers``) and marks it, so the receiver never forwards
it again (two replicas that each believe the other leads would otherwise bounce it)."""

from typing import Final

FORWARDED_HEADER: Final = "x-runway-forwarded-by"
"""Set on a forwarded call; its value is the follower's identity in the election."""
