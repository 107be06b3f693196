"""TokenReview and SubjectAccessReview: the API server's answer to "who is this token?" and
"may this user do that?". Implements ``app.api.auth.Reviewer`` for ``auth.mode: kubernetes``;
the REST layer decides what to ask and caches the answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import msgspec

from app.kube.errors import ApiError, KubeError
from app.kube.resources import Resource
from app.logs import get_logger
from app.model.auth import Access, Identity, Permission, ReviewUnavailable

log = get_logger("kube.reviews")

T = TypeVar("T")

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", namespaced=False
)

_RBAC_HINT = (
    "runway's service account needs create on tokenreviews.authentication.k8s.io and "
    "subjectaccessreviews.authorization.k8s.io (the Helm chart grants both; elsewhere bind "
    "the ClusterRole system:auth-delegator)"
)


class ReviewClient(Protocol):
    """What the reviews need of ``app.kube.client.KubeClient``: POST a review object."""

    async def create(self, resource: Resource, body: Any, *, into: type[T]) -> T:
        """Create ``body`` in ``resource`` and decode the answer into ``into``."""
        ...


class UserInfo(msgspec.Struct, omit_defaults=True):
    """``authentication.k8s.io/v1`` UserInfo."""

    username: str = ""
    uid: str = ""
    groups: list[str] = msgspec.field(default_factory=list)
    extra: dict[str, list[str]] = msgspec.field(default_factory=dict)


class TokenReviewStatus(msgspec.Struct):
    """What the API server says about a token."""

    authenticated: bool = False
    user: UserInfo = msgspec.field(default_factory=UserInfo)
    error: str = ""


class TokenReview(msgspec.Struct):
    """A TokenReview answer (only the status is read)."""

    status: TokenReviewStatus = msgspec.field(default_factory=TokenReviewStatus)


class AccessReviewStatus(msgspec.Struct):
    """What the authorizer says about one request."""

    allowed: bool = False
    denied: bool = False
    reason: str = ""
    evaluationError: str = ""


class SubjectAccessReview(msgspec.Struct):
    """A SubjectAccessReview answer (only the status is read)."""

    status: AccessReviewStatus = msgspec.field(default_factory=AccessReviewStatus)


def attributes(permission: Permission) -> dict[str, Any]:
    """The SubjectAccessReview ``spec`` attributes of ``permission``."""
    if permission.path is not None:
        return {"nonResourceAttributes": {"path": permission.path, "verb": permission.verb}}
    attrs = {"verb": permission.verb, "group": permission.group, "resource": permission.resource}
    where = (("namespace", permission.namespace), ("name", permission.name))
    attrs |= {k: v for k, v in where if v}
    return {"resourceAttributes": attrs}


class KubeReviewer:
    """``app.api.auth.Reviewer`` through the API server (no caching: the REST layer caches)."""

    def __init__(self, client: ReviewClient, audiences: Sequence[str] = ()) -> None:
        self.client = client
        self.audiences = list(audiences)

    async def _ask(self, what: str, resource: Resource, body: Any, into: type[T]) -> T:
        try:
            return await self.client.create(resource, body, into=into)
        except ApiError as exc:
            hint = f"; {_RBAC_HINT}" if exc.code in (401, 403) else ""
            log.warning("review refused by the API server", review=what, error=str(exc))
            raise ReviewUnavailable(
                f"cannot check the token: the API server refused the {what} ({exc}){hint}",
                retry_after="5",
            ) from None
        except KubeError as exc:
            log.warning("API server unavailable for a review", review=what, error=str(exc))
            raise ReviewUnavailable(
                f"cannot check the token: the API server did not answer the {what} ({exc}); "
                "retry later",
                retry_after="5",
            ) from None
        except msgspec.DecodeError as exc:
            raise ReviewUnavailable(
                f"cannot check the token: undecodable {what} answer ({exc})"
            ) from None

    async def review(self, token: str) -> Identity | None:
        """The user of ``token`` per a TokenReview; None when the API server rejects it."""
        spec: dict[str, Any] = {"token": token}
        if self.audiences:
            spec["audiences"] = self.audiences
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        review = await self._ask("TokenReview", TOKEN_REVIEWS, body, TokenReview)
        if not review.status.authenticated:
            log.info("token rejected by TokenReview", error=review.status.error or None)
            return None
        user = review.status.user
        return Identity(user.username, user.uid, tuple(user.groups), user.extra)

    async def allowed(self, identity: Identity, permission: Permission) -> Access:
        """Whether a SubjectAccessReview allows ``permission`` for ``identity``."""
        spec: dict[str, Any] = {"user": identity.username, "groups": list(identity.groups)}
        if identity.uid:
            spec["uid"] = identity.uid
        if identity.extra:
            spec["extra"] = identity.extra
        spec |= attributes(permission)
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        review = await self._ask(
            "SubjectAccessReview", SUBJECT_ACCESS_REVIEWS, body, SubjectAccessReview
        )
        status = review.status
        return Access(status.allowed, status.reason or status.evaluationError)
