"""``POST /webhooks/gate``: runway's mutating admission webhook (DESIGN §5.8, issue #34).

On a pod's CREATE, kube-apiserver asks; runway answers allowed, with a JSONPatch appending the
scheduling gate ``runway.dev/admission`` when it will manage the pod (``policy.schedgate``).
The leader removes the gate when the admission chain admits the workload (``tasks.wakeup``).

Never a reason to refuse a pod: every answer is ``allowed: true`` — a bad review, an error, gates
turned off — and the chain's ``failurePolicy: Ignore`` covers a runway that is down or slow; such
a pod is held by the filter as on a release without gates. The route needs no credentials
(kube-apiserver sends none): it reads only the pod it is sent and runway's scope, and changes
nothing (the REST port serves it, so the scheduler's client certificate is not needed).
"""

from __future__ import annotations

import time

import msgspec
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app import metrics
from app.api.body import BodyTooLarge, ClientGone, read_body
from app.api.context import ApiContext, context
from app.api.errors import error_body, error_response
from app.logs import RateLimitedWarnings, debug_enabled, get_logger
from app.policy.schedgate import gate_patch, why_not_gate
from app.wire import WireError
from app.wire.admission import decode_review, encode_response

log = get_logger("webhook")
rejected = RateLimitedWarnings(log)

PATH = "/webhooks/gate"
"""Where kube-apiserver calls the webhook (the chart's MutatingWebhookConfiguration)."""
DIRECT = "gate-webhook"
"""The webhook's name among the paths the connection answers itself (``DirectVerbs``)."""

router = APIRouter(tags=["webhook"])


def gates_on(ctx: ApiContext) -> bool:
    """Whether runway gates pods now: ``admission.schedulingGates`` for the scheduler's
    release (``policy.releases.Release.gates``)."""
    return ctx.decider.release.gates(ctx.config.admission.scheduling_gates)


def review(ctx: ApiContext, body: bytes) -> tuple[bytes, str]:
    """An ``AdmissionReview`` → the reply bytes and the result (the metric's label). Raises
    ``WireError`` for a body that is no review (answered 400: kube-apiserver then applies the
    failure policy, Ignore)."""
    request = decode_review(body)
    pod = request.object
    if request.operation != "CREATE" or request.kind.kind != "Pod" or pod is None:
        return encode_response(request.uid), "passed"
    namespace = pod.metadata.namespace or request.namespace
    if namespace != pod.metadata.namespace:
        # a pod's CREATE body often names no namespace: the request's URL does
        pod = msgspec.structs.replace(
            pod, metadata=msgspec.structs.replace(pod.metadata, namespace=namespace)
        )
    why = why_not_gate(
        ctx.cache.scope, pod, ctx.cache.namespace_labels(namespace), enabled=gates_on(ctx)
    )
    if why:
        if debug_enabled():
            log.debug("pod not gated", namespace=namespace, name=pod.metadata.name, why=why)
        return encode_response(request.uid), "passed"
    return encode_response(request.uid, gate_patch(pod)), "gated"


def answer_review(ctx: ApiContext, body: bytes | None) -> tuple[int, list[bytes]]:
    """The HTTP status and body of one review on its whole request body (None: past
    ``server.maxBodyBytes``); counted and timed. The one handler of both ways in: the ASGI route
    and the connection's direct path (``app.connections.DirectVerbs``: under a burst of pod
    creations the answer does not wait behind the loop's other work once per ASGI await)."""
    start = time.perf_counter()
    result = "error"
    try:
        if body is None:
            raise BodyTooLarge(ctx.config.server.max_body_bytes)
        reply, result = review(ctx, body)
        return 200, [reply]
    except (BodyTooLarge, WireError) as exc:
        result = "bad_request"
        rejected.warning("webhook:400", "gate webhook request refused", error=str(exc)[:500])
        return 400, [error_body(f"webhook: {exc}")]
    except Exception:
        log.exception("gate webhook failed")
        return 500, [error_body("webhook: internal error (see runway's log)")]
    finally:
        metrics.WEBHOOK_REVIEWS.labels(result).inc()
        metrics.WEBHOOK_DURATION.observe(time.perf_counter() - start)


async def serve_review(request: Request) -> Response:
    """Read the body (capped), then ``answer_review``."""
    ctx = context(request)
    body: bytes | None
    try:
        body = await read_body(request, ctx.config.server.max_body_bytes)
    except BodyTooLarge:
        body = None
    except ClientGone as exc:
        metrics.WEBHOOK_REVIEWS.labels("bad_request").inc()
        return error_response(400, f"webhook: {exc}")
    status, parts = answer_review(ctx, body)
    return Response(b"".join(parts), status_code=status, media_type="application/json")


@router.post(
    PATH,
    summary="Mutating admission webhook: gate a pod runway will manage (AdmissionReview v1)",
    description="kube-apiserver's AdmissionReview of a pod CREATE; the answer is always "
    "allowed, with a JSONPatch adding the scheduling gate `runway.dev/admission` when runway "
    "manages the pod and holds with gates (`admission.schedulingGates`).",
)
async def gate(request: Request) -> Response:
    return await serve_review(request)
