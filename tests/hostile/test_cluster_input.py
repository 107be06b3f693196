"""Issue 14 rows 1, 2, 5, 10, 13: values users write into the cluster (annotations, labels,
ownerReferences, namespace labels) and into preempt payloads never raise in a verb, a REST GET
or a background pass; a bad value is ignored for its object and counted once per object
version."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from app import metrics
from app.config import parse_config
from app.model import Pod
from app.model.namespace import Namespace
from app.policy.queues import QueueTree
from app.policy.workload import workload_of
from tests.hostile.conftest import T0, Embedded, filter_body, pod_obj, preempt_body

BAD_COUNTS = ["²", "٣", "-1", "0", "1e3", " ", "9" * 5000, "\uff11"]
"""``"²".isdigit()`` is True and ``int("²")`` raises; 5,000 digits make ``int()`` raise too."""


def invalid(field: str) -> float:
    value = metrics.REGISTRY.get_sample_value("runway_invalid_objects_total", {"field": field})
    return value or 0.0


async def assert_all_answer(e: Embedded, pod: dict[str, Any]) -> None:
    """Every verb and REST read about ``pod`` answers without a 5xx; every pass runs."""
    for verb, body in (
        ("filter", filter_body(pod)),
        ("prioritize", filter_body(pod)),
        ("preempt", preempt_body(pod, {"n1": ["uid-victim-0"]})),
    ):
        resp = await e.verb(verb, body)
        assert resp.status_code < 500, (verb, resp.text)
    for path in ("/v1/queues", "/v1/workloads/team/victim", "/v1/queues/research/pending"):
        resp = await e.http.get(path)
        assert resp.status_code < 500, (path, resp.text)
    await e.passes()


@pytest.mark.parametrize("value", BAD_COUNTS)
async def test_row1_bad_min_available_is_ignored_everywhere(e_value: Any, value: str) -> None:
    e: Embedded = e_value
    before = invalid("min-available")
    for i in range(2):
        e.add(
            pod_obj(
                f"victim-{i}",
                node="n1",
                job="victim",
                annotations={"runway.dev/min-available": value},
            )
        )
    assert invalid("min-available") - before == 2  # each pod once
    e.add(pod_obj("victim-0", node="n1", job="victim", annotations={"x": "y"}, rv="1"))
    view = e.runway.cache.workload_of_pod(e.runway.cache.pod("uid-victim-1"))  # type: ignore[arg-type]
    assert view is not None and view.min_available == 2  # the annotation is ignored: all pods
    e.clock.advance(3600)  # past the PodsReady timeout: the evictor must run its pass
    await assert_all_answer(e, pod_obj("boss", priority=100))


@pytest.fixture
async def e_value(embedded: Embedded) -> Embedded:
    return embedded


@pytest.mark.parametrize(
    "value",
    [
        "[" * 100_000,
        "[" * 60_000,  # under the size cap: the parser's RecursionError is caught
        "{" * 60_000,
        json.dumps({"node": "n1", "victims": "abc", "since": 1, "deadline": 2}),
        json.dumps({"node": "n1", "victims": [], "since": 1, "deadline": float("inf")}),
        json.dumps({"node": ["n1"], "victims": [], "since": 1, "deadline": 2}),
        json.dumps([1, 2, 3]),
        "\x00\xff",
    ],
    ids=lambda v: v[:12],
)
async def test_row2_hostile_gate_annotation(embedded: Embedded, value: str) -> None:
    before = invalid("state-annotation")
    pod = pod_obj("boss", priority=100, annotations={"runway.dev/preemption-gate": value})
    embedded.add(pod)
    embedded.add(pod_obj("victim-0", node="n1", job="victim"))
    assert invalid("state-annotation") - before == 1
    await embedded.passes()  # the keeper's resume reads mirrored gates: this one is ignored
    assert embedded.runway.gate.get("uid-boss") is None
    await assert_all_answer(embedded, pod)


async def test_row2_a_well_formed_gate_annotation_is_not_resumed_either(
    embedded: Embedded,
) -> None:
    good = json.dumps(
        {
            "node": "n1",
            "victims": [["uid-gone", "team", "gone"]],
            "since": T0 - 5,
            "deadline": T0 + 300,
            "rule": "",
            "holder": "",
        }
    )
    embedded.add(pod_obj("bad", annotations={"runway.dev/preemption-gate": "[" * 100_000}))
    embedded.add(pod_obj("good", annotations={"runway.dev/preemption-gate": good}))
    await embedded.passes()
    # Gates live in runway's WorkloadRecords only: a pod's annotation, well formed or not, is
    # never held, resumed or acted on (a tenant can write it).
    assert embedded.runway.gatekeeper._resumed
    assert embedded.runway.gate.get("uid-good") is None
    assert embedded.runway.gate.mirrored() == []
    assert embedded.runway.executor.recent() == []


def record(reason: str, time: str, **fields: str) -> dict[str, str]:
    """``runway.dev/eviction-*`` annotations."""
    out = {"runway.dev/eviction-reason": reason, "runway.dev/eviction-time": time}
    return out | {f"runway.dev/eviction-{k}": v for k, v in fields.items()}


@pytest.mark.parametrize(
    "annotations",
    [
        record("Preempted", "9999-12-31T23:59:59-23:59"),
        record("PodsReadyTimeout", "2027-01-01T00:00:00Z", count="9" * 5000),
        record(
            "PodsReadyTimeout", "2027-01-01T00:00:00Z", **{"requeue-at": "0001-01-01T00:00:00Z"}
        ),
        record("Nope", "x"),
    ],
)
async def test_hostile_record_annotations_on_bare_pods(
    embedded: Embedded, annotations: dict[str, str]
) -> None:
    before = invalid("state-annotation")
    pod = pod_obj("victim-0", node="n1", annotations=annotations)
    embedded.add(pod)
    assert invalid("state-annotation") > before
    assert embedded.runway.records.read_pod(msgspec.convert(pod, Pod)) is None  # never read
    await assert_all_answer(embedded, pod_obj("boss", priority=100))
    resp = await embedded.http.get("/v1/workloads/team/victim-0")
    assert resp.status_code == 200, resp.text


async def test_row5_controllers_of_any_kind_own_the_record_without_being_read(
    embedded: Embedded,
) -> None:
    """A workload's controller of a kind runway was never told about (a CRD, even a Secret) is
    only named as its record's owner: runway reads nothing of it (of a Job: its parallelism, from
    the Job reflector, not here) and needs no access to it."""
    book = embedded.runway.records
    for i, kind in enumerate((("v1", "Secret"), ("example.com/v1", "Thing"), ("batch/v1", "Job"))):
        owner = {"apiVersion": kind[0], "kind": kind[1], "name": f"o{i}", "uid": f"u{i}"}
        obj = pod_obj(f"p{i}", owner=owner)
        embedded.add(obj)
        targets = book.targets(workload_of(msgspec.convert(obj, Pod)))
        assert [(o.api_version, o.kind) for o in targets.owners] == [kind]


async def test_row10_user_queue_names_are_capped(embedded: Embedded) -> None:
    embedded.add(pod_obj("victim-0", node="n1", job="victim", labels={"runway.dev/queue": "q-v"}))
    for i in range(metrics.USER_LABEL_LIMIT + 50):
        boss = pod_obj(f"boss-{i}", priority=100, labels={"runway.dev/queue": f"q-{i}"})
        resp = await embedded.verb("preempt", preempt_body(boss, {"n1": ["uid-victim-0"]}))
        assert resp.status_code == 200
    series = {
        s.labels["queue"]
        for m in metrics.REGISTRY.collect()
        if m.name == "runway_unknown_queue"
        for s in m.samples
        if s.name == "runway_unknown_queue_total"
    }
    assert len(series) <= metrics.USER_LABEL_LIMIT + 1 and metrics.OTHER in series


async def test_row10_stale_pending_queue_series_are_removed(embedded: Embedded) -> None:
    embedded.add(pod_obj("w", labels={"runway.dev/queue": "gone-soon", "runway.dev/workload": "w"}))
    # The gauges are counted when Prometheus scrapes (the hook of a started evictor).
    embedded.runway.evictor.update_gauges(embedded.clock.now())
    # A queue the tree does not declare is user input: it counts under `other`.
    labels = {"queue": metrics.OTHER}
    assert metrics.REGISTRY.get_sample_value("runway_pending_workloads", labels) == 1
    embedded.runway.cache.replace_pods([])
    embedded.runway.evictor.update_gauges(embedded.clock.now())
    assert metrics.REGISTRY.get_sample_value("runway_pending_workloads", labels) is None


def meta_preempt(pdb: int = 0, priority: int = 0) -> dict[str, Any]:
    return {
        "Pod": {"metadata": {"uid": "b"}, "spec": {"priority": priority}},
        "NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": pdb}},
    }


@pytest.mark.parametrize(
    ("body", "what"),
    [
        ({"Pod": {}, "NodeNameToMetaVictims": {}}, "no `metadata.uid`"),
        (meta_preempt(pdb=2**64), "NumPDBViolations"),
        (meta_preempt(pdb=-5), "NumPDBViolations"),
        (meta_preempt(priority=2**64), "priority"),
        (meta_preempt(priority=2**31), "int32"),
    ],
)
async def test_row13_preempt_validation(embedded: Embedded, body: Any, what: str) -> None:
    resp = await embedded.verb("preempt", body)
    assert resp.status_code == 400, resp.text
    assert what in resp.json()["error"]


@pytest.mark.parametrize(
    "labels",
    [
        {f"k{i}": "v" for i in range(10_000)},  # far more than runway keeps
        {"team": "a", "x" * 5000: "v"},  # longer than the API server allows
        {"team": "a" * 5000},
    ],
    ids=["many", "long-key", "long-value"],
)
async def test_hostile_namespace_labels_match_no_selector(
    embedded: Embedded, labels: dict[str, str]
) -> None:
    """Whoever may label a namespace writes its labels: runway keeps a bounded set or none (no
    selector matches then, not even ``{}``), counts it once per version, and every verb, REST
    read and pass still answers."""
    runway = embedded.runway
    runway.queues.adopt(
        QueueTree.from_config(
            parse_config({"queues": [{"name": "research", "namespaceSelector": {}}]}).queues
        )
    )
    runway.cache.reindex_queues()
    before = invalid("namespace-labels")
    raw = json.dumps({"metadata": {"name": "team", "resourceVersion": "9", "labels": labels}})
    for _ in range(2):  # the same version twice: counted once
        runway.cache.upsert_namespace(msgspec.json.decode(raw, type=Namespace))
    assert invalid("namespace-labels") - before == 1
    assert runway.cache.namespace_labels("team") is None
    pod = embedded.add(pod_obj("p", labels={"runway.dev/queue": "research"}))
    assert runway.cache.queue_of_pod(pod) == "default"
    await assert_all_answer(embedded, pod_obj("boss", priority=100))
