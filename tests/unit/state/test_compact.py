"""Compacting cached pods keeps what runway reads, equal, while sharing the repeated parts; the
labels and annotations runway never reads are dropped."""

from __future__ import annotations

import msgspec

from app.model import Pod
from app.policy.workload import READ_ANNOTATION_PREFIX, READ_LABELS
from app.state.compact import Compactor
from bench.ingest import realistic_pod


def decode(i: int) -> Pod:
    return msgspec.json.decode(msgspec.json.encode(realistic_pod(i, 100 + i)), type=Pod)


def kept(pod: Pod) -> Pod:
    """``pod`` with only the labels and annotations runway reads."""
    m = pod.metadata
    labels = {k: v for k, v in (m.labels or {}).items() if k in READ_LABELS} or None
    annotations = {
        k: v for k, v in (m.annotations or {}).items() if k.startswith(READ_ANNOTATION_PREFIX)
    } or None
    meta = msgspec.structs.replace(m, labels=labels, annotations=annotations)
    return msgspec.structs.replace(pod, metadata=meta)


def test_compacted_pods_are_equal_and_share_parts() -> None:
    compactor = Compactor()
    a, b = decode(0), decode(1)  # same Job, different pods
    ca, cb = compactor.pod(a), compactor.pod(b)
    assert ca == kept(a) and cb == kept(b)
    assert ca.metadata.labels == {"runway.dev/queue": "team-00-batch"}
    assert ca.spec.containers[0] is cb.spec.containers[0]  # type: ignore[index]
    assert ca.status.conditions[0] is cb.status.conditions[0]  # type: ignore[index]
    assert ca.metadata.ownerReferences[0] is cb.metadata.ownerReferences[0]  # type: ignore[index]
    # whole lists and label/annotation maps are shared between the pods of a Job and a queue
    assert ca.metadata.labels is cb.metadata.labels
    assert ca.metadata.annotations is cb.metadata.annotations
    assert ca.status.conditions is cb.status.conditions
    assert ca.metadata.ownerReferences is cb.metadata.ownerReferences


def test_last_applied_configuration_is_dropped() -> None:
    raw = realistic_pod(3, 7)
    raw["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}" * 500
    pod = msgspec.json.decode(msgspec.json.encode(raw), type=Pod)
    compact = Compactor().pod(pod)
    assert compact.annotation("kubectl.kubernetes.io/last-applied-configuration") is None
    assert compact.annotation("runway.dev/min-available") == "8"


def test_table_is_bounded() -> None:
    compactor = Compactor(limit=3)
    for i in range(20):
        assert compactor.pod(decode(i * 8)) == kept(decode(i * 8))
    assert len(compactor._shared) <= 3


def test_a_bind_reuses_the_compacted_containers() -> None:
    compactor = Compactor()
    pending = compactor.pod(decode(1))
    raw = decode(1)
    bound = msgspec.structs.replace(raw, spec=msgspec.structs.replace(raw.spec, nodeName="n7"))
    after = compactor.pod(bound, pending)
    assert after == kept(bound) and after.spec.nodeName == "n7"
    assert after.spec.containers is pending.spec.containers


def test_labels_a_config_rule_reads_are_kept_too() -> None:
    """preemption.protectedPodLabels (the shield) reads labels outside READ_LABELS."""
    raw = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "rw"}}}
    pod = msgspec.convert(raw, Pod)
    assert Compactor().pod(pod).metadata.labels is None  # dropped by default
    assert Compactor(keep_labels=["app"]).pod(pod).metadata.labels == {"app": "rw"}
