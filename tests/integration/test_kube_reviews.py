"""TokenReview and SubjectAccessReview through the real ``KubeClient`` against respx: the
bodies runway posts, how answers become ``Identity``/``Access``, and API trouble as
``ReviewUnavailable`` (the REST layer turns it into a 503)."""

from __future__ import annotations

import json

import httpx
import pytest
import respx
from kubernetes.client import Configuration

from app.kube.access import ClusterAccess
from app.kube.client import KubeClient
from app.kube.retry import RetryPolicy
from app.kube.reviews import KubeReviewer
from app.model.auth import Access, Identity, Permission, ReviewUnavailable

KUBE = "https://kube.test"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SARS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@pytest.fixture
def router() -> respx.Router:
    return respx.Router(base_url=KUBE, assert_all_called=False)


def reviewer(router: respx.Router, audiences: list[str] | None = None) -> KubeReviewer:
    cfg = Configuration()
    cfg.host = KUBE
    cfg.api_key = {"BearerToken": "Bearer runway-sa-token"}
    kube = KubeClient(
        ClusterAccess(cfg, "test"),
        transport=httpx.MockTransport(router.async_handler),
        retry=RetryPolicy(total=0),
    )
    return KubeReviewer(kube, audiences or [])


def answer(status: dict[str, object]) -> object:
    def respond(request: httpx.Request) -> httpx.Response:
        return httpx.Response(201, json={**json.loads(request.content), "status": status})

    return respond


async def test_token_review_body_and_identity(router: respx.Router) -> None:
    user = {"username": "alice", "uid": "u-1", "groups": ["ops"], "extra": {"k": ["v"]}}
    route = router.post(TOKEN_REVIEWS)
    route.side_effect = answer({"authenticated": True, "user": user})
    identity = await reviewer(router, ["runway"]).review("tok")
    assert identity == Identity("alice", "u-1", ("ops",), {"k": ["v"]})
    request = route.calls.last.request
    assert request.headers["Authorization"] == "Bearer runway-sa-token"
    assert json.loads(request.content) == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "tok", "audiences": ["runway"]},
    }


async def test_rejected_token_is_none(router: respx.Router) -> None:
    route = router.post(TOKEN_REVIEWS)
    route.side_effect = answer({"authenticated": False, "error": "token expired"})
    assert await reviewer(router).review("tok") is None
    assert json.loads(route.calls.last.request.content)["spec"] == {"token": "tok"}


async def test_subject_access_review_bodies(router: respx.Router) -> None:
    route = router.post(SARS)
    route.side_effect = answer({"allowed": True})
    kube = reviewer(router)
    alice = Identity("alice", "u-1", ("team-a",))
    permission = Permission("update", "runway.dev", "workloads", "team-a", "job-1")
    assert await kube.allowed(alice, permission) == Access(True)
    assert json.loads(route.calls.last.request.content) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "uid": "u-1",
            "groups": ["team-a"],
            "resourceAttributes": {
                "verb": "update",
                "group": "runway.dev",
                "resource": "workloads",
                "namespace": "team-a",
                "name": "job-1",
            },
        },
    }
    await kube.allowed(Identity("bob"), Permission("get", path="/metrics"))
    assert json.loads(route.calls.last.request.content)["spec"] == {
        "user": "bob",
        "groups": [],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ({"allowed": False, "reason": "no RoleBinding"}, "no RoleBinding"),
        ({"allowed": False, "evaluationError": "webhook down"}, "webhook down"),
        ({"allowed": False}, ""),
    ],
)
async def test_denied_access_carries_the_reason(
    router: respx.Router, status: dict[str, object], reason: str
) -> None:
    router.post(SARS).side_effect = answer(status)
    got = await reviewer(router).allowed(Identity("alice"), Permission("update"))
    assert got == Access(False, reason)


@pytest.mark.parametrize(
    ("failure", "message", "retry_after"),
    [
        (httpx.ConnectError("connection refused"), "did not answer the TokenReview", "5"),
        (
            httpx.Response(503, json={"kind": "Status", "message": "etcd unavailable"}),
            "refused the TokenReview",
            "5",
        ),
        (
            httpx.Response(403, json={"kind": "Status", "message": "cannot create tokenreviews"}),
            "system:auth-delegator",
            "5",
        ),
        (httpx.Response(201, content=b"not json"), "undecodable TokenReview answer", None),
    ],
)
async def test_api_server_trouble_is_review_unavailable(
    router: respx.Router,
    failure: httpx.Response | Exception,
    message: str,
    retry_after: str | None,
) -> None:
    route = router.post(TOKEN_REVIEWS)
    if isinstance(failure, Exception):
        route.side_effect = failure
    else:
        route.return_value = failure
    with pytest.raises(ReviewUnavailable) as err:
        await reviewer(router).review("tok")
    assert err.value.message.startswith("cannot check the token")
    assert message in err.value.message
    assert err.value.retry_after == retry_after
