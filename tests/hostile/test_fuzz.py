"""Deliverable 6's fuzzer: hypothesis writes annotations, labels and ownerReferences on the
cached pods and on the verb's pod, then filter, prioritize, preempt, the REST reads, the
PodsReady evictor's pass and the gate keeper's pass run. None may answer 5xx or raise; memory
stays bounded (the caches hold what was put in, the logs their caps)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import msgspec
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from app.model import Pod
from app.model.eviction import KEYS
from app.state.records import MEMO_LIMIT
from tests.hostile.conftest import build_embedded, filter_body, pod_obj, preempt_body

RUNWAY, CLOCK, APP = build_embedded()

NASTY = st.sampled_from(
    [
        "",
        " ",
        "²",
        "٣",
        "-1",
        "0",
        "1e309",
        "NaN",
        "Infinity",
        "9" * 5000,
        "[" * 70_000,
        "{" * 1000,
        "\x00",
        "\ud7ff\ufeff",
        "2027-01-01T00:00:00Z",
        "0001-01-01T00:00:00-23:59",
        "9999-12-31T23:59:59+23:59",
        "Preempted",
        "PodsReadyTimeout",
        "true",
        json.dumps({"node": "n1", "victims": [["u", "team", "v"]], "since": 0, "deadline": 1e308}),
        json.dumps({"node": "n1", "victims": [["u", "team"]], "since": 0, "deadline": 1}),
    ]
)
VALUES = st.one_of(NASTY, st.text(max_size=40))
ANNOTATION_KEYS = st.sampled_from(
    [
        *KEYS,
        "runway.dev/min-available",
        "runway.dev/preemption-gate",
        "runway.dev/requeue-wake",
        "runway.dev/other",
    ]
)
LABEL_KEYS = st.sampled_from(
    [
        "runway.dev/queue",
        "kai.scheduler/queue",
        "kueue.x-k8s.io/queue-name",
        "runway.dev/workload",
        "scheduling.x-k8s.io/pod-group",
    ]
)
OWNERS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(["batch/v1", "v1", "", "x/y/z", "ray.io/v1"]),
            "kind": st.sampled_from(["Job", "Secret", "", "RayJob", "DaemonSet", "Node"]),
            "name": st.sampled_from(["j", "", "a" * 300]),
            "uid": st.sampled_from(["u", ""]),
        }
    ),
)
PODS = st.lists(
    st.tuples(
        st.dictionaries(ANNOTATION_KEYS, VALUES, max_size=4),
        st.dictionaries(LABEL_KEYS, st.sampled_from(["a", "b", "research", "x" * 63]), max_size=3),
        OWNERS,
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


def hostile_pod(i: int, spec: tuple[Any, ...]) -> dict[str, Any]:
    annotations, labels, owner, bound = spec
    return pod_obj(
        f"p{i}",
        node="n1" if bound else None,
        annotations=annotations,
        labels=labels,
        owner=owner,
        rv=str(i + 1),
    )


async def exercise(objs: list[dict[str, Any]], preemptor: dict[str, Any]) -> None:
    RUNWAY.cache.replace_pods([msgspec.convert(o, Pod) for o in objs])
    uids = [o["metadata"]["uid"] for o in objs if o["spec"].get("nodeName")]
    transport = httpx.ASGITransport(app=APP)
    async with httpx.AsyncClient(transport=transport, base_url="http://runway") as http:
        for verb, body in (
            ("filter", filter_body(preemptor)),
            ("prioritize", filter_body(preemptor)),
            ("preempt", preempt_body(preemptor, {"n1": uids})),
        ):
            resp = await http.post(f"/scheduler/{verb}", content=msgspec.json.encode(body))
            assert resp.status_code < 500, (verb, resp.text)
        for path in ("/v1/queues", "/v1/workloads/team/p0", "/v1/preemptions/decisions"):
            resp = await http.get(path)
            assert resp.status_code < 500, (path, resp.text)
    CLOCK.advance(61)
    await RUNWAY.evictor.run_once()
    await RUNWAY.gatekeeper.run_once()
    await RUNWAY.waker.run_once()
    for entry in list(RUNWAY.gate):  # the next example starts without gates
        RUNWAY.gate.release(entry.preemptor.uid)


ROW1 = ({"runway.dev/min-available": "²"}, {}, None, True)
ROW2 = ({"runway.dev/preemption-gate": "[" * 100_000}, {}, None, False)
ROW5 = ({}, {}, {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "u"}, True)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no slow "explain"
)
@example(pods=[ROW1, ROW1], preemptor=ROW1[:3])
@example(pods=[ROW2, ROW5], preemptor=ROW2[:3])
@given(
    pods=PODS,
    preemptor=st.tuples(
        st.dictionaries(ANNOTATION_KEYS, VALUES, max_size=4),
        st.dictionaries(LABEL_KEYS, st.sampled_from(["a", "research", ""]), max_size=3),
        OWNERS,
    ),
)
def test_hostile_cluster_values_never_break_a_verb_or_a_pass(
    pods: list[tuple[Any, ...]], preemptor: tuple[Any, ...]
) -> None:
    objs = [hostile_pod(i, spec) for i, spec in enumerate(pods)]
    annotations, labels, owner = preemptor
    boss = pod_obj("boss", priority=100, annotations=annotations, labels=labels, owner=owner)
    asyncio.run(exercise(objs, boss))
    assert len(RUNWAY.cache) == len({o["metadata"]["uid"] for o in objs})
    assert len(RUNWAY.decisions) <= RUNWAY.decisions.size
    assert RUNWAY.decisions.bytes <= RUNWAY.decisions.max_bytes
    assert len(RUNWAY.records._life_memo) <= MEMO_LIMIT + 2 * RUNWAY.cache.workload_count() + 1
    assert RUNWAY.evictor.alive or not RUNWAY.evictor.started
