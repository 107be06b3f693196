"""Issue 29 item 1 on the real kube-scheduler: with no preference on, the stanza runway documents
names no ``prioritizeVerb`` and kube-scheduler never calls it, while scheduling goes on as before;
with the pool preference on (waitForPodsReady), the stanza names it and it is called."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ControlPlane, RunwayFactory, poll, write_scheduler_config

SCHEDULER = "runway-e2e-calls"


def calls(text: str, verb: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "runway_extender_requests_total" and s.labels.get("verb") == verb
    )


def bound(plane: ControlPlane, ns: str, name: str) -> bool:
    r = plane.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return r.status_code == 200 and bool(r.json()["spec"].get("nodeName"))


@pytest.mark.parametrize(
    ("config", "prioritize"),
    [
        ({}, False),  # no preference: check-config says leave prioritizeVerb out
        ({"waitForPodsReady": {"enable": True, "blockAdmission": False}}, True),
    ],
    ids=["no-preference", "pool-preference"],
)
def test_prioritize_is_called_only_when_a_preference_needs_it(
    dedicated_plane: ControlPlane, tmp_path: Path, config: dict[str, Any], prioritize: bool
) -> None:
    plane = dedicated_plane
    ns = "calls-" + ("p" if prioritize else "np")
    plane.ensure_namespace(ns)
    for i in range(2):
        with contextlib.suppress(AssertionError):  # the module's plane may have them already
            plane.create_node(f"calls-n{i}")
    factory = RunwayFactory(plane, tmp_path)
    cfg = {**config, "kubernetes": {"leaderElection": {"enable": False}}}
    try:
        rw = factory.start(cfg)
        stanza = write_scheduler_config(
            tmp_path / "scheduler.yaml",
            rw.url,
            release=plane.release,
            scheduler_name=SCHEDULER,
            prioritize=prioritize,
        )
        plane.start_scheduler(stanza)
        try:
            for i in range(5):
                plane.create_pod(f"p{i}", ns, scheduler_name=SCHEDULER)
            poll(
                lambda: all(bound(plane, ns, f"p{i}") for i in range(5)),
                within=60,
                what="every pod bound through runway",
            )
        finally:
            plane.stop_scheduler()
        text = rw.client.get("/metrics").text
        assert calls(text, "filter") >= 5
        if prioritize:
            assert calls(text, "prioritize") >= 5
        else:
            assert calls(text, "prioritize") == 0  # one call per cycle fewer
    finally:
        factory.close()
