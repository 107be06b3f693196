"""The Job reflector against a fake API server (respx: LIST, WATCH, 403): a Job's parallelism is
its workload's PodsReady target in ``GET /v1/workloads/{ns}/{name}``, and follows the Job when it
is scaled, re-created or deleted; without the permission runway answers with the fallback size,
says so once (log, ``runway_jobs_readable``, ``/v1/cache/summary``) and asks again quietly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app import metrics
from app.kube import readonly as kube_readonly
from app.server import create_app
from app.wiring import Runway
from tests.builders import bind, job_obj, raw_pod, runway_config
from tests.integration.kube_fake import FakeApiServer
from tests.integration.kube_helpers import client, until

T0 = 1_800_000_000.0


def job(name: str = "train", parallelism: int = 3, uid: str | None = None) -> dict[str, Any]:
    obj = job_obj(name)
    obj["spec"]["parallelism"] = parallelism
    obj["status"] = {"active": parallelism}
    if uid is not None:
        obj["metadata"]["uid"] = uid
    return obj


def job_pod(name: str, *, ready: bool, phase: str = "Running") -> dict[str, Any]:
    obj = bind(raw_pod(name, namespace="team", job="train"), T0, ready=ready)
    obj["status"]["phase"] = phase
    return obj


class Logged:
    """Stands in for ``app.kube.readonly``'s logger."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.infos: list[str] = []

    def warning(self, event: str, **_: object) -> None:
        self.warnings.append(event)

    def info(self, event: str, **_: object) -> None:
        self.infos.append(event)


class World:
    def __init__(self, *, refuse: int | None = None) -> None:
        self.fake = FakeApiServer()
        if refuse is not None:
            self.fake.refuse["jobs"] = refuse
        self.fake.objects["workloadrecords"] = {}
        self.fake.history["workloadrecords"] = []
        self.fake.router.get(path="/apis/runway.dev/v1alpha1/workloadrecords").mock(
            side_effect=self.fake._handle("workloadrecords")
        )
        self.kube = client(self.fake.transport)
        config = {"kubernetes": {"leaderElection": {"enable": False}}}
        self.app = create_app(runway_config(config), kube=self.kube)
        self.runway: Runway = self.app.state.runway
        assert self.runway.job_source is not None
        self.runway.job_source.refused_retry = 0.05  # the quiet retry, quickly
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://runway"
        )

    async def get(self, path: str) -> dict[str, Any]:
        resp = await self.http.get(path)
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body

    async def members(self) -> dict[str, Any]:
        view = await self.get("/v1/workloads/team/train")
        members: dict[str, Any] = view["life"]["members"]
        return members | {"podsReady": view["podsReady"]}

    def size(self) -> tuple[int, str] | None:
        """The workload's size as the cache shows it now (no HTTP: for ``until``)."""
        view = self.runway.cache.workload(next(iter(self.runway.cache.workload_keys())))
        if view is None:
            return None
        facts = self.runway.requeue.life(view)
        return facts.size, facts.size_source


@pytest.fixture
async def world(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[World, Logged]]:
    logged = Logged()
    monkeypatch.setattr(kube_readonly, "log", logged)
    w = World(refuse=getattr(request, "param", None))
    # A Job of 3: two pods Ready, the third Failed, its replacement not created yet.
    w.fake.add("jobs", job())
    w.fake.add("jobs", job("other", parallelism=5))
    w.fake.add("pods", job_pod("train-0", ready=True))
    w.fake.add("pods", job_pod("train-1", ready=True))
    w.fake.add("pods", job_pod("train-2", ready=False, phase="Failed"))
    await w.runway.start()
    yield w, logged
    await w.runway.stop()
    await w.http.aclose()
    await w.kube.aclose()


