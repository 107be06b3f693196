"""Issue 14 rows 1, 2, 5, 10, 13: values users write into the cluster (annotations, labels,
ownerReferences) and into preempt payloads never raise in a verb, a REST GET or a background
pass; a bad value is ignored for its object and counted once per object version."""

from __future__ import annotations

import json
from typing import Any, cast

import msgspec
import pytest

from app import metrics
from app.kube.owners import OwnerWatcher
from app.model import Pod
from app.model.owner import OwnerRef
from app.policy.workload import workload_of
from app.state.records import OWNER_MEMO_LIMIT, RecordBook
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
    before = invalid("preemption-gate")
    pod = pod_obj("boss", priority=100, annotations={"runway.dev/preemption-gate": value})
    embedded.add(pod)
    embedded.add(pod_obj("victim-0", node="n1", job="victim"))
    assert invalid("preemption-gate") - before == 1
    await embedded.passes()  # the keeper's resume reads mirrored gates: this one is ignored
    assert embedded.runway.gate.get("uid-boss") is None
    await assert_all_answer(embedded, pod)


async def test_row2_a_legitimate_gate_resumes_beside_a_hostile_one(embedded: Embedded) -> None:
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
    # The victim is gone: the keeper resumed the mirrored gate and released it (the annotation
    # removed, dry-run) in the same pass; the hostile one cost nothing.
    assert embedded.runway.gatekeeper._resumed
    assert embedded.runway.gate.get("uid-good") is None


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
    fields = ("eviction-time", "eviction-count", "eviction-requeue-at", "eviction-reason")
    before = sum(invalid(f) for f in fields)
    pod = pod_obj("victim-0", node="n1", annotations=annotations)
    embedded.add(pod)
    assert sum(invalid(f) for f in fields) > before
    await assert_all_answer(embedded, pod_obj("boss", priority=100))
    resp = await embedded.http.get("/v1/workloads/team/victim-0")
    assert resp.status_code == 200, resp.text


def test_row5_owner_kinds_outside_the_config_are_never_watched() -> None:
    watcher = OwnerWatcher(cast(Any, None), kinds=[("batch/v1", "Job")])
    watcher.ensure(OwnerRef("v1", "Secret", "team", "s"))
    watcher.ensure(OwnerRef("example.com/v1", "Thing", "team", "t"))
    assert watcher.kinds() == {}
    watcher.ensure(OwnerRef("batch/v1", "Job", "team", "j"))
    assert list(watcher.kinds()) == ["Job batch/v1"]


class _Index:
    def __init__(self) -> None:
        self.ensured: set[tuple[str, str]] = set()

    def get(self, ref: OwnerRef) -> None:
        return None

    def ensure(self, ref: OwnerRef) -> None:
        self.ensured.add(ref.kind_key)


class _Writer:
    async def update_owner(self, *a: Any) -> None:
        return None

    async def write_pods(self, *a: Any) -> list[Any]:
        return []


async def test_row5_twenty_thousand_new_owners_bounded(embedded: Embedded) -> None:
    rw = embedded.runway
    index = _Index()
    book = RecordBook(
        rw.cache,
        rw.config.wait_for_pods_ready.requeuing_strategy,
        rw.clock,
        queues=rw.queues,
        owners=index,
        writer=cast(Any, _Writer()),
        owner_kinds=[("batch/v1", "Job")],
    )
    for i in range(20_000):
        kind = ("v1", "Secret") if i % 2 else ("batch/v1", "Job")
        owner = {"apiVersion": kind[0], "kind": kind[1], "name": f"o{i}", "uid": f"u{i}"}
        pod = msgspec.convert(pod_obj(f"p{i}", owner=owner), Pod)
        targets = book.targets(workload_of(pod), pod)
        if i % 2:  # a Secret "owns" it: its record lives on the pod, as a bare pod's
            assert targets.owners == () and len(targets.pods) == 1
    assert index.ensured == {("batch/v1", "Job")}
    assert len(book._owner_memo) <= OWNER_MEMO_LIMIT


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


def test_owner_records_with_bad_values_are_reported_once_per_change() -> None:
    from app.kube.owners import OwnerMeta, OwnerObject, _KindStore

    reported: list[tuple[str, list[str]]] = []
    store = _KindStore(lambda: None, lambda key, fields: reported.append((key, fields)))
    bad = {"runway.dev/eviction-count": "9" * 5000, "runway.dev/eviction-reason": "Preempted"}
    owner = OwnerObject(OwnerMeta("j", "team", "u1", "1", annotations=bad))
    store.upsert(owner)
    store.replace([owner])  # a relist hands back the same record: not reported again
    store.upsert(owner)
    assert reported == [("team/j", ["eviction-count"])]
    changed = OwnerObject(
        OwnerMeta("j", "team", "u1", "2", annotations={**bad, "runway.dev/eviction-x": ""})
    )
    store.upsert(changed)
    assert len(reported) == 2
