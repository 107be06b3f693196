"""What runway does for kube-scheduler, decided per release (DESIGN §1.1).

kube-scheduler changed under runway between 1.20 and the releases people run (read in each
release's source, ``pkg/scheduler``, and measured on the releases built by ``tools/kube``):

* **config API** — ``kubescheduler.config.k8s.io/v1beta1`` until 1.24, only ``v1`` from 1.25;
* **a node with zero victims** in a ``preempt`` answer — accepted by 1.20 (the pod is nominated
  there), an error from 1.22 on (``preemption.go``: "expected at least one victim pod");
* **the unschedulable-pods flush** — 60 s in 1.20, 5 minutes in current releases
  (``DefaultPodMaxInUnschedulablePodsDuration``): a wake-up runway misses costs five minutes;
* **QueueingHints** (on from 1.32, locked on from 1.34) — a pod update re-queues a pod only if
  a rejector's hint says so; runway's filter rejections are the ``Extender`` rejector, which
  re-queues on any event, so the waker's touch still works for pods runway held;
* **scheduling gates** (alpha 1.26, beta and on by default 1.27 to 1.29, GA 1.30) — a gated pod
  costs the scheduler nothing, is no autoscaler's demand, and its gate's removal puts it in the
  active queue at once: runway holds with a gate where the release has them (``gates``);
* **in-tree asynchronous preemption** (on by default from 1.33) — the scheduler's own
  preemption no longer blocks its cycle, and measured on 1.34 and 1.37 takeover no longer wins:
  ``preemption.async: auto`` lets the scheduler execute there (``TAKEOVER_MEASURED``);
* **the scheduler's own nominations** (1.35+, KEP-5278) — it writes ``nominatedNodeName`` when
  binding starts; an external component must not overwrite it;
* **workload-aware preemption** (1.36+, alpha, GenericWorkload) — a pod group's preemption
  never calls extenders: min-runtime and budgets cannot protect against it.

Pure: a version string in, the decisions out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


class VersionError(ValueError):
    """A Kubernetes version runway cannot read."""


def parse_version(text: str) -> tuple[int, int, int]:
    """``v1.34.4`` (``gitVersion``, with any suffix such as ``-alpha.1+abc``) → (1, 34, 4)."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise VersionError(
            f"not a Kubernetes version: {text!r} (expected the form v1.34.4 or 1.34)"
        )
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


OLDEST_SUPPORTED = (1, 20)
"""The oldest release runway supports (and is tested on)."""
TESTED = ("1.20", "1.34", "1.37")
"""The releases the end-to-end suite runs on (``tools/kube``)."""

TAKEOVER_MEASURED: dict[tuple[int, int], bool] = {(1, 20): True, (1, 34): False, (1, 37): False}
"""Whether takeover won the preemption storm (``bench.takeover``: 12 preemptions x 4 victims, 120
unrelated pods, every DELETE slowed to 250 ms; stock vs ``async: false`` vs ``true`` in the same
rounds, bench/RESULTS.md §3) on each release it was measured on. Unrelated pods all bound, as a
ratio to the stock scheduler of the same round (median of 3): on 1.20 takeover 0.17x, the
scheduler executing 0.97x; on 1.34 takeover 1.21x, executing 0.82x; on 1.37 takeover 1.57x,
executing 0.61x. From 1.33 the scheduler's own preemption is asynchronous (KEP-4832) and it
re-queues a preemptor on its victims' deletion: the stock scheduler clears the storm in a
quarter of 1.20's time, and takeover's gain is gone. ``preemption.async: auto`` follows the
measured release, and on a release not measured, the measured ones on its side of 1.33."""


