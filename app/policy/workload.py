"""Which queue and which workload a pod belongs to, and the workload facts derived from its pods.

DESIGN §2: a pod names its leaf queue by label; a workload is the set of pods admitted and evicted
together, identified (first match wins) by label ``runway.dev/workload``, label
``scheduling.x-k8s.io/pod-group``, the controller ownerReference, else the pod alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from app.model import Pod
from app.model.eviction import parse_count
from app.model.lifecycle import MAX_SIZE
from app.model.owner import controller_of
from app.model.timestamps import parse_time
from app.policy.queues import DEFAULT_QUEUE as DEFAULT_QUEUE
from app.policy.queues import QueueTree

QUEUE_LABELS: tuple[str, ...] = (
    "runway.dev/queue",
    "kai.scheduler/queue",
    "kueue.x-k8s.io/queue-name",
)
WORKLOAD_LABEL = "runway.dev/workload"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
MIN_AVAILABLE_ANNOTATION = "runway.dev/min-available"
READ_LABELS = frozenset((*QUEUE_LABELS, WORKLOAD_LABEL, POD_GROUP_LABEL))
"""Every pod label runway reads: the cache keeps these alone (``state.compact``)."""
EMPTY: Mapping[str, str] = MappingProxyType({})
"""No labels: a namespace runway has not seen (or the embedded default, which sees none)."""
READ_ANNOTATION_PREFIX = "runway.dev/"
"""runway reads only its own annotations on pods (``min-available``; the retired state keys only
to report them): the cache keeps these alone."""


def requested_queue(pod: Pod, mapped: str | None = None) -> str:
    """The queue the pod's labels name: the first of ``QUEUE_LABELS`` that is set, else the
    queue its namespace is mapped to (``mapped``: ``scope.namespaceQueues``), else ``default``.
    What a tenant asked for; ``queue_of`` is what it gets."""
    for key in QUEUE_LABELS:
        value = pod.label(key)
        if value:
            return value
    return mapped or DEFAULT_QUEUE


def queue_of(
    pod: Pod,
    tree: QueueTree | None = None,
    namespace_labels: Mapping[str, str] | None = EMPTY,
    mapped: str | None = None,
) -> str:
    """The pod's leaf queue: the one its labels (or its namespace's mapping, ``mapped``) name
    when its namespace may use it (``QueueTree.allows``, with the namespace's labels), else
    ``default``. Without a tree: the label alone."""
    queue = requested_queue(pod, mapped)
    if tree is None or queue == DEFAULT_QUEUE:
        return queue
    return queue if tree.allows(queue, pod.metadata.namespace, namespace_labels) else DEFAULT_QUEUE


def queue_denied(
    pod: Pod,
    tree: QueueTree,
    namespace_labels: Mapping[str, str] | None = EMPTY,
    mapped: str | None = None,
) -> str | None:
    """The queue the pod names (or its namespace is mapped to) but its namespace (labelled
    ``namespace_labels``) may not use (None: allowed)."""
    queue = requested_queue(pod, mapped)
    if queue == DEFAULT_QUEUE or tree.allows(queue, pod.metadata.namespace, namespace_labels):
        return None
    return queue


@dataclass(frozen=True, order=True)
class WorkloadKey:
    """A workload's identity: namespace, name and where the name came from."""

    namespace: str
    name: str
    source: str
    """``label`` (runway.dev/workload), ``pod-group``, ``owner:<Kind>`` or ``pod``."""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def workload_of(pod: Pod) -> WorkloadKey:
    """The workload ``pod`` belongs to (DESIGN §2.2 identity rules, first match wins)."""
    ns = pod.metadata.namespace
    name = pod.label(WORKLOAD_LABEL)
    if name:
        return WorkloadKey(ns, name, "label")
    name = pod.label(POD_GROUP_LABEL)
    if name:
        return WorkloadKey(ns, name, "pod-group")
    ref = controller_of(pod)  # one that names no object (a 300-character name) is none
    if ref is not None:
        return WorkloadKey(ns, ref.name, f"owner:{ref.kind}")
    return WorkloadKey(ns, pod.metadata.name, "pod")


UNQUEUED_OWNER_KINDS = frozenset({"DaemonSet", "Node"})
"""Pods of these controllers are not queued workloads: DaemonSet pods and static (mirror) pods
are never evicted for PodsReady and carry no life facts — when runway has read the owner
(``is_queued``)."""


def is_queued(
    pods: Iterable[Pod],
    daemonset_uid: Callable[[str, str], str | None] = lambda namespace, name: None,
    node_uid: Callable[[str], str | None] = lambda name: None,
) -> bool:
    """Whether a workload of ``pods`` is one runway queues: not when every one of its pods is
    controlled by an owner of ``UNQUEUED_OWNER_KINDS`` **that runway has read itself** (issue
    #36: a tenant writes any ``kind`` on its own pods' owner references, and may name a real
    DaemonSet's name to join its workload, which is named after the owner):

    * a DaemonSet (``apps/v1``) of the pod's namespace with the UID in the reference
      (``daemonset_uid``: the DaemonSets runway lists);
    * a Node (``v1``) named as the pod's node, with the UID in the reference (``node_uid``: the
      cache's nodes) — a mirror pod, which the kubelet creates bound to its node and owned by
      it. Its ``kubernetes.io/config.mirror`` annotation is not evidence: anyone who may create
      pods may write it. The Node's UID is: a tenant cannot read Nodes (view, edit and admin do
      not grant it), and a pod naming a Node with a made-up UID is garbage-collected.
    """
    seen = False
    for pod in pods:
        seen = True
        if not _read_unqueued_owner(pod, daemonset_uid, node_uid):
            return True
    return not seen


def _read_unqueued_owner(
    pod: Pod,
    daemonset_uid: Callable[[str, str], str | None],
    node_uid: Callable[[str], str | None],
) -> bool:
    for ref in pod.metadata.ownerReferences or ():
        if not ref.controller or ref.kind not in UNQUEUED_OWNER_KINDS or not ref.uid:
            continue
        if ref.kind == "DaemonSet":
            return ref.apiVersion == "apps/v1" and ref.uid == daemonset_uid(
                pod.metadata.namespace, ref.name
            )
        return (
            ref.apiVersion == "v1"
            and ref.name == pod.spec.nodeName
            and ref.uid == node_uid(ref.name)
        )
    return False


def parse_min_available(raw: str | None) -> int | None:
    """The one parser of ``runway.dev/min-available``: a positive count, else None (a bad
    value, ``"²"`` or ``"-1"`` or 5,000 digits, is ignored for that pod; never raises)."""
    value = parse_count(raw)
    return value if value else None


def declared_min_available(pods: Iterable[Pod]) -> int | None:
    """The ``runway.dev/min-available`` annotation of the first pod that has a valid one."""
    for pod in pods:
        value = parse_min_available(pod.annotation(MIN_AVAILABLE_ANNOTATION))
        if value is not None:
            return value
    return None


def is_member(pod: Pod) -> bool:
    """A member of its workload (DESIGN §2.2 *members*): neither being deleted nor ``Failed``.

    KEP-349: failed pods are not taken into account; they count neither towards minAvailable
    nor against PodsReady. Succeeded pods are members (they count as ready).
    """
    return pod.metadata.deletionTimestamp is None and pod.status.phase != "Failed"


def members(pods: Iterable[Pod]) -> list[Pod]:
    """The workload's member pods (:func:`is_member`)."""
    return [p for p in pods if is_member(p)]


def min_available(pods: Sequence[Pod]) -> int:
    """minAvailable of a workload: the annotation, else all its pods.

    A declared value is never capped at the pods runway sees (DESIGN §2: the embedded default sees
    only the offered victims; protection must not fail open). ``pods`` are the pods to count for
    a gang: callers pass members (or the pods the elastic floor counts).
    """
    declared = declared_min_available(pods)
    return len(pods) if declared is None else declared


def is_active(pod: Pod) -> bool:
    """Neither terminating nor finished: the pod counts for its workload's elastic floor."""
    return pod.metadata.deletionTimestamp is None and pod.status.phase not in (
        "Succeeded",
        "Failed",
    )


def live_pods(pods: Iterable[Pod]) -> list[Pod]:
    """The pods not being deleted (finished ones included: they are still the owner's)."""
    return [p for p in pods if p.metadata.deletionTimestamp is None]


def active_pods(pods: Iterable[Pod]) -> list[Pod]:
    """The workload's pods that count for its elastic floor (:func:`is_active`)."""
    return [p for p in pods if is_active(p)]


def bind_time(pod: Pod) -> float | None:
    """When the pod was bound: the PodScheduled=True transition (None if not bound)."""
    cond = pod.condition("PodScheduled")
    if cond is None or cond.status != "True" or not pod.spec.nodeName:
        return None
    return parse_time(cond.lastTransitionTime)


def start_time(pods: Sequence[Pod]) -> float | None:
    """What the pods show now of the workload's *started* fact: the bind time of its
    minAvailable-th bound member (None: fewer bound). The persisted fact, which pod churn does not
    move, is ``app.policy.lifecycle``'s; this is the derivation it starts from."""
    live = members(pods)
    needed = declared_min_available(pods) or len(live)
    binds = sorted(t for t in (bind_time(p) for p in live) if t is not None)
    if needed <= 0 or len(binds) < needed:
        return None
    return binds[needed - 1]


def is_ready(pod: Pod) -> bool:
    """Ready=True."""
    cond = pod.condition("Ready")
    return cond is not None and cond.status == "True"


SizeSource = Literal["declared", "parallelism", "members"]

JOB_SOURCE = "owner:Job"
"""``WorkloadKey.source`` of a workload named after its pods' controlling Job."""


def job_size(parallelism: int | None, completions: int | None) -> int | None:
    """The size of a ``batch/v1`` Job's workload, as Kueue counts a Job's pods
    (``podsCount`` in ``pkg/controller/jobs/job/job_controller.go``: its PodSet's count and
    PodsReady's target): ``parallelism`` (the API server defaults it to 1), but no more than
    ``completions`` when that is set. Fixed for the Job's spec: succeeded pods count as ready,
    not against the target (Kueue's ``PodsReady``: succeeded + ready ≥ podsCount).

    The values are a tenant's: a count ≤ 0 (a Job scaled to nothing) or above ``MAX_SIZE`` (no
    pod count runway keeps is larger) gives no size (None: PodsReady's target comes from the
    members the workload has had)."""
    count = 1 if parallelism is None else parallelism
    if completions is not None and completions < count:
        count = completions
    return count if 0 < count <= MAX_SIZE else None


def owned_by(pods: Iterable[Pod], uid: str) -> bool:
    """Whether one of ``pods`` names the object of ``uid`` as its controller (a Job's size is
    its workload's only for the pods of that very Job: not a namesake that replaced it)."""
    if not uid:
        return False
    for pod in pods:
        for ref in pod.metadata.ownerReferences or ():
            if ref.uid == uid and ref.controller:
                return True
    return False


def workload_size(
    pods: Sequence[Pod], *, parallelism: int | None = None, most: int | None = None
) -> tuple[int, SizeSource]:
    """The workload's size, PodsReady's target (DESIGN §2, KEP-349: ready + succeeded ≥ the
    workload's count, "we don't take failed pods into account"): the declared minAvailable,
    else the owner's ``parallelism`` (a Job), else the most members it has had (``most``, the
    persisted fact, or the members now if more). Never the pods alive now alone: a failed pod
    not yet replaced must not shrink the target.

    A declared minAvailable is the target only for the members not bound yet: every bound
    member counts (issue #36), as Kueue's partial admission counts every admitted pod — the
    PodSet's count becomes what was admitted (at least ``minCount``) and all of it must become
    ready. So an elastic gang runs with its floor while its other pods wait for room, and pods
    that got a node but never become Ready do not outlive the timeout on the floor's word: the
    workload is evicted (its backoff and requeue limit apply) as any other that missed it."""
    declared = declared_min_available(pods)
    if declared is not None:
        bound = sum(1 for p in members(pods) if p.spec.nodeName)
        return max(declared, bound), "declared"
    if parallelism is not None and parallelism > 0:
        return parallelism, "parallelism"
    return max(most or 0, len(members(pods))), "members"


def pods_ready(pods: Sequence[Pod], size: int | None = None) -> bool:
    """PodsReady (DESIGN §5): ready + succeeded members ≥ the workload's ``size``
    (:func:`workload_size`; None: minAvailable of the members now). Failed and terminating pods
    are not members: they never count as ready."""
    live = members(pods)
    if not live:
        return False
    good = sum(1 for p in live if p.status.phase == "Succeeded" or is_ready(p))
    return good >= (min_available(live) if size is None else size)
