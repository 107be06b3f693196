"""Without the WorkloadRecord CRD (a ``helm install --skip-crds``, a forgotten ``kubectl apply``
when running from a kubeconfig: the API server answers 404 on the list) or without the permission
(403), runway says so once, with the fix, is not ready (``/readyz`` gives the reason), shows
``runway_records_available`` 0, writes nothing, and picks the CRD up when it is installed (issue
#37 item 6). Against a fake API server (respx: LIST, WATCH, refusals)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app import metrics
from app.__main__ import main
from app.kube import client as kube_client
from app.kube import workloadrecords
from app.kube.client import KubeClient
from app.server import create_app
from app.wiring import Runway
from tests.builders import bind, raw_pod, runway_config
from tests.integration.kube_fake import FakeApiServer
from tests.integration.kube_helpers import client, until

T0 = 1_800_000_000.0
RECORDS = "/apis/runway.dev/v1alpha1/workloadrecords"
TOKEN = "0123456789abcdef0123456789abcdef"


class Logged:
    """Stands in for ``app.kube.workloadrecords``'s logger."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.infos: list[str] = []

    def error(self, event: str, **_: object) -> None:
        self.errors.append(event)

    def warning(self, event: str, **_: object) -> None:
        self.warnings.append(event)

    def info(self, event: str, **_: object) -> None:
        self.infos.append(event)


class World:
    def __init__(self, refuse: int) -> None:
        self.fake = FakeApiServer()
        self.fake.objects["workloadrecords"] = {}
        self.fake.history["workloadrecords"] = []
        self.fake.refuse["workloadrecords"] = refuse
        self.fake.router.get(path=RECORDS).mock(side_effect=self.fake._handle("workloadrecords"))
        # a Job's pod, bound and never Ready: due at once, were the records there
        pod = bind(raw_pod("train-0", namespace="team", job="train"), T0 - 3600, ready=False)
        self.fake.add("pods", pod)
        self.kube = client(self.fake.transport)
        config = {
            "auth": {"mode": "static", "staticTokens": [TOKEN]},
            "kubernetes": {"leaderElection": {"enable": False}, "startupRecordsTimeout": "20s"},
            "waitForPodsReady": {"enable": True, "timeout": "1s"},
        }
        self.app = create_app(runway_config(config), kube=self.kube)
        self.runway: Runway = self.app.state.runway
        assert self.runway.record_store is not None
        self.runway.record_store.refused_retry = 0.05  # the quiet retry, quickly
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://runway"
        )

    def record_lists(self) -> int:
        return len([q for q in self.fake.lists if q["kind"] == "workloadrecords"])

    def writes(self) -> list[Any]:
        return [c for c in self.fake.router.calls if c.request.method in ("POST", "PUT", "PATCH")]


@pytest.fixture
async def world(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[World, Logged]]:
    logged = Logged()
    monkeypatch.setattr(workloadrecords, "log", logged)
    w = World(request.param)
    started = False
    try:
        await w.runway.start()
        started = True
        yield w, logged
    finally:
        if started:
            await w.runway.stop()
        await w.http.aclose()
        await w.kube.aclose()


@pytest.mark.parametrize("world", [404], indirect=True)
async def test_a_missing_crd_is_one_clear_error_not_ready_and_picked_up_when_installed(
    world: tuple[World, Logged],
) -> None:
    w, logged = world
    # start() did not wait out startupRecordsTimeout (20 s): the refusal is an answer
    assert w.runway.record_store is not None and not w.runway.record_store.available
    (error,) = logged.errors
    assert "WorkloadRecord CRD" in error and "kubectl apply -f helm/runway/crds/" in error
    ready = await w.http.get("/readyz")
    assert ready.status_code == 503 and "kubectl apply -f helm/runway/crds/" in ready.text
    assert not w.runway.ready
    assert metrics.RECORDS_AVAILABLE._value.get() == 0
    assert "runway_records_available 0.0" in (await w.http.get("/metrics")).text
    # asked again and again, quietly; the due workload is not evicted (nowhere to record it)
    asked = w.record_lists()
    await until(lambda: w.record_lists() >= asked + 3, what="the quiet retries")
    assert len(logged.errors) == 1 and logged.warnings == []
    assert w.writes() == [] and w.runway.evictor.evicted == 0
    # a person's deactivation cannot be kept either: refused with the reason, nothing sent
    denied = await w.http.post(
        "/v1/workloads/team/train:deactivate", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert denied.status_code == 503 and "kubectl apply -f helm/runway/crds/" in denied.text
    assert w.writes() == []
    # the CRD installed: listed on the next try, ready, said once
    del w.fake.refuse["workloadrecords"]
    await until(lambda: w.runway.ready, what="ready once the CRD is there")
    assert (await w.http.get("/readyz")).text == "ok"
    assert metrics.RECORDS_AVAILABLE._value.get() == 1
    assert len(logged.infos) >= 1 and "readable again" in logged.infos[-1]


@pytest.mark.parametrize("world", [403], indirect=True)
async def test_no_permission_on_the_records_names_the_grant(world: tuple[World, Logged]) -> None:
    w, logged = world
    (error,) = logged.errors
    assert "may not list workloadrecords.runway.dev" in error and "ClusterRole" in error
    ready = await w.http.get("/readyz")
    assert ready.status_code == 503 and "403" in ready.text
    assert metrics.RECORDS_AVAILABLE._value.get() == 0


@pytest.mark.parametrize(
    ("refuse", "code", "said"),
    [
        (None, 0, "workloadrecords (runway.dev/v1alpha1) installed and readable"),
        (404, 3, "kubectl apply -f helm/runway/crds/"),
        (403, 3, "may not list workloadrecords.runway.dev"),
    ],
)
def test_check_config_with_a_kubeconfig_reports_the_crd(
    refuse: int | None,
    code: int,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = FakeApiServer()
    fake.objects["workloadrecords"] = {}
    fake.history["workloadrecords"] = []
    if refuse is not None:
        fake.refuse["workloadrecords"] = refuse
    fake.router.get(path=RECORDS).mock(side_effect=fake._handle("workloadrecords"))
    asked: list[str | None] = []

    def connect(config: object, *, kubeconfig: str | None = None) -> KubeClient:
        asked.append(kubeconfig)
        return client(fake.transport)

    monkeypatch.setattr(kube_client, "connect", connect)
    file = tmp_path / "runway.yaml"
    file.write_text("{}\n")
    assert main(["check-config", str(file), "--kubeconfig", "/k/config"]) == code
    out = capsys.readouterr()
    assert said in (out.out if code == 0 else out.err)
    assert asked == ["/k/config"]
    assert main(["check-config", str(file)]) == 0 and len(asked) == 1  # no flag: no cluster
