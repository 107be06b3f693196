"""Issue #36 item 5, who may lift a deactivation, over ASGI with a faked TokenReview and
SubjectAccessReview: the record says who deactivated (``deactivatedBy``); whoever may activate
workloads in the namespace (a RoleBinding) lifts the requeue limit's deactivation and a backoff,
an operator's only an operator (the permission cluster-wide); ``:deactivate`` is an operator's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from app.api.auth import AuthGuard
from app.clock import ManualClock
from app.config import parse_config
from app.model.auth import Access, Identity, Permission
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.record import OPERATOR, RUNWAY
from app.policy.workload import WorkloadKey
from app.server import create_app
from app.wiring import Runway
from tests.asgi import asgi_client
from tests.builders import pod, pod_obj, write_record

T0 = 1_800_000_000.0
NS = "team-a"
KEY = WorkloadKey(NS, "train", "label")
TOKENS = {"ns-admin": "nadia", "operator": "olga"}


class Reviews:
    """nadia may update workloads.runway.dev in team-a (a RoleBinding: the chart's admin role
    there); olga everywhere (a ClusterRoleBinding: an operator)."""

    async def review(self, token: str) -> Identity | None:
        user = TOKENS.get(token)
        return Identity(user) if user else None

    async def allowed(self, identity: Identity, permission: Permission) -> Access:
        if identity.username == "olga":
            return Access(True, "")
        ok = permission.namespace == NS and permission.verb == "update"
        return Access(ok, "" if ok else "no RoleBinding grants it")


@pytest.fixture
async def world() -> AsyncIterator[tuple[httpx.AsyncClient, Runway]]:
    # The workload names no queue: managed all the same, it has a record.
    config = parse_config({"auth": {"mode": "kubernetes"}, "scope": {"manageWithoutQueue": True}})
    app = create_app(config, ManualClock(T0))
    app.state.auth = AuthGuard.build(config.auth, Reviews())
    runway: Runway = app.state.runway
    runway.cache.upsert_pod(
        pod(pod_obj("train-0", namespace=NS, labels={"runway.dev/workload": "train"}))
    )
    runway.cache.pods_synced = True
    async with asgi_client(app) as http:
        yield http, runway


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def call(http: httpx.AsyncClient, verb: str, token: str) -> httpx.Response:
    return await http.post(f"/v1/workloads/{NS}/train:{verb}", headers=as_(token))


LIMIT = EvictionRecord(PODS_READY_TIMEOUT, T0, count=5, deactivated=True, message="limit")


async def test_the_namespace_lifts_the_requeue_limits_deactivation(
    world: tuple[httpx.AsyncClient, Runway],
) -> None:
    http, runway = world
    await write_record(runway.records, KEY, LIMIT)
    assert runway.records.state(KEY).authority == RUNWAY
    resp = await call(http, "activate", "ns-admin")
    assert resp.status_code == 200, resp.text
    assert resp.json()["deactivatedBy"] is None and resp.json()["state"] != "deactivated"


async def test_an_operators_deactivation_only_an_operator_lifts(
    world: tuple[httpx.AsyncClient, Runway],
) -> None:
    http, runway = world
    resp = await call(http, "deactivate", "ns-admin")
    assert resp.status_code == 403 and "only an operator" in resp.json()["error"], resp.text
    assert runway.records.state(KEY).active
    resp = await call(http, "deactivate", "operator")
    assert resp.status_code == 200, resp.text
    assert resp.json()["deactivatedBy"] == OPERATOR
    resp = await call(http, "activate", "ns-admin")
    assert resp.status_code == 403, resp.text
    assert "deactivated by an operator" in resp.json()["error"]
    assert not runway.records.state(KEY).active
    resp = await call(http, "activate", "operator")
    assert resp.status_code == 200, resp.text
    assert runway.records.state(KEY).active


async def test_an_operator_deactivating_a_limited_workload_makes_it_an_operators(
    world: tuple[httpx.AsyncClient, Runway],
) -> None:
    http, runway = world
    await write_record(runway.records, KEY, LIMIT)
    assert (await call(http, "deactivate", "operator")).status_code == 200
    assert runway.records.state(KEY).authority == OPERATOR
    assert (await call(http, "activate", "ns-admin")).status_code == 403
    # ...and the requeue limit reached again later does not make it the namespace's.
    await write_record(runway.records, KEY, replace(LIMIT, count=6))
    assert runway.records.state(KEY).authority == OPERATOR


async def test_spec_active_false_written_by_someone_else_is_an_operators(
    world: tuple[httpx.AsyncClient, Runway],
) -> None:
    """``kubectl patch wlr ... spec.active: false`` by whoever may write records (never a
    tenant): runway did not deactivate it, so it reads as an operator's."""
    http, runway = world
    await runway.records.change(KEY, lambda s: replace(s, active=False))
    assert runway.records.state(KEY).authority == OPERATOR
    assert (await call(http, "activate", "ns-admin")).status_code == 403