@dataclass(frozen=True)
class Release:
    """What runway does for one kube-scheduler release."""

    version: tuple[int, int, int]
    source: str
    """Where the version came from: ``config`` (kubernetes.schedulerVersion) or ``apiserver``."""

    @property
    def minor(self) -> tuple[int, int]:
        """(major, minor)."""
        return self.version[:2]

    @property
    def text(self) -> str:
        """``1.34.4``."""
        return ".".join(str(n) for n in self.version)

    @property
    def config_api(self) -> str:
        """The KubeSchedulerConfiguration apiVersion this release reads."""
        return (
            "kubescheduler.config.k8s.io/v1"
            if self.minor >= (1, 25)
            else "kubescheduler.config.k8s.io/v1beta1"
        )

    @property
    def zero_victim_nodes(self) -> bool:
        """Whether a ``preempt`` answer may name a node with no victims (1.20, 1.21)."""
        return self.minor < (1, 22)

    @property
    def flush_seconds(self) -> float:
        """When kube-scheduler retries an unschedulable pod nothing woke, at the latest: 60 s in
        1.20, 5 minutes in 1.34 and later (read in their source); the releases between, not
        supported, are taken as the later (the longer wait is the one to plan for)."""
        return 60.0 if self.minor < (1, 21) else 300.0

    @property
    def touch_requeues(self) -> bool:
        """Whether a pod update (runway's wake-up touch) moves an unschedulable pod back to the
        queue whatever rejected it: up to 1.31. From 1.32 QueueingHints (on by default; locked
        on from 1.34) re-queue it only when a rejector's hint says the update may help, and an
        extender counts among the rejectors only when its filter refused nodes: a preemptor
        rejected by NodeResourcesFit alone waits for a resource event or the flush."""
        return self.minor < (1, 32)

    @property
    def scheduling_gates(self) -> bool:
        """Whether ``spec.schedulingGates`` holds pods for sure (GA 1.30; beta, on by default,
        1.27 to 1.29; alpha 1.26; absent on 1.20)."""
        return self.minor >= (1, 30)

    @property
    def scheduling_gates_exist(self) -> bool:
        """Whether the release knows ``spec.schedulingGates`` at all (1.26+, behind the
        PodSchedulingReadiness feature before 1.30)."""
        return self.minor >= (1, 26)

    def gates(self, configured: bool | str) -> bool:
        """Whether runway holds with scheduling gates (``admission.schedulingGates``): ``auto``
        where the release has them (1.30+), ``true`` where they exist at all (1.26+: an older
        API server drops the field, the pod would not be held), ``false`` never."""
        if configured is False:
            return False
        if configured is True:
            return self.scheduling_gates_exist
        return self.scheduling_gates

    @property
    def scheduler_nominates(self) -> bool:
        """Whether kube-scheduler writes ``nominatedNodeName`` when it starts binding (1.35+):
        runway then never touches a nomination it did not write."""
        return self.minor >= (1, 35)

    @property
    def async_preemption_in_tree(self) -> bool:
        """Whether the scheduler's own preemption runs off its cycle by default (1.33+)."""
        return self.minor >= (1, 33)

    @property
    def workload_aware_preemption(self) -> bool:
        """Whether the release has pod-group preemption that skips extenders (1.36+, alpha:
        only where the GenericWorkload feature is turned on)."""
        return self.minor >= (1, 36)

    @property
    def takeover_measured(self) -> bool:
        """Whether the storm was measured on this minor (``TAKEOVER_MEASURED``)."""
        return self.minor in TAKEOVER_MEASURED

    def takeover(self, configured: bool | str) -> bool:
        """Whether runway takes preemptions over (``preemption.async``): as configured, or on
        ``auto`` where takeover was measured to win: 1.20 and every release whose scheduler
        preempts inside its cycle (before 1.33); from 1.33, where kube-scheduler's own
        preemption is asynchronous, the scheduler executes (measured on 1.34 and 1.37)."""
        if isinstance(configured, bool):
            return configured
        measured = TAKEOVER_MEASURED.get(self.minor)
        return measured if measured is not None else not self.async_preemption_in_tree

    def notes(self, configured_gates: bool | str = "auto") -> tuple[str, ...]:
        """What an operator should know of runway on this release (logged at start)."""
        out = []
        if configured_gates is True and not self.scheduling_gates_exist:
            out.append(
                "admission.schedulingGates: true, but this release has no scheduling gates "
                "(1.26+): runway holds pods with its filter"
            )
        if self.minor < OLDEST_SUPPORTED:
            out.append(f"Kubernetes {self.text} is older than runway supports (1.20)")
        if not self.takeover_measured:
            side = "1.34 and 1.37" if self.async_preemption_in_tree else "1.20"
            out.append(
                f"the preemption storm was not measured on {self.text}: preemption.async: auto "
                f"chooses {'takeover' if self.takeover('auto') else 'scheduler-executes'} as "
                f"measured on {side} (set preemption.async to override)"
            )
        if self.workload_aware_preemption:
            out.append(
                "workload-aware preemption (alpha, feature GenericWorkload) preempts pod "
                "groups without calling extenders: with it on, runway's min-runtime and "
                "preemption budget do not protect against a pod group's preemption"
            )
        if self.scheduler_nominates:
            out.append(
                "kube-scheduler writes nominatedNodeName when binding starts: runway changes "
                "only nominations it wrote itself"
            )
        return tuple(out)

    def to_dict(
        self, configured_async: bool | str, configured_gates: bool | str = "auto"
    ) -> dict[str, object]:
        """The decisions, as ``/v1/config`` shows them."""
        return {
            "version": self.text,
            "source": self.source,
            "configApiVersion": self.config_api,
            "takeover": self.takeover(configured_async),
            "zeroVictimNodes": self.zero_victim_nodes,
            "flushSeconds": self.flush_seconds,
            "touchRequeues": self.touch_requeues,
            "schedulingGates": self.scheduling_gates,
            "holdsAsGates": self.gates(configured_gates),
            "schedulerNominates": self.scheduler_nominates,
            "asyncPreemptionInTree": self.async_preemption_in_tree,
            "workloadAwarePreemption": self.workload_aware_preemption,
            "notes": list(self.notes(configured_gates)),
        }


def release_of(version: str, source: str) -> Release:
    """The ``Release`` of ``version`` (raises ``VersionError`` when unreadable)."""
    return Release(parse_version(version), source)


UNKNOWN = Release((1, 20, 0), "assumed")
"""No cluster (the embedded default) or no answer: 1.20's conservative behaviour."""
