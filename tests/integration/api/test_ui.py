"""``/ui/`` in a real browser: headless Chromium from Debian (chromium, chromium-driver; .ci/run
installs them) driven by selenium against runway served over HTTP with a populated state.
Checks that what the page shows is what the REST API answers, that it loads nothing from
elsewhere, and keeps screenshots as test artefacts (``tests/browser.py``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.clock import ManualClock
from app.config import parse_config
from app.config.security import TLSConfig
from app.kube.peers import LeaderReader
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.gate import PodRef, PreemptionPlan
from app.model.timestamps import format_time
from app.policy.workload import WorkloadKey
from app.server import create_app
from app.tasks.preemption import PreemptionRecord
from app.wiring import Runway
from tests.browser import cells, chromium, loaded, require_chromium, shot, sign_in
from tests.builders import bind, pod, pod_obj, raw_pod, write_record
from tests.served import serve_in_thread

TOKEN = "0123456789abcdef0123456789abcdef"

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402

CONFIG: dict[str, Any] = {
    "queues": [
        {"name": "research", "preemptMinRuntime": "30m"},
        {"name": "vision", "parent": "research", "queueingStrategy": "StrictFIFO"},
        {"name": "nlp", "parent": "research", "reclaimMinRuntime": "10m"},
    ],
    "preemption": {"async": False},
}


def add(runway: Runway, obj: dict[str, Any]) -> None:
    runway.cache.upsert_pod(pod(obj))
    runway.cache.pods_synced = True


def workload(name: str, queue: str, now: float, *, created: float, **kw: Any) -> dict[str, Any]:
    obj = pod_obj(name, labels={"runway.dev/queue": queue, "runway.dev/workload": name}, **kw)
    obj["metadata"]["creationTimestamp"] = format_time(created)
    return obj


def populate(runway: Runway, now: float) -> None:
    """Pending order in both leaves, protected and unprotected admitted workloads, backoff,
    deactivation, a preemption in flight and one finished, and a real preempt decision."""
    for i, name in enumerate(["resnet-a", "resnet-b", "resnet-c"]):
        add(runway, workload(name, "vision", now, created=now - 900 + 60 * i))
    add(runway, workload("bert-pending", "nlp", now, created=now - 120))
    add(runway, workload("bert-backoff", "nlp", now, created=now - 3000))
    add(runway, workload("gpt-deactivated", "nlp", now, created=now - 4000))
    backoff = EvictionRecord(
        PODS_READY_TIMEOUT, now - 100, count=2, requeue_at=now + 420, message="not ready in 5m"
    )
    asyncio.run(write_record(runway.records, WorkloadKey("team", "bert-backoff", "label"), backoff))
    stopped = EvictionRecord(
        PODS_READY_TIMEOUT, now - 200, count=6, deactivated=True, message="backoffLimitCount"
    )
    asyncio.run(
        write_record(runway.records, WorkloadKey("team", "gpt-deactivated", "label"), stopped)
    )
    add(runway, bind(workload("llama-young", "nlp", now, created=now - 700), now - 300))
    add(runway, bind(workload("t5-old", "nlp", now, created=now - 9000), now - 7200, node="n2"))
    runway.requeue.index.bump()
    # A preemption in flight and a finished one (the executor's own records).
    executor = runway.executor
    plan = PreemptionPlan(
        PodRef("uid-hi", "team", "bert-pending"),
        "gpu-node-1",
        (PodRef("uid-v1", "team", "t5-old"),),
        "preempted by team/bert-pending",
        rule="nlp",
    )
    executor._in_flight["uid-hi"] = PreemptionRecord(plan, started=time.time() - 4)
    done = PreemptionRecord(
        plan, started=time.time() - 400, finished=time.time() - 398, result="success", seconds=1.9
    )
    executor._recent.append(done)


def preempt(http: httpx.Client, now: float, runway: Runway) -> None:
    """A real preempt verb: the young victim is protected, the old one goes."""
    labels = {"runway.dev/queue": "nlp", "runway.dev/workload": "urgent"}
    urgent = raw_pod("urgent", namespace="team", uid="uid-urgent", labels=labels, priority=1000)
    urgent["metadata"]["creationTimestamp"] = format_time(now - 5)
    add(runway, urgent)
    young = runway.cache.pod_by_key("team", "llama-young")
    old = runway.cache.pod_by_key("team", "t5-old")
    assert young is not None and old is not None
    body = {
        "Pod": urgent,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": young.metadata.uid}], "NumPDBViolations": 0},
            "n2": {"Pods": [{"UID": old.metadata.uid}], "NumPDBViolations": 0},
        },
    }
    resp = http.post("/scheduler/preempt", content=json.dumps(body))
    assert resp.status_code == 200, resp.text
    assert "n2" in resp.json()["NodeNameToMetaVictims"]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "chrome") as driver:
        yield driver


def test_the_page_shows_what_the_rest_api_answers(browser: Any) -> None:
    now = time.time()
    app = create_app(parse_config(CONFIG), ManualClock(now))
    runway: Runway = app.state.runway
    populate(runway, now)
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as http:
        preempt(http, now, runway)
        started = time.time()
        browser.get(url + "/ui")  # redirected to /ui/
        assert browser.current_url == url + "/ui/"
        loaded(browser, started)
        path = shot(browser, "populated")
        assert path.stat().st_size > 10_000

        # Each leaf: the pending order and why each waits, as GET /v1/workloads says.
        items = http.get("/v1/workloads").json()["items"]
        for leaf in ("vision", "nlp"):
            pending = http.get(f"/v1/queues/{leaf}/pending").json()["pending"]
            rows = cells(browser, f"#pending-{leaf}")
            assert [r[1] for r in rows] == [p["workload"] for p in pending]
            assert [int(r[0]) for r in rows] == [p["position"] for p in pending]
            by_name = {f"{w['namespace']}/{w['name']}": w for w in items}
            assert [r[6] for r in rows] == [by_name[p["workload"]]["reason"] for p in pending]
            assert [r[4] for r in rows] == [by_name[p["workload"]]["rule"] or "-" for p in pending]
        assert any(r[4] == "strict-fifo" for r in cells(browser, "#pending-vision"))
        # Counts per queue.
        for q in http.get("/v1/queues").json()["queues"]:
            counts = browser.find_element(By.CSS_SELECTOR, f"#queue-{q['name']} .counts")
            assert counts.get_attribute("data-pending") == str(q["counts"]["pending"])
            assert counts.get_attribute("data-admitted") == str(q["counts"]["admitted"])
        # Protected workloads, with the time their protection ends.
        protected = sorted(
            (f"{w['namespace']}/{w['name']}", w["protectedUntil"])
            for w in items
            if w["state"] == "admitted" and w["protectedUntil"] > format_time(now)
        )
        assert protected == [("team/llama-young", format_time(now - 300 + 1800))]
        assert sorted((r[0], r[3]) for r in cells(browser, "#protected")) == protected
        # Backoff and deactivated, with the requeue time.
        held = sorted(
            (f"{w['namespace']}/{w['name']}", w["state"], w["requeueAt"] or "-")
            for w in items
            if w["state"] in ("backoff", "deactivated")
        )
        assert [h[1] for h in held] == ["backoff", "deactivated"]
        assert sorted((r[0], r[2], r[3]) for r in cells(browser, "#held")) == held
        # Preemptions in flight and finished.
        tasks = http.get("/v1/preemptions").json()
        shown = [(r[0], r[1], r[2]) for r in cells(browser, "#inflight")]
        assert shown == [
            (t["preemptor"], t["node"], ", ".join(t["victims"])) for t in tasks["inFlight"]
        ]
        assert [r[3] for r in cells(browser, "#recent")] == [t["result"] for t in tasks["recent"]]
        # The decision, with its explanation and each victim's outcome on the chosen node.
        decisions = http.get("/v1/preemptions/decisions", params={"limit": 20}).json()["decisions"]
        rows = cells(browser, "#decisions")
        assert [(r[1], r[2]) for r in rows] == [
            (d["preemptor"]["pod"], d["chosenNode"]) for d in decisions
        ]
        assert decisions[0]["reason"] in rows[0][4] and "team/t5-old: " in rows[0][4]

        # Nothing but runway itself was loaded.
        loaded_urls = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert loaded_urls and all(u.startswith(url + "/") for u in loaded_urls), loaded_urls

        # A change shows at the next refresh.
        add(runway, workload("resnet-d", "vision", now, created=now - 10))
        runway.requeue.index.bump()
        again = time.time()
        browser.find_element(By.ID, "refresh").click()
        loaded(browser, again)
        assert cells(browser, "#pending-vision")[-1][1] == "team/resnet-d"


def test_with_protected_reads_the_page_asks_for_a_token(browser: Any) -> None:
    config = {
        **CONFIG,
        "auth": {"mode": "static", "staticTokens": [TOKEN], "protectReadOnly": True},
    }
    app = create_app(parse_config(config), ManualClock(time.time()))
    populate(app.state.runway, time.time())
    with serve_in_thread(app) as url:
        browser.get(url + "/ui/")
        sign_in(browser, TOKEN)
        shot(browser, "signed-in")
        assert cells(browser, "#pending-vision")[0][1] == "team/resnet-a"


def test_only_the_pages_own_files_are_served() -> None:
    app = create_app(parse_config(CONFIG))
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as http:
        index = http.get("/ui/")
        assert (
            index.status_code == 200
            and "default-src 'self'" in index.headers["content-security-policy"]
        )
        assert http.get("/ui/ui.js").headers["content-type"].startswith("text/javascript")
        nope = http.get("/ui/secrets.txt")
        assert nope.status_code == 404 and "no file" in nope.json()["error"]


class _Role:
    """The app's cluster facts, but this leadership and identity."""

    def __init__(self, cluster: Any, leadership: bool, identity: str) -> None:
        self._cluster, self.leadership, self.identity = cluster, leadership, identity

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


