"""``admission.k8s.io/v1`` ``AdmissionReview`` on the wire: what kube-apiserver sends runway's
mutating webhook and what it expects back (``POST /webhooks/gate``).

Decoded with msgspec into lean structs like the extender's wire: the pod becomes the same
``app.model.Pod`` the cache holds (unknown fields skipped), nothing else of the review is kept.
The reply echoes the request's ``uid``, always allows, and carries a base64 JSONPatch when the
pod is to be gated.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from app.model import Pod
from app.wire.errors import WireError

API_VERSION = "admission.k8s.io/v1"


class GroupVersionKind(msgspec.Struct, frozen=True, omit_defaults=True):
    """``request.kind``."""

    group: str = ""
    version: str = ""
    kind: str = ""


class AdmissionRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """``request``: the fields runway reads."""

    uid: str = ""
    kind: GroupVersionKind = GroupVersionKind()
    namespace: str = ""
    operation: str = ""
    object: Pod | None = None
    dryRun: bool | None = None


class AdmissionReview(msgspec.Struct, frozen=True, omit_defaults=True):
    """The review kube-apiserver posts."""

    apiVersion: str = ""
    kind: str = ""
    request: AdmissionRequest | None = None


_decoder = msgspec.json.Decoder(AdmissionReview)


def decode_review(body: bytes) -> AdmissionRequest:
    """The request of an ``AdmissionReview`` (raises ``WireError`` naming what is wrong)."""
    try:
        review = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"not an AdmissionReview: {exc}") from None
    if review.apiVersion != API_VERSION or review.kind != "AdmissionReview":
        raise WireError(
            f"apiVersion {review.apiVersion!r} kind {review.kind!r}: expected {API_VERSION} "
            "AdmissionReview (set admissionReviewVersions: [v1] in the webhook configuration)"
        )
    if review.request is None or not review.request.uid:
        raise WireError("AdmissionReview has no request.uid")
    return review.request


def encode_response(uid: str, patch: list[dict[str, Any]] | None = None) -> bytes:
    """The ``AdmissionReview`` reply: allowed, with ``patch`` as a base64 JSONPatch when given."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(msgspec.json.encode(patch)).decode("ascii")
    return msgspec.json.encode(
        {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
    )


__all__ = ["AdmissionRequest", "AdmissionReview", "decode_review", "encode_response"]
