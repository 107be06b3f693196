"""Noticing that kube-scheduler schedules runway's pods without calling runway (the operator
issue: with a wrong CA and ``ignorable: true`` kube-scheduler logged "Skipping extender" and
bound pods past a 60 s min-runtime, while runway, up and scraped, said nothing).

Every replica counts the binds it sees of pods it manages (a pending pod of a scheduler runway
serves that got a node), by whether its own filter was asked about that pod
(``runway_bindings_total{filtered}``). kube-scheduler calls one replica per cycle, so one
replica's ``no`` means little; across replicas, binds with no ``yes`` anywhere mean runway is
skipped — the chart's alert ``RunwayBypassed`` sums over replicas. A replica that sees such
binds while its filter has not been called at all for ``quiet`` seconds also logs it, with the
likely causes and where to look (rate-limited)."""

from __future__ import annotations

from collections import OrderedDict

from app import metrics
from app.clock import Clock
from app.logs import get_logger
from app.model import Pod
from app.state.cache import CacheEvent, ClusterCache

log = get_logger("state.bypass")

FILTERED_KEPT = 50_000
"""Pods whose filter call a replica remembers (the newest)."""

LIKELY_CAUSES = (
    "kube-scheduler's log says which: 'x509: certificate signed by unknown authority' (the "
    "stanza's tlsConfig.caData is not runway's CA: after a CA rotation, give it the new CA), "
    "'connection refused' or 'no such host' (urlPrefix names no runway Service or port), "
    "'context deadline exceeded' (httpTimeout shorter than runway's answers; runway's "
    "runway_extender_request_duration_seconds says how long they take); with ignorable: true "
    "each of these skips runway silently, with ignorable: false it makes every pod "
    "unschedulable"
)


class BindWatch:
    """Counts the binds of managed pods by whether this replica filtered them; warns when its
    filter is silent while such pods bind."""

    def __init__(self, cache: ClusterCache, clock: Clock, *, quiet: float = 300.0) -> None:
        self.cache = cache
        self.clock = clock
        self.quiet = quiet
        self._filtered: OrderedDict[str, None] = OrderedDict()
        self._last_filter: float | None = None
        self._started = clock.now()
        self._warned_at: float | None = None
        self.unfiltered = 0
        """Binds of managed pods this replica did not filter, since it started."""
        self._yes = metrics.BINDINGS.labels("yes")
        self._no = metrics.BINDINGS.labels("no")
        cache.subscribe(self._on_change)

    def filtered(self, uid: str) -> None:
        """The filter verb was called about pod ``uid`` (the hot path: a dict insert)."""
        self._last_filter = self.clock.now()
        filtered = self._filtered
        filtered[uid] = None
        if len(filtered) > FILTERED_KEPT:
            filtered.popitem(last=False)

    def _on_change(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        old: Pod | None = event.old
        new: Pod | None = event.new
        if event.kind != "pod" or old is None or new is None:
            return
        if old.spec.nodeName or not new.spec.nodeName or not self.cache.is_managed(new):
            return
        if self._filtered.pop(new.metadata.uid, 0) is None:
            self._yes.inc()
            return
        self._no.inc()
        self.unfiltered += 1
        now = self.clock.now()
        since = self._last_filter if self._last_filter is not None else self._started
        if now - since < self.quiet:
            return
        if self._warned_at is not None and now - self._warned_at < self.quiet:
            return
        self._warned_at = now
        log.warning(
            "pods runway manages are being bound, but kube-scheduler has not called this "
            "replica's filter; if no replica is called (alert RunwayBypassed), kube-scheduler "
            "is skipping runway and its rules do not apply",
            pod=new.key,
            node=new.spec.nodeName,
            silent_for_s=round(now - since),
            unfiltered_binds=self.unfiltered,
            likely_causes=LIKELY_CAUSES,
        )