def _as(app: Any, leadership: bool, identity: str, **parts: Any) -> Any:
    ctx = app.state.context
    app.state.context = dataclasses.replace(
        ctx, cluster=_Role(ctx.cluster, leadership, identity), **parts
    )
    return app


def test_a_followers_page_shows_the_leaders_decisions_or_says_it_could_not(browser: Any) -> None:
    # Issue #35 item 5: "Recent preempt decisions" was empty when a follower served the page.
    now = time.time()
    leader = _as(create_app(parse_config(CONFIG), ManualClock(now)), True, "leader-0")
    runway: Runway = leader.state.runway
    populate(runway, now)
    with serve_in_thread(leader) as url, httpx.Client(base_url=url) as http:
        preempt(http, now, runway)
        deadline = time.monotonic() + 10
        while runway.executor.pending_tasks():  # the dry-run task; its record then stays put
            assert time.monotonic() < deadline
            time.sleep(0.01)  # polling interval
        decisions = http.get("/v1/preemptions/decisions", params={"limit": 20}).json()
    assert decisions["decisions"]
    # The follower asks the leader in process (ASGI): the leader's server is stopped by now.
    reads = LeaderReader(
        lambda: True,
        lambda: "http://leader",
        TLSConfig(),
        identity="follower-1",
        timeout=5,
        present_certificate=False,
        transport=httpx.ASGITransport(app=leader),
    )
    follower = _as(
        create_app(parse_config(CONFIG), ManualClock(now)), False, "follower-1", reads=reads
    )
    with serve_in_thread(follower) as url:
        started = time.time()
        browser.get(url + "/ui/")
        loaded(browser, started)
        rows = cells(browser, "#decisions")
        assert [(r[1], r[2]) for r in rows] == [
            (d["preemptor"]["pod"], d["chosenNode"]) for d in decisions["decisions"]
        ]
        assert cells(browser, "#inflight") and cells(browser, "#recent")
        assert not browser.find_element(By.ID, "served").is_displayed()
    # No leader to ask: the follower's own (empty) answers, and the page says so.
    alone = _as(create_app(parse_config(CONFIG), ManualClock(now)), False, "follower-2")
    with serve_in_thread(alone) as url:
        started = time.time()
        browser.get(url + "/ui/")
        loaded(browser, started)
        notice = browser.find_element(By.ID, "served")
        assert notice.is_displayed() and "(follower (no leader))" in notice.text, notice.text
        assert cells(browser, "#decisions") == []
        shot(browser, "follower-alone")