async def test_the_jobs_parallelism_is_the_target_and_follows_the_job(
    world: tuple[World, Logged],
) -> None:
    w, logged = world
    # listed before start() returned
    assert await w.members() | {"count": 2} == {
        "count": 2,
        "minAvailable": 2,
        "source": "derived",
        "size": 3,
        "sizeSource": "parallelism",
        "podsReady": False,  # KEP-349: 2 Ready of 3; the failed pod is not taken into account
    }
    summary = await w.get("/v1/cache/summary")
    assert (summary["jobs"], summary["jobsReadable"]) == (2, True)
    assert metrics.JOBS_READABLE._value.get() == 1
    assert logged.warnings == []
    # scaled down to the pods it has left: PodsReady
    w.fake.add("jobs", job(parallelism=2))
    await until(lambda: w.size() == (2, "parallelism"), what="the scale seen")
    assert (await w.members())["podsReady"] is True
    # re-created under the same name (another UID): not the size of these pods
    w.fake.delete("jobs", "team/train")
    w.fake.add("jobs", job(parallelism=4, uid="uid-job-train-2"))
    await until(lambda: w.runway.jobs.get("team", "train") is not None, what="the new Job")
    await until(lambda: w.size() == (2, "members"), what="the new Job not taken")
    # deleted: the members it has had
    w.fake.delete("jobs", "team/train")
    await until(lambda: w.runway.jobs.get("team", "train") is None, what="the delete seen")
    assert w.size() == (2, "members")


@pytest.mark.parametrize("world", [403], indirect=True)
async def test_without_permission_runway_answers_with_the_members_and_says_so_once(
    world: tuple[World, Logged],
) -> None:
    w, logged = world
    assert w.runway.ready  # serving: the Jobs are not needed for that
    members = await w.members()
    assert (members["size"], members["sizeSource"]) == (2, "members")
    summary = await w.get("/v1/cache/summary")
    assert (summary["jobs"], summary["jobsReadable"]) == (0, False)
    assert metrics.JOBS_READABLE._value.get() == 0
    # asked again and again, quietly: one warning in all
    asked = len([q for q in w.fake.lists if q["kind"] == "jobs"])
    await until(
        lambda: len([q for q in w.fake.lists if q["kind"] == "jobs"]) >= asked + 3,
        what="the quiet retries",
    )
    assert len(logged.warnings) == 1 and "cannot read jobs.batch" in logged.warnings[0]
    # the permission granted: the sizes come, and that is said once too
    del w.fake.refuse["jobs"]
    await until(lambda: w.size() == (3, "parallelism"), what="the Job listed at last")
    assert (await w.get("/v1/cache/summary"))["jobsReadable"] is True
    assert metrics.JOBS_READABLE._value.get() == 1
    assert len(logged.infos) == 1 and len(logged.warnings) == 1


async def test_a_daemonset_counts_only_once_runway_has_read_it_with_that_uid(
    world: tuple[World, Logged],
) -> None:
    """Issue #36: the DaemonSet reflector (``app.kube.daemonsets``, through the same read-only
    source as the Jobs'): a pod naming ``kind: DaemonSet`` is queued until runway has read that
    DaemonSet with the UID in the reference; a re-created one (new UID) does not count for it."""
    w, _ = world
    agent = raw_pod("agent-x", namespace="team", node="n1")
    agent["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": "ds-1",
            "controller": True,
        }
    ]
    w.fake.add("pods", agent)
    await until(lambda: w.runway.cache.pod_by_key("team", "agent-x") is not None, what="pod")
    pods = [w.runway.cache.pod_by_key("team", "agent-x")]
    assert w.runway.records.is_queued(pods)  # type: ignore[arg-type]
    daemonset = {"metadata": {"name": "agent", "namespace": "team", "uid": "ds-1"}}
    w.fake.add("daemonsets", daemonset)
    await until(lambda: not w.runway.records.is_queued(pods), what="the DaemonSet read")  # type: ignore[arg-type]
    assert metrics.DAEMONSETS_READABLE._value.get() == 1
    w.fake.add("daemonsets", {"metadata": {**daemonset["metadata"], "uid": "ds-2"}})
    await until(lambda: w.runway.records.is_queued(pods), what="the re-created one")  # type: ignore[arg-type]
