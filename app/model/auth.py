"""Who a REST caller is and what it may do: the answers of a token reviewer (TokenReview +
SubjectAccessReview in a cluster, ``app.kube.reviews``) as plain data the HTTP layer uses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Identity:
    """Who a token belongs to, as the reviewer says."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Access:
    """A reviewer's answer to "may this identity do that?"."""

    allowed: bool
    reason: str = ""
    """Why not (empty: no reason given)."""


class ReviewUnavailable(Exception):
    """The reviewer could not get an answer (API server down, refused, garbled): a 503."""

    def __init__(self, message: str, *, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class Permission:
    """One RBAC permission, as asked of the reviewer."""

    verb: str
    group: str = ""
    resource: str = ""
    namespace: str | None = None
    name: str | None = None
    path: str | None = None
    """A non-resource URL (``/metrics``) instead of a resource."""

    def describe(self) -> str:
        """``update workloads.runway.dev "ns/name"`` — what a Role must grant."""
        if self.path is not None:
            return f"{self.verb} on the non-resource URL {self.path}"
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        text = f"{self.verb} {what}"
        if self.name:
            text += f" named {self.name!r}"
        if self.namespace:
            text += f" in namespace {self.namespace!r}"
        return text
