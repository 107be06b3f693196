"""The requeue waker: touches pending pods whose filter rejection just ended (leader only).

kube-scheduler retries a pod that runway's filter rejected only after ~60 s, or on an event.
A pod update is such an event (1.20 ``PriorityQueue.Update``: unschedulable queue → active queue
when the pod changed outside its status), so when a hold ends — requeueAt passed, the workload
was reactivated, the preemptor it waited for is bound or gone, a blocking workload became
PodsReady, the StrictFIFO head moved — the leader sets the annotation
``runway.dev/requeue-wake: <RFC 3339 time>`` on each of the workload's pending pods (a JSON merge
patch with a UID precondition). The same touch wakes a pending pod nominated to a node (a
preemptor) when the last lower-priority pod there is gone, seen as the cache's delete event: the
victims' deletion sends it to kube-scheduler's backoff queue (up to 10 s), the touch to the
active queue (``policy.wakeup.freed_by``). A preemptor whose preempt call was refused
because its ADDED event had not reached runway yet is touched when it arrives
(``state.preemption.AwaitedPreemptors``), and one whose failed preemption's back-off ended when
the gate keeper releases its gate (``wake_retry``). What to wake and when is decided in
``app.policy.wakeup`` and ``app.state.wakeup``; this module only runs the loop and the patches.

The same pass removes runway's scheduling gate (``runway.dev/admission``, added by the webhook:
``api.webhook``) from each gated pending pod the admission chain lets go now (DESIGN §5.8):
the free gated pods of a workload together, a declared gang once all its pods exist, workloads
in queue order, from the same rate limit as the touches (``policy.schedgate``). Removing the
gates admits a workload: the pass judges each workload with those it let go before it, and those
earlier passes let go that have not bound yet (``policy.schedgate.ungate_pass``), so under
blockAdmission the next stays gated — not ``Unschedulable`` — until the first is PodsReady. A
gated pod is never touched: nothing but the gate's removal moves it, and that puts it in
kube-scheduler's active queue at once.

One tracked asyncio task. A pass (~5 ms per 1,000 pending pods) runs when the cache or a record
changed (debounced: at least 0.2 s and twice the last pass apart), when the
earliest known hold ends, and at least every ``tick`` seconds; patches are rate-limited (token
bucket) and at most ``concurrency`` are in flight. Without a cluster the patches are logged as
dry-run. Followers keep no state: a new leader's first pass only learns the holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

from app import metrics
from app.clock import Clock
from app.logs import get_logger
from app.model.gate import PodRef
from app.model.pod import Pod
from app.policy.admission import Admission
from app.policy.rate import TokenBucket
from app.policy.schedgate import (
    ADMITTING_S,
    GatedWorkload,
    gated,
    held_by,
    incomplete,
    new_admission,
    take_whole,
    ungate_pass,
    ungate_patch,
)
from app.policy.wakeup import (
    WAKE_SLACK_S,
    Hold,
    WakePlan,
    WakeSchedule,
    freed_by,
    plan_wakeups,
)
from app.policy.workload import (
    WorkloadKey,
    declared_min_available,
    live_pods,
    workload_of,
)
from app.state.cache import CacheEvent
from app.state.preemption import AwaitedPreemptors
from app.state.requeue import RequeueView
from app.supervise import Turns, in_slices
from app.tasks.loop import Ticker, listen
from app.tasks.ports import PodApi

log = get_logger("tasks.wakeup")

WAKE_ANNOTATION = "runway.dev/requeue-wake"
"""Set on a pending pod to move it back to kube-scheduler's active queue."""

MAX_RETRIES = 3
"""Failed touches of one pod retried this often; then the scheduler's own flush takes over."""

UNGATE_QUIET_S = 10.0
"""A pod whose gate was just removed is not patched again this long (the watch has not shown
the removal yet); past it, a pod still gated and free is tried again."""

UNGATE_RETRY_S = 1.0
"""After a failed gate removal, the workload is tried again this long after (doubling)."""


