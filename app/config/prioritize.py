"""``prioritize:`` — the node preferences runway's ``prioritize`` verb expresses, and whether
kube-scheduler needs to call it at all.

Every extender call costs kube-scheduler a round trip and the encoding of the pod and the node
names (issue #29: an extender doing nothing costs the scheduler 40 % of its throughput). The
``prioritize`` verb only has something to say when a preference below is on; otherwise it would
answer an empty list (every node alike) on every cycle, and the scheduler's stanza should not name
``prioritizeVerb`` at all (``needed``; ``check-config`` says so, the chart renders it so).
"""

from __future__ import annotations

from pydantic import Field

from app.config.section import Section


class PrioritizeConfig(Section):
    """Node preferences (scores) runway gives kube-scheduler."""

    pool_preference: bool | None = Field(
        None,
        description="After a PodsReadyTimeout eviction, score low the nodes of the pool "
        "(`minRuntime.poolLabel`) where the workload failed readiness, so it comes back on "
        "capacity that freed up elsewhere (KEP-1282 story 1). Unset = on exactly when "
        "`waitForPodsReady.enable` (it only has failed pools to avoid then).",
    )
    locality: bool = Field(
        False,
        description="Score higher the nodes already running pods of the same workload, so a "
        "gang lands together. Off by default: kube-scheduler's own spreading and affinity rules "
        "usually decide placement, and on it costs a `prioritize` call per scheduling cycle.",
    )

    def pool_preference_on(self, pods_ready_enabled: bool) -> bool:
        """Whether the failed-pool preference applies (unset: with waitForPodsReady)."""
        return pods_ready_enabled if self.pool_preference is None else self.pool_preference

    def needed(self, pods_ready_enabled: bool) -> list[str]:
        """Why kube-scheduler must call ``prioritize`` (empty: it need not; leave
        ``prioritizeVerb`` out of its stanza)."""
        why = []
        if self.pool_preference_on(pods_ready_enabled):
            why.append(
                "prioritize.poolPreference"
                + (
                    " (unset: on with waitForPodsReady.enable)"
                    if self.pool_preference is None
                    else ""
                )
            )
        if self.locality:
            why.append("prioritize.locality")
        return why
