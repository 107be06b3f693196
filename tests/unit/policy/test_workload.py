"""Which queue and workload a pod belongs to, and the workload facts from its pods (DESIGN §2.1,
§2.2)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.model import Pod
from app.model.lifecycle import MAX_SIZE
from app.model.pod import ObjectMeta, OwnerReference, PodCondition, PodSpec, PodStatus
from app.model.timestamps import format_time
from app.policy.queues import QueueNode, QueueTree
from app.policy.selectors import Requirement, Selector
from app.policy.workload import (
    DEFAULT_QUEUE,
    WorkloadKey,
    active_pods,
    bind_time,
    declared_min_available,
    is_active,
    is_queued,
    is_ready,
    job_size,
    min_available,
    owned_by,
    pods_ready,
    queue_denied,
    queue_of,
    start_time,
    workload_of,
    workload_size,
)

T0 = 1_800_000_000.0


def make(
    name: str = "p",
    *,
    namespace: str = "ns",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owners: list[OwnerReference] | None = None,
    node: str | None = None,
    bound_at: float | None = None,
    scheduled: str = "True",
    ready: str | None = None,
    phase: str | None = None,
    deleting: bool = False,
) -> Pod:
    conditions = []
    if bound_at is not None:
        when = format_time(bound_at)
        conditions.append(PodCondition("PodScheduled", scheduled, when))
    if ready is not None:
        conditions.append(PodCondition("Ready", ready))
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=f"uid-{name}",
            labels=labels,
            annotations=annotations,
            ownerReferences=owners,
            deletionTimestamp=format_time(T0) if deleting else None,
        ),
        spec=PodSpec(nodeName=node),
        status=PodStatus(phase=phase, conditions=conditions or None),
    )


# --- queue_of ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "queue"),
    [
        (None, DEFAULT_QUEUE),
        ({}, DEFAULT_QUEUE),
        ({"other": "x"}, DEFAULT_QUEUE),
        ({"runway.dev/queue": "a"}, "a"),
        ({"kai.scheduler/queue": "b"}, "b"),
        ({"kueue.x-k8s.io/queue-name": "c"}, "c"),
        # first label that is set wins, in runway → KAI → Kueue order
        ({"kueue.x-k8s.io/queue-name": "c", "kai.scheduler/queue": "b"}, "b"),
        ({"kueue.x-k8s.io/queue-name": "c", "runway.dev/queue": "a"}, "a"),
        # an empty value is not set: fall back to the next label
        ({"runway.dev/queue": "", "kai.scheduler/queue": "b"}, "b"),
        ({"runway.dev/queue": ""}, DEFAULT_QUEUE),
    ],
)
def test_queue_of(labels: dict[str, str] | None, queue: str) -> None:
    assert queue_of(make(labels=labels)) == queue


@pytest.mark.parametrize(
    ("namespace", "queue", "expected"),
    [
        ("team-a", "a-leaf", "a-leaf"),  # its own queue
        ("team-a-dev", "a-leaf", "a-leaf"),  # a pattern from the parent
        ("team-b", "a-leaf", DEFAULT_QUEUE),  # another team's queue: default instead
        ("team-b", "b-leaf", "b-leaf"),  # no namespaces on the way up: every namespace
        ("team-b", "undeclared", "undeclared"),  # an unknown queue: no settings, allowed
        ("team-b", "a-open", "a-open"),  # a child's own list overrides the parent's
        ("team-c", "a-open", DEFAULT_QUEUE),
    ],
)
def test_queue_of_applies_the_namespaces_a_queue_allows(
    namespace: str, queue: str, expected: str
) -> None:
    tree = QueueTree.from_nodes(
        [
            QueueNode("a", namespaces=("team-a", "team-a-*")),
            QueueNode("a-leaf", parent="a"),
            QueueNode("a-open", parent="a", namespaces=("team-b",)),
            QueueNode("b"),
            QueueNode("b-leaf", parent="b"),
        ]
    )
    pod = make(namespace=namespace, labels={"runway.dev/queue": queue})
    assert queue_of(pod, tree) == expected
    assert queue_of(pod) == queue  # without a tree: the label alone
    assert queue_denied(pod, tree) == (None if expected == queue else queue)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"team": "a"}, "a-leaf"),
        ({"team": "b"}, DEFAULT_QUEUE),
        ({}, DEFAULT_QUEUE),  # a namespace runway has not seen: no labels
        (None, DEFAULT_QUEUE),  # labels runway would not keep: no selector matches
    ],
)
def test_queue_of_applies_a_namespace_selector(
    labels: dict[str, str] | None, expected: str
) -> None:
    tree = QueueTree.from_nodes(
        [
            QueueNode(
                "a",
                namespace_selector=Selector((Requirement("team", "In", frozenset({"a"})),)),
            ),
            QueueNode("a-leaf", parent="a"),
        ]
    )
    pod = make(namespace="ns-1", labels={"runway.dev/queue": "a-leaf"})
    assert queue_of(pod, tree, labels) == expected
    assert queue_denied(pod, tree, labels) == (None if expected == "a-leaf" else "a-leaf")
    assert queue_of(pod, tree) == DEFAULT_QUEUE  # no labels given: none


# --- workload_of --------------------------------------------------------------------------------

JOB = OwnerReference(apiVersion="batch/v1", kind="Job", name="job", uid="j", controller=True)
RS = OwnerReference(kind="ReplicaSet", name="rs", uid="r", controller=False)
NAMELESS = OwnerReference(kind="Job", name="", uid="n", controller=True)
# Owner references the API server accepts on a pod but no object can be named by (issue #36):
# not owners, so not a workload identity (the pod is its own) and never written on a record.
LONG = OwnerReference(
    apiVersion="rt.example/v1", kind="Job", name="x" * 300, uid="l", controller=True
)
SLASH = OwnerReference(apiVersion="batch/v1", kind="Job", name="a/b", uid="s", controller=True)
BADKIND = OwnerReference(apiVersion="batch/v1", kind="Job.v1", name="j", uid="k", controller=True)
NOUID = OwnerReference(apiVersion="batch/v1", kind="Job", name="j", uid="", controller=True)


@pytest.mark.parametrize(
    ("labels", "owners", "key"),
    [
        (None, None, WorkloadKey("ns", "p", "pod")),  # the pod alone
        (None, [JOB], WorkloadKey("ns", "job", "owner:Job")),
        (None, [RS], WorkloadKey("ns", "p", "pod")),  # not the controller
        (None, [NAMELESS], WorkloadKey("ns", "p", "pod")),  # a controller without a name
        (None, [LONG], WorkloadKey("ns", "p", "pod")),  # a name no object can have
        (None, [SLASH], WorkloadKey("ns", "p", "pod")),
        (None, [BADKIND], WorkloadKey("ns", "p", "pod")),
        (None, [NOUID], WorkloadKey("ns", "p", "pod")),
        (None, [RS, JOB], WorkloadKey("ns", "job", "owner:Job")),
        ({"scheduling.x-k8s.io/pod-group": "pg"}, [JOB], WorkloadKey("ns", "pg", "pod-group")),
        (
            {"runway.dev/workload": "wl", "scheduling.x-k8s.io/pod-group": "pg"},
            [JOB],
            WorkloadKey("ns", "wl", "label"),
        ),
        ({"runway.dev/workload": ""}, [JOB], WorkloadKey("ns", "job", "owner:Job")),  # empty label
    ],
)
def test_workload_of_identity_order(
    labels: dict[str, str] | None, owners: list[OwnerReference] | None, key: WorkloadKey
) -> None:
    assert workload_of(make(labels=labels, owners=owners)) == key


def test_workload_key_prints_as_namespace_name() -> None:
    assert str(WorkloadKey("ns", "wl", "label")) == "ns/wl"


# --- minAvailable -------------------------------------------------------------------------------


def annotated(*values: str | None) -> list[Pod]:
    return [
        make(f"p{i}", annotations=None if v is None else {"runway.dev/min-available": v})
        for i, v in enumerate(values)
    ]


@pytest.mark.parametrize(
    ("values", "declared", "floor"),
    [
        ((None, None, None), None, 3),  # no annotation: a gang of all its pods
        (("2", None, None), 2, 2),
        ((None, "2", None), 2, 2),  # the first pod that has a valid one
        (("5", None, None), 5, 5),  # never capped at the pods runway sees (DESIGN §2.2)
        ((" 2 ", None, None), 2, 2),  # surrounding blanks are tolerated
        (("0", None, None), None, 3),  # not positive: ignored
        (("-1", None, None), None, 3),
        (("two", "1", None), 1, 1),  # invalid: the next pod's is used
        (("1.5", None, None), None, 3),
        (("", None, None), None, 3),
    ],
)
def test_min_available_annotation(
    values: tuple[str | None, ...], declared: int | None, floor: int
) -> None:
    pods = annotated(*values)
    assert declared_min_available(pods) == declared
    assert min_available(pods) == floor


def test_min_available_of_no_pods() -> None:
    assert min_available([]) == 0


# --- start time ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "start"),
    [
        ([], None),
        ([make("a", node="n", bound_at=T0)], T0),
        # a gang: the last of its pods to bind
        ([make("a", node="n", bound_at=T0 + 5), make("b", node="n", bound_at=T0)], T0 + 5),
        ([make("a", node="n", bound_at=T0), make("b")], None),  # one still pending
        # PodScheduled not True, or no node: not bound
        ([make("a", node="n", bound_at=T0, scheduled="False")], None),
        ([make("a", bound_at=T0)], None),
        # terminating pods do not count (nor are they needed)
        ([make("a", node="n", bound_at=T0), make("b", deleting=True)], T0),
        (
            [make("a", node="n", bound_at=T0), make("b", node="n", bound_at=T0 + 9, deleting=True)],
            T0,
        ),
    ],
)
def test_start_time(pods: list[Pod], start: float | None) -> None:
    assert start_time(pods) == start


def test_start_time_of_an_elastic_workload_is_its_min_available_th_bind() -> None:
    ann = {"runway.dev/min-available": "2"}
    pods = [make(f"p{i}", annotations=ann, node="n", bound_at=T0 + i) for i in range(4)]
    assert start_time(pods) == T0 + 1  # scaling up later does not move the start
    assert start_time(pods[:1]) is None  # fewer than minAvailable bound


def test_bind_time() -> None:
    assert bind_time(make(node="n", bound_at=T0)) == T0
    assert bind_time(make(node="n")) is None


# --- readiness and liveness ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ready", "expected"), [(None, False), ("False", False), ("Unknown", False), ("True", True)]
)
def test_is_ready(ready: str | None, expected: bool) -> None:
    assert is_ready(make(ready=ready)) is expected


@pytest.mark.parametrize(
    ("kw", "active"),
    [
        ({}, True),
        ({"phase": "Running"}, True),
        ({"phase": "Pending"}, True),
        ({"phase": "Succeeded"}, False),
        ({"phase": "Failed"}, False),
        ({"phase": "Running", "deleting": True}, False),
    ],
)
def test_is_active(kw: dict[str, Any], active: bool) -> None:
    pod = make(**kw)
    assert is_active(pod) is active
    assert active_pods([pod]) == ([pod] if active else [])


@pytest.mark.parametrize(
    ("pods", "ready"),
    [
        ([], False),
        ([make("a", ready="True"), make("b", ready="True")], True),
        ([make("a", ready="True"), make("b", ready="False")], False),
        ([make("a", ready="True"), make("b", phase="Succeeded")], True),  # succeeded counts
        (
            [
                make("a", ready="True", annotations={"runway.dev/min-available": "1"}),
                make("b", ready="False"),
            ],
            True,
        ),
    ],
)
def test_pods_ready(pods: list[Pod], ready: bool) -> None:
    assert pods_ready(pods) is ready


# --- the workload's size: PodsReady's target (KEP-349) ----------------------------------------


@pytest.mark.parametrize(
    ("parallelism", "completions", "size"),
    [
        (3, None, 3),  # completions unset: parallelism
        (None, None, 1),  # the API server's default parallelism
        (3, 5, 3),  # more completions than run at once: parallelism (Kueue's podsCount)
        (5, 2, 2),  # fewer completions than parallelism: only that many pods ever run at once
        (3, 3, 3),
        (0, None, None),  # scaled to nothing: no size (the members it has had decide)
        (3, 0, None),
        (-1, None, None),  # not from an API server, but a value is a tenant's: ignored
        (MAX_SIZE, None, MAX_SIZE),
        (MAX_SIZE + 1, None, None),  # above any pod count runway keeps
        (10**30, 2, 2),
        (10**30, None, None),
    ],
)
def test_job_size_is_kueues_pods_count_bounded(
    parallelism: int | None, completions: int | None, size: int | None
) -> None:
    assert job_size(parallelism, completions) == size


def _job_ref(uid: str, *, controller: bool | None = True) -> OwnerReference:
    return OwnerReference("batch/v1", "Job", "train", uid, controller)


@pytest.mark.parametrize(
    ("owners", "uid", "owned"),
    [
        ([_job_ref("u1")], "u1", True),
        ([_job_ref("u0")], "u1", False),  # a Job of the same name re-created: another Job
        ([_job_ref("u1", controller=None)], "u1", False),  # an owner, not the controller
        (None, "u1", False),
        ([_job_ref("")], "", False),
    ],
)
def test_owned_by_matches_the_controllers_uid(
    owners: list[OwnerReference] | None, uid: str, owned: bool
) -> None:
    assert owned_by([make("a"), make("b", owners=owners)], uid) is owned


DECLARED = {"runway.dev/min-available": "2"}


@pytest.mark.parametrize(
    ("pods", "parallelism", "most", "expected"),
    [
        # a Job of 3: 2 Ready, 1 Failed and not replaced yet. Its parallelism says 3.
        ([make("a"), make("b"), make("c", phase="Failed")], 3, None, (3, "parallelism")),
        # the same, parallelism unknown (Jobs not readable): the most members it has had
        ([make("a"), make("b"), make("c", phase="Failed")], None, 3, (3, "members")),
        # ... never fewer than the members now
        ([make("a"), make("b")], None, 1, (2, "members")),
        ([make("a"), make("b")], None, None, (2, "members")),
        # a declared minAvailable wins over the Job
        ([make("a", annotations=DECLARED), make("b")], 3, 3, (2, "declared")),
        # ...for the members not bound yet: every bound member counts (issue #36, Kueue's
        # partial admission: all admitted pods must be ready), pending ones beyond do not
        (
            [make("a", annotations=DECLARED, node="n1")] + [make(n, node="n1") for n in "bcd"],
            None,
            4,
            (4, "declared"),
        ),
        (
            [make("a", annotations=DECLARED, node="n1"), make("b", node="n1"), make("c")],
            None,
            3,
            (2, "declared"),
        ),
        (  # a failed bound pod is not a member
            [make("a", annotations=DECLARED, node="n1")]
            + [make(n, node="n1", phase="Failed") for n in "bc"],
            None,
            3,
            (2, "declared"),
        ),
        # a Job scaled up before its pods exist: the Job says
        ([make("a")], 4, 1, (4, "parallelism")),
        # a Job scaled down: the Job says (the pods above it are being deleted)
        ([make("a"), make("b"), make("c", deleting=True)], 2, 3, (2, "parallelism")),
        # no size from the Job (0: nothing runs): the members
        ([make("a")], 0, None, (1, "members")),
    ],
)
def test_workload_size_declared_then_the_jobs_then_the_most_members(
    pods: list[Pod], parallelism: int | None, most: int | None, expected: tuple[int, str]
) -> None:
    assert workload_size(pods, parallelism=parallelism, most=most) == expected


# --- is_queued: an owner's kind counts only when runway has read the owner (issue #36) ---------

Ref = OwnerReference


def ds_ref(
    api_version: str = "apps/v1", uid: str = "ds-uid", name: str = "agent"
) -> OwnerReference:
    return OwnerReference(
        apiVersion=api_version, kind="DaemonSet", name=name, uid=uid, controller=True
    )


def node_ref(name: str = "n1", uid: str = "node-uid", api_version: str = "v1") -> Ref:
    return Ref(apiVersion=api_version, kind="Node", name=name, uid=uid, controller=True)


def read_ds(namespace: str, name: str) -> str | None:
    return {("ns", "agent"): "ds-uid"}.get((namespace, name))


def read_node(name: str) -> str | None:
    return {"n1": "node-uid"}.get(name)


@pytest.mark.parametrize(
    ("pod", "queued"),
    [
        (make(), True),
        (make(owners=[JOB]), True),
        # a DaemonSet runway has read, with its UID: not queued
        (make(owners=[ds_ref()]), False),
        # the forgery: kind DaemonSet of a made-up API
        (make(owners=[ds_ref(api_version="rt.example/v1")]), True),
        (make(owners=[ds_ref(uid="forged")]), True),  # not that DaemonSet's UID
        (make(owners=[ds_ref(name="unknown")]), True),  # one runway has not read
        (make(namespace="other", owners=[ds_ref()]), True),  # another namespace's
        (
            make(owners=[msgspec.structs.replace(ds_ref(), controller=False)]),
            True,
        ),  # not the controller
        # a mirror pod: owned by its own node, with that node's UID
        (make(node="n1", owners=[node_ref()]), False),
        (make(node="n2", owners=[node_ref()]), True),  # another node's name
        (make(node=None, owners=[node_ref()]), True),  # the kubelet creates them bound
        (make(node="n1", owners=[node_ref(uid="forged")]), True),
        (make(node="n1", owners=[node_ref(api_version="rt.example/v1")]), True),
        # the kubelet's annotation is anyone's to write: no evidence
        (make(node="n1", annotations={"kubernetes.io/config.mirror": "x"}), True),
    ],
)
def test_is_queued_counts_an_owner_kind_only_for_an_owner_runway_has_read(
    pod: Pod, queued: bool
) -> None:
    assert is_queued([pod], read_ds, read_node) is queued
    assert is_queued([pod]) is True  # nothing read: nothing is exempt


def test_a_forged_pod_joining_a_real_daemonsets_workload_makes_it_queued() -> None:
    """The workload is named after the owner's name: a tenant's pod naming the real DaemonSet's
    name (another API, another UID) joins its workload; it is then queued as a whole."""
    real = make("real", owners=[ds_ref()])
    forged = make("forged", owners=[ds_ref(api_version="rt.example/v1", uid="x")])
    assert not is_queued([real], read_ds, read_node)
    assert is_queued([real, forged], read_ds, read_node)
    assert is_queued([], read_ds, read_node)
