"""A workload's life as persisted facts (DESIGN §2.3), and runway 0.1's annotations for them.

Kept in the workload's WorkloadRecord, ``status.life`` (``app.model.record``), next to its
eviction record; written by the leader (``app.tasks.lifecycle``) when a fact first becomes known
or is reset by a full eviction. Times are Unix seconds here; persisted, RFC 3339 in UTC with
second precision (``Life.persisted``: the facts as a write reads back).

Runway 0.1 kept the facts in annotations on the workload's controller owner (or on each pod of a
bare-pod workload); they are never read as state now (``app.model.record.RETIRED_ANNOTATIONS``).
The retired keys:

================================  ===============================================================
annotation                        meaning
================================  ===============================================================
``runway.dev/workload-created``   the owner's creationTimestamp (a bare-pod workload: its
                                  earliest pod's, at first sight); the ``Creation`` order
``runway.dev/workload-admitted``  first bind of any of its pods since created or last fully
                                  evicted; waitForPodsReady's ``timeout`` counts from here
``runway.dev/workload-started``   its minAvailable-th bind; min-runtime counts from here
``runway.dev/workload-size``      the most members the workload has had (a count): PodsReady's
                                  target when neither minAvailable nor the owner's parallelism
                                  says it
================================  ===============================================================

*Members* (pods not ``Failed`` and not being deleted) are a rule over the live pods, not a stored
value. Nothing reads or writes these annotations any more (``migrate-annotations`` imports only
the eviction record: ``app.model.eviction``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from app.model.timestamps import format_time, parse_time

PREFIX: Final = "runway.dev/workload-"
CREATED_KEY: Final = PREFIX + "created"
ADMITTED_KEY: Final = PREFIX + "admitted"
STARTED_KEY: Final = PREFIX + "started"
SIZE_KEY: Final = PREFIX + "size"
KEYS: Final = (CREATED_KEY, ADMITTED_KEY, STARTED_KEY, SIZE_KEY)
MAX_SIZE: Final = 1_000_000
"""A larger size is not one runway wrote (tenants write annotations too): ignored."""


@dataclass(frozen=True)
class Life:
    """The facts of a workload's life (Unix seconds; None = not known / not yet / reset)."""

    created: float | None = None
    admitted: float | None = None
    started: float | None = None
    size: int | None = None
    """The most members the workload has had (KEP-349's PodsReady counts against the workload's
    size, not the pods alive now: a failed pod not yet replaced leaves it not ready)."""
    ready: float | None = None
    """When the workload first reached PodsReady since it was admitted (KEP-349: from then on a
    loss of readiness runs ``recoveryTimeout``, not ``timeout``). Reset with admitted."""
    lost: float | None = None
    """When PodsReady last went false after it had been reached (Kueue's ``PodsReady=False``,
    reason ``WaitForRecovery``, and its lastTransitionTime): ``recoveryTimeout`` counts from
    here. None while the workload is PodsReady (or never reached it). Reset with admitted."""
    recovered: float | None = None
    """When PodsReady was last reached again after a loss (Kueue's reason ``Recovered``); None:
    never lost since admitted. A later loss is looked for only after it: a pod that failed
    before the workload recovered is not the next loss. Reset with admitted."""

    @property
    def empty(self) -> bool:
        """No fact known."""
        return (
            self.created is None
            and self.admitted is None
            and self.started is None
            and self.size is None
            and self.ready is None
            and self.lost is None
            and self.recovered is None
        )

    def persisted(self) -> Life:
        """The facts as they read back after a write (second precision, like every
        ``runway.dev/`` time)."""
        return Life(
            _second(self.created),
            _second(self.admitted),
            _second(self.started),
            self.size,
            _second(self.ready),
            _second(self.lost),
            _second(self.recovered),
        )

    @property
    def waiting_for_recovery(self) -> bool:
        """PodsReady was reached and is lost now (as far as these facts say)."""
        return self.ready is not None and self.lost is not None


EMPTY: Final = Life()


def _second(value: float | None) -> float | None:
    return None if value is None else _time(format_time(value))


def _time(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    parsed = parse_time(value.strip())
    return parsed if parsed is not None and math.isfinite(parsed) else None
