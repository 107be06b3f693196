"""Compacting cached pods keeps them equal while sharing their repeated parts."""

from __future__ import annotations

import msgspec

from app.model import Pod
from app.state.compact import Compactor
from bench.ingest import realistic_pod


def decode(i: int) -> Pod:
    return msgspec.json.decode(msgspec.json.encode(realistic_pod(i, 100 + i)), type=Pod)


def test_compacted_pods_are_equal_and_share_parts() -> None:
    compactor = Compactor()
    a, b = decode(0), decode(1)  # same Job, different pods
    ca, cb = compactor.pod(a), compactor.pod(b)
    assert ca == a and cb == b
    assert ca.spec.containers[0] is cb.spec.containers[0]  # type: ignore[index]
    assert ca.status.conditions[0] is cb.status.conditions[0]  # type: ignore[index]
    assert ca.metadata.ownerReferences[0] is cb.metadata.ownerReferences[0]  # type: ignore[index]
    la, lb = ca.metadata.labels, cb.metadata.labels
    assert la is not None and lb is not None
    assert next(iter(la)) is next(iter(lb))


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
        assert compactor.pod(decode(i * 8)) == decode(i * 8)
    assert len(compactor._shared) <= 3


def test_a_bind_reuses_the_compacted_containers() -> None:
    compactor = Compactor()
    pending = compactor.pod(decode(1))
    raw = decode(1)
    bound = msgspec.structs.replace(raw, spec=msgspec.structs.replace(raw.spec, nodeName="n7"))
    after = compactor.pod(bound, pending)
    assert after == bound and after.spec.nodeName == "n7"
    assert after.spec.containers is pending.spec.containers