def wake_stamp(now: float) -> str:
    """RFC 3339 with milliseconds: each touch must change the pod, or no update event fires."""
    return (
        datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


class RequeueWaker(Ticker):
    """Wakes pending pods whose hold ended (see the module docstring)."""

    def __init__(
        self,
        view: RequeueView,
        pods: PodApi,
        clock: Clock,
        *,
        tick: float = 1.0,
        debounce: float = 1.0,
        rate: float = 50.0,
        burst: int = 100,
        min_interval: float = 1.0,
        concurrency: int = 8,
        is_leader: Callable[[], bool] = lambda: True,
        dry_run: bool = False,
        awaited: AwaitedPreemptors | None = None,
    ) -> None:
        super().__init__("requeue-waker", tick=tick, debounce=debounce)
        self.awaited = awaited
        """Preemptors refused as unknown (``PreemptDecider.awaited``): woken on their ADDED."""
        self.dry_run = dry_run
        """The pod writer only logs (embedded default): touches count as ``dry_run``."""
        self.view = view
        self.pods = pods
        self.clock = clock
        self.concurrency = concurrency
        self.is_leader = is_leader
        self.limiter = TokenBucket(rate, burst)
        self.schedule = WakeSchedule(min_interval)
        self.held: dict[str, Hold] = {}
        """Pods held at the last pass, with their holds."""
        self.woken = 0
        """Pods touched by this process (for tests and the log)."""
        self.pass_seconds = 0.0
        """Duration of the last evaluation pass (the loop rests at least twice that long)."""
        self._generation = -1
        self._next_check: float | None = None
        self._retries: dict[str, int] = {}
        self._nominated: dict[str, set[str]] = {}
        """Pending pods nominated to each node (kept from pod events: O(1) per event)."""
        self.own_refusals: dict[str, Hold] = {}
        """On a follower: pods its own filter refused, still held (woken when free)."""
        self.gated: set[str] = set()
        """Pending pods carrying runway's scheduling gate (kept from pod events)."""
        self.ungates: list[GatedWorkload] = []
        """Workloads whose gates go, in order (the last pass's plan, less what was done)."""
        self.waiting_gangs: dict[str, str] = {}
        """Gangs whose rules admit them but whose gates stay: why (``incomplete``)."""
        self.held_back: dict[str, Admission] = {}
        """Workloads free at the last pass's start that stay gated for what goes before them
        (``UngatePlan.held``): the chain's verdict."""
        self._admitting: dict[str, tuple[float, tuple[str, ...]]] = {}
        """Workloads whose gates this leader removed, as admissions none of whose pods has bound
        yet: until when they count as admitted (``ADMITTING_S``), and the pods ungated."""
        self.ungated = 0
        """Gates removed by this process (for tests and the log)."""
        self._ungated_at: dict[str, float] = {}
        self._ungate_retry: dict[str, tuple[float, int]] = {}
        """Workload → (when to try again, failures) after a failed removal."""
        for pod in view.cache.pending_pods():
            self._track(None, pod)
        self.follow(lambda: view.cache.subscribe(self._on_change))

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen to cache and record changes and the filter's refusals; start the loop."""
        self.follow(lambda: listen(self.view.index.listeners, self.poke))
        self.view.on_refusal = self.poke
        super().start()

    def rest(self) -> float:
        """The debounce (1 s: a hold ends seconds to hours after it began, so waking a second
        late costs nothing), stretched on a big cluster so a slow pass (every pending pod
        through the filter's rule chain) keeps the waker under a sixth of a CPU: the scheduler
        shares the machine."""
        return max(self.debounce, 5 * self.pass_seconds)

    async def run_once(self) -> float:
        """Evaluate (when something changed or a hold ended), remove the due gates and make
        the due touches. Returns the seconds until the loop should look again."""
        clock = self.clock
        await self.evaluate(clock.now())
        await self.ungate_due(clock.now())
        await self.touch_due(clock.now())
        return self.next_wait(clock.now())

    # -- nominated pods: woken when their victims are gone ----------------------------------------

    def _on_change(self, event: CacheEvent) -> None:  # type: ignore[type-arg]
        if event.kind != "pod":
            return
        old: Pod | None = event.old
        new: Pod | None = event.new
        self._track(old, new)
        if old is None:
            if new is not None and self.awaited and self.is_leader():
                self.wake_arrived(new)
            return
        if new is not None:
            return
        node = old.spec.nodeName  # a bound pod gone: its room is free in kube-scheduler's cache
        if node and node in self._nominated and self.is_leader():
            self.wake_freed(old, node)

    def _track(self, old: Pod | None, new: Pod | None) -> None:
        if new is not None and _gated_pending(new):
            self.gated.add(new.uid)
        elif old is not None:
            self.gated.discard(old.uid)
            self._ungated_at.pop(old.uid, None)
        before, after = _nomination(old), _nomination(new)
        if before == after:
            return
        if before is not None and old is not None:
            uids = self._nominated.get(before)
            if uids is not None:
                uids.discard(old.uid)
                if not uids:
                    del self._nominated[before]
        if after is not None and new is not None:
            self._nominated.setdefault(after, set()).add(new.uid)

    def wake_freed(self, gone: Pod, node: str) -> list[str]:
        """``gone`` left ``node``: schedule a touch of the pods nominated there that it kept out
        (``policy.wakeup.freed_by``) and poke the loop. Returns their UIDs."""
        cache = self.view.cache
        nominated = [p for uid in self._nominated.get(node, ()) if (p := cache.pod(uid))]
        uids = freed_by(gone, nominated, cache.pods_on_node(node))
        now = self.clock.now()
        for uid in uids:
            self.schedule.push(uid, now)
        if uids:
            log.info("victims gone: waking nominated pods", node=node, pods=len(uids))
            self.poke()
        return uids

    def wake_arrived(self, pod: Pod) -> bool:
        """``pod`` just reached the cache: if its preempt call was refused because runway did not
        know it yet, schedule a touch (kube-scheduler parked it as unschedulable) and poke the
        loop. Whether it was one of those."""
        awaited = self.awaited
        now = self.clock.now()
        if awaited is None or not awaited.take(pod.uid, now) or pod.spec.nodeName:
            return False
        self.schedule.push(pod.uid, now)
        log.info("preemptor known now, its preempt was refused before: waking it", pod=pod.key)
        self.poke()
        return True

    def wake_retry(self, uid: str) -> bool:
        """The back-off of ``uid``'s failed preemption ended (the gate keeper released its gate):
        kube-scheduler parked the pod as unschedulable when its ``preempt`` calls were vetoed
        meanwhile, and the filter never held it (so no pass sees a hold end). Schedule a touch
        if it is still pending and poke the loop; whether one was scheduled (leader only)."""
        pod = self.view.cache.pod(uid)
        if (
            not self.is_leader()
            or pod is None
            or pod.spec.nodeName
            or pod.metadata.deletionTimestamp is not None
        ):
            return False
        self.schedule.push(uid, self.clock.now())
        log.info("failed preemption backed off: waking the preemptor", pod=pod.key)
        self.poke()
        return True

    # -- deciding -------------------------------------------------------------------------------

    async def evaluate(self, now: float) -> WakePlan | None:
        """One pass over the pending pods' holds; schedules the pods whose hold ended.
        None when skipped: not the leader, or nothing changed and no hold has ended yet.
        The pass lets the verbs run every few milliseconds (``in_slices``): on a big cluster
        it asks thousands of pods the filter's rule chain."""
        refused = self.view.take_refusals()
        if not self.is_leader():
            if self.held or self._generation != -1:  # was leading: its touches are not ours
                self.held.clear()
                self.schedule.clear()
                self._retries.clear()
                self.ungates, self.waiting_gangs, self.held_back = [], {}, {}
                self._ungate_retry.clear()
                self._admitting.clear()
            self._generation, self._next_check = -1, None
            return self._evaluate_own_refusals(refused, now)
        self.own_refusals.clear()
        generation = self.view.index.generation
        due = self._next_check is not None and now >= self._next_check
        if generation == self._generation and not due and not refused:
            return None
        self._generation = generation
        turns = Turns()
        current = await in_slices(self.view.pending_holds_steps(now), turns=turns)
        self.pass_seconds = turns.held  # its own cost, not the verbs answered meanwhile
        # a pod refused since the last pass counts as held then: free now, it is woken even
        # when no pass saw its hold (it began and ended between two)
        plan = plan_wakeups({**refused, **self.held}, current)
        self._count_requeues(plan)
        self.held = plan.held
        self._next_check = plan.next_check
        gates = self.gated
        woken = [uid for uid in plan.wake if uid not in gates]  # a gated pod: its gate goes
        for uid in woken:
            self.schedule.push(uid, now)
        if woken:
            log.info("requeue holds ended: waking pods", pods=len(woken))
        self.plan_ungates(current, now)
        for kind, count in held_by(plan.held, gates).items():
            metrics.HELD_PODS.labels(kind).set(count)
        return plan

    # -- scheduling gates -------------------------------------------------------------------------

    def plan_ungates(self, current: dict[str, Hold | None], now: float) -> list[GatedWorkload]:
        """The workloads whose gated pods the chain lets go now (``current``: every pending
        pod's hold), whole gangs only, in queue order, each judged with the admissions before
        it (``policy.schedgate.ungate_pass``)."""
        view = self.view
        cache = view.cache
        free: dict[WorkloadKey, list[Pod]] = {}
        for uid in self.gated:
            if current.get(uid, ...) is not None:  # held, or not a pending pod the pass saw
                continue
            at = self._ungated_at.get(uid)
            if at is not None and now - at < UNGATE_QUIET_S:
                continue
            pod = cache.pod(uid)
            if pod is None or not gated(pod):
                continue
            free.setdefault(cache.workload_key_of(uid) or workload_of(pod), []).append(pod)
        found = [self._gated_workload(key, pods, now) for key, pods in free.items()]
        self.waiting_gangs = {w.workload: why for w in found if (why := incomplete(w))}
        cfg = view.pods_ready
        plan = ungate_pass(
            found,
            now,
            view.policy,
            block_admission=cfg.enable and cfg.block_admission,
            admitting={name: until for name, (until, _) in self._still_admitting(now).items()},
        )
        self.ungates, self.held_back = plan.go, plan.held
        if plan.held:
            log.debug("gated workloads wait for those admitted before them", held=len(plan.held))
        return self.ungates

    def _still_admitting(self, now: float) -> dict[str, tuple[float, tuple[str, ...]]]:
        """The workloads this leader ungated that count as admitted still: none of their pods
        bound (from its bind the filter's facts count it), some alive, ``ADMITTING_S`` not
        over. The next pass is due when the first stops counting (another may go then)."""
        cache = self.view.cache
        admitting = self._admitting
        for name, (until, uids) in list(admitting.items()):
            pods = [p for uid in uids if (p := cache.pod(uid)) is not None]
            if until <= now or not pods or any(p.spec.nodeName for p in pods):
                del admitting[name]
        if admitting:
            first = min(until for until, _ in admitting.values())
            self._next_check = min(self._next_check or first, first)
        return admitting

    def _gated_workload(self, key: WorkloadKey, pods: list[Pod], now: float) -> GatedWorkload:
        view = self.view
        cache = view.cache
        pods.sort(key=lambda p: (p.metadata.creationTimestamp or "", p.metadata.name))
        workload = cache.workload(key)
        members = live_pods(workload.pods) if workload is not None else pods
        queue = cache.queue_of_pod(pods[0])
        admitted = workload is not None and view.life(workload).life.admitted is not None
        managed = not cache.unmanaged_reason(pods[0])
        place = -1
        if not admitted and managed:
            name = str(key)
            order = view.pending_workloads(queue)
            place = next((i for i, w in enumerate(order) if w.name == name), len(order))
        return GatedWorkload(
            workload=str(key),
            queue=queue,
            place=place,
            uids=tuple(p.uid for p in pods),
            members=len(members),
            min_available=declared_min_available(members),
            admitted=admitted,
            facts=view.filter_input(pods[0], now) if managed else None,
        )

    async def ungate_due(self, now: float) -> int:
        """Remove the gates of the planned workloads the rate limit allows now (whole
        workloads, in order); returns how many gates were removed."""
        if not self.ungates or not self.is_leader():
            return 0
        due = [
            w
            for w in self.ungates
            if (retry := self._ungate_retry.get(w.workload)) is None or retry[0] <= now
        ]
        if not due:
            return 0
        limiter = self.limiter
        wanted = sum(len(w.uids) for w in due)
        tokens = limiter.take(now, wanted)
        count = take_whole(due, tokens, int(limiter.burst))
        batch = due[:count]
        spent = sum(len(w.uids) for w in batch)
        limiter.tokens += tokens - spent  # give back what was not used (a big gang: debt)
        if not batch:
            return 0
        done = {w.workload for w in batch}
        self.ungates = [w for w in self.ungates if w.workload not in done]
        gate = asyncio.Semaphore(self.concurrency)

        async def one(uid: str) -> bool:
            async with gate:
                return await self.ungate(uid, now)

        results = []
        for workload in batch:  # in order; a workload's pods at once
            outcome = await asyncio.gather(*(one(uid) for uid in workload.uids))
            results.extend(outcome)
            if any(outcome) and new_admission(workload):  # admitted now: it blocks the next
                self._admitting[workload.workload] = (now + ADMITTING_S, workload.uids)
            if all(outcome):
                self._ungate_retry.pop(workload.workload, None)
        removed = sum(1 for r in results if r)
        if removed:
            log.info("admitted: scheduling gates removed", pods=removed, workloads=len(batch))
        return removed

    async def ungate(self, uid: str, now: float) -> bool:
        """Remove runway's gate from pod ``uid``; False when it has none now, is gone, or the
        removal failed (then its workload is tried again after a back-off)."""
        pod = self.view.cache.pod(uid)
        patch = ungate_patch(pod) if pod is not None else None
        if pod is None or patch is None:
            return False
        try:
            removed = await self.pods.ungate(PodRef.of(pod), patch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.GATES_REMOVED.labels("error").inc()
            key = str(self.view.cache.workload_key_of(uid) or workload_of(pod))
            _, failures = self._ungate_retry.get(key, (0.0, 0))
            wait = min(UNGATE_RETRY_S * 2**failures, 30.0)
            self._ungate_retry[key] = (now + wait, failures + 1)
            self._next_check = min(self._next_check or now + wait, now + wait)
            self._generation = -1  # plan again then, from what the cache says
            log.warning("scheduling gate not removed", pod=pod.key, error=str(exc))
            return False
        if not removed:
            metrics.GATES_REMOVED.labels("gone").inc()
            return False
        self._ungated_at[uid] = now
        metrics.GATES_REMOVED.labels("dry_run" if self.dry_run else "removed").inc()
        self.ungated += 1
        return True

    def _evaluate_own_refusals(self, refused: dict[str, Hold], now: float) -> WakePlan | None:
        """On a follower: wake the pods its own filter refused once their hold ends. The leader
        never hears of them (kube-scheduler called this replica), and a hold that ended before
        the leader's pass looked would leave the pod to kube-scheduler's flush. A touch from
        both replicas costs one more pod update; none costs the pod minutes."""
        own = self.own_refusals
        own.update(refused)
        if not own:
            return None
        cache, wake, ends = self.view.cache, [], []
        for uid in list(own):
            pod = cache.pod(uid)
            if pod is None or pod.spec.nodeName or pod.metadata.deletionTimestamp is not None:
                del own[uid]
                continue
            hold = self.view.hold(pod, now)
            if hold is None:
                del own[uid]
                wake.append(uid)
                self.schedule.push(uid, now)
            else:
                own[uid] = hold
                if hold.until is not None:
                    ends.append(hold.until)
        self._next_check = min(ends) + WAKE_SLACK_S if ends else None
        if wake:
            log.info("holds this replica refused ended: waking pods", pods=len(wake))
        return WakePlan(wake=tuple(wake), held=dict(own), next_check=self._next_check)

    def _count_requeues(self, plan: WakePlan) -> None:
        """Workloads whose backoff just ended are back in their queue (counted once each)."""
        cache = self.view.cache
        back: dict[WorkloadKey, str] = {}
        for uid in plan.wake:
            hold = self.held.get(uid)
            pod = cache.pod(uid) if hold is not None and hold.rule == "backoff" else None
            if pod is not None:
                back.setdefault(workload_of(pod), cache.queue_of_pod(pod))
        for queue in back.values():
            metrics.REQUEUED_WORKLOADS.labels(metrics.queue_label(queue)).inc()

    def next_wait(self, now: float) -> float:
        """Seconds until the next hold ends, the next touch is due, or ``tick``."""
        wait = self.tick
        if self._next_check is not None:
            wait = min(wait, self._next_check - now)
        at = self.schedule.next_at()
        if at is not None:
            wait = min(wait, max(at - now, self.limiter.next_token_in(now)))
        if self.ungates:
            wait = min(wait, self.limiter.next_token_in(now))
        return max(wait, 0.0)

    # -- touching -------------------------------------------------------------------------------

    async def touch_due(self, now: float) -> int:
        """Touch the pods due at ``now`` within the rate limit; returns how many were patched
        (on a follower, only the pods its own filter refused are ever scheduled)."""
        granted = self.limiter.take(now, 1_000_000)
        uids = self.schedule.pop_due(now, granted)
        self.limiter.tokens += granted - len(uids)  # give back what was not used
        if not uids:
            return 0
        gate = asyncio.Semaphore(self.concurrency)

        async def one(uid: str) -> bool:
            async with gate:
                return await self.touch(uid, now)

        results = await asyncio.gather(*(one(uid) for uid in uids))
        return sum(results)

    async def touch(self, uid: str, now: float) -> bool:
        """Patch one pod's wake annotation; False when it is no longer pending or the patch
        failed (then retried a few times)."""
        pod = self.view.cache.pod(uid)
        if pod is None or pod.spec.nodeName or pod.metadata.deletionTimestamp is not None:
            metrics.REQUEUE_WAKEUPS.labels("skipped").inc()
            return False
        try:
            touched = await self.pods.annotate(PodRef.of(pod), {WAKE_ANNOTATION: wake_stamp(now)})
            if not touched:  # gone, or the name belongs to a re-created pod now
                metrics.REQUEUE_WAKEUPS.labels("gone").inc()
                return False
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            metrics.REQUEUE_WAKEUPS.labels("error").inc()
            tries = self._retries.get(uid, 0) + 1
            if tries <= MAX_RETRIES:
                self._retries[uid] = tries
                self.schedule.push(uid, now + self.schedule.min_interval * tries)
            else:
                self._retries.pop(uid, None)
            log.warning("pod wake-up failed", pod=pod.key, error=str(exc), attempt=tries)
            return False
        self._retries.pop(uid, None)
        metrics.REQUEUE_WAKEUPS.labels("dry_run" if self.dry_run else "touched").inc()
        self.woken += 1
        log.debug("pod woken", pod=pod.key)
        return True


def _gated_pending(pod: Pod) -> bool:
    """A pending pod, not being deleted, carrying runway's gate."""
    return not pod.spec.nodeName and pod.metadata.deletionTimestamp is None and gated(pod)


def _nomination(pod: Pod | None) -> str | None:
    """The node ``pod`` is nominated to while it is pending (None otherwise)."""
    if pod is None or pod.spec.nodeName or pod.metadata.deletionTimestamp is not None:
        return None
    return pod.status.nominatedNodeName or None
