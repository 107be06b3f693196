"""``POST <urlPrefix>/{filter,prioritize,preempt}``: the kube-scheduler extender verbs.

Each verb is two layers: ``handle_*`` turns request bytes into reply bytes (decode → policy →
encode, no HTTP; the in-process benchmark calls it directly) and a route of a few lines adds
the body cap, metrics, logging and the mapping of bad input to 4xx. A normal rejection is a 200
with reasons inside: kube-scheduler throws away the body of any other status.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app import metrics
from app.api.body import BodyTooLarge, BuffersResponse, ClientGone, read_body
from app.api.context import ApiContext, context
from app.api.errors import error_body, error_response
from app.logs import RateLimitedWarnings, debug_enabled, get_logger
from app.policy import admission, scoring
from app.policy.crosscheck import Refusal
from app.policy.releases import Release
from app.policy.wakeup import hold_of
from app.state.preemption import PreemptOutcome
from app.wire import (
    NO_PREFERENCE,
    WireError,
    decode_preemption_args,
    encode_filter_result_parts,
    encode_host_priorities,
    encode_preemption_result,
    schema,
)
from app.wire.forwarding import FORWARDED_HEADER

log = get_logger("extender")
rejected = RateLimitedWarnings(log)
"""Bad verb requests (400, 404, 413): counted always, logged at most once per 10 s per kind."""

VERBS = ("filter", "prioritize", "preempt")


def filter_parts(ctx: ApiContext, body: bytes) -> list[bytes | memoryview]:
    """``ExtenderArgs`` → ``ExtenderFilterResult`` as buffers to write in order (zero-copy echo)."""
    args = ctx.read_args(body)
    uid = args.pod.metadata.uid
    ctx.cache.expect(uid)
    if ctx.bypass is not None:
        ctx.bypass.filtered(uid)
    now = ctx.clock.now()
    verdict = ctx.requeue.admit(args.pod, now)
    if not verdict.allowed and ctx.cache.refresh():
        # A rejection may rest on other pods' state (a StrictFIFO head, a blocker): it is
        # checked against every event that has arrived, not the last batch applied.
        verdict = ctx.requeue.admit(args.pod, now)
    if verdict.rule:
        metrics.FILTER_REJECTIONS.labels(verdict.rule).inc()
    hold = hold_of(verdict)
    if hold is not None and uid:
        # the waker wakes it when the hold ends, however briefly it held
        ctx.requeue.refused(uid, hold)
    if verdict.allowed and verdict.only_nodes is None and not verdict.except_nodes:
        # The common case never needs node names: in NodeList mode the nodes go back unparsed.
        return encode_filter_result_parts(args, None, {}, {})
    split = admission.split_nodes(verdict, args.names())
    return encode_filter_result_parts(args, split.passed, {}, split.unresolvable)


def handle_filter(ctx: ApiContext, body: bytes) -> bytes:
    """``ExtenderArgs`` → ``ExtenderFilterResult``."""
    return b"".join(filter_parts(ctx, body))


def handle_prioritize(ctx: ApiContext, body: bytes) -> bytes:
    """``ExtenderArgs`` → ``HostPriorityList``."""
    args = ctx.read_args(body)
    history = ctx.requeue.scoring_input(args.pod)
    if history.uniform:
        # The common case: nothing to prefer. Every node would score MAX_SCORE, and kube-scheduler
        # adds an extender's score to each node's total (1.20 prioritizeNodes: an unlisted node
        # adds 0), so a uniform list changes no ranking: the empty list says the same and spares
        # the scheduler decoding one entry per node (~290 µs of its CPU for 200; RESULTS #13).
        return NO_PREFERENCE
    if args.nodes is not None:
        facts = [
            scoring.NodeFacts(n, lab)
            for n, lab in zip(args.nodes.names(), args.nodes.labels(), strict=True)
        ]
    elif history.failed_pools:
        # nodeCacheCapable: labels come from runway's node cache when it has the node.
        cache = ctx.cache
        facts = [scoring.NodeFacts(n, cache.node_labels(n) or None) for n in args.names()]
    else:
        facts = [scoring.NodeFacts(n) for n in args.names()]
    scores = scoring.score_nodes(args.pod, facts, history)
    return encode_host_priorities(zip((f.name for f in facts), scores, strict=True))


NOT_LEADER = "not-leader"
"""``runway_preemptions_refused_total`` reason: a follower answered ``{}``."""


def plan_preempt(ctx: ApiContext, body: bytes) -> tuple[bytes, PreemptOutcome]:
    """``ExtenderPreemptionArgs`` → the reply bytes and the decision with its executor plan.

    Takeover (``preemption.async: true``): the reply is ``{}`` even when a node was chosen, so
    kube-scheduler deletes nothing and moves on; runway executes the plan. Scheduler executes
    (``false``): the reply names the chosen node and its victims. A refused call answers ``{}``.
    """
    args = decode_preemption_args(body)
    if ctx.cluster.leadership is False:
        # Only the leader decides and executes preemptions (DESIGN §7): a follower's picture of
        # the claims and reserved victims trails the leader's by its watch, and two deciders
        # would choose the same victims. Here the call could not be forwarded to the leader
        # (``serve_verb``): kube-scheduler retries the pod; its next preempt call may reach it.
        metrics.PREEMPTIONS_REFUSED.labels(NOT_LEADER).inc()
        return encode_preemption_result({}), PreemptOutcome(
            None, None, Refusal(NOT_LEADER, "this replica is not the leader")
        )
    outcome = ctx.decider.decide(args)
    reply: dict[str, tuple[list[str], int]] = {}
    if outcome.decision is not None:
        counts = outcome.decision.counts
        for decision_label, by_kind in (
            ("kept", counts.kept),
            ("protected", counts.protected),
            ("budget", counts.budget),
            ("reselected", counts.reselected),
            ("awaited", counts.awaited),
        ):
            for kind, n in by_kind.items():
                if n:
                    metrics.VICTIMS.labels(kind, decision_label).inc(n)
        if counts.nodes_dropped:
            metrics.PREEMPT_NODES_DROPPED.inc(counts.nodes_dropped)
        if outcome.plan is not None and not ctx.executor.takeover:
            reply = scheduler_reply(outcome.decision.reply(), ctx.decider.release)
    return encode_preemption_result(reply), outcome


def scheduler_reply(
    reply: dict[str, tuple[list[str], int]], release: Release
) -> dict[str, tuple[list[str], int]]:
    """The reply kube-scheduler executes, as its release accepts it: from 1.22 a node with no
    victims fails the whole preemption ("expected at least one victim pod"), so such a node
    (its victims already going: awaited) is not named — the pod is retried when they are
    gone, and the gate holds it meanwhile."""
    if release.zero_victim_nodes:
        return reply
    return {node: entry for node, entry in reply.items() if entry[0]}


def handle_preempt(ctx: ApiContext, body: bytes) -> bytes:
    """``ExtenderPreemptionArgs`` → ``ExtenderPreemptionResult`` (always by UID), no API calls."""
    return plan_preempt(ctx, body)[0]


Handler = Callable[[ApiContext, bytes], bytes]
_HANDLERS: dict[str, Handler] = {
    "filter": handle_filter,
    "prioritize": handle_prioritize,
    "preempt": handle_preempt,
}


def _execute(ctx: ApiContext, outcome: PreemptOutcome) -> None:
    """Hand the plan to the executor (background task; the verb never waits for its calls)."""
    if outcome.plan is not None:
        ctx.executor.submit(outcome.plan)


def answer_verb(
    ctx: ApiContext, verb: str, body: bytes | None
) -> tuple[int, list[bytes | memoryview]]:
    """The HTTP status and JSON body (as buffers) of one verb call on its whole request body;
    ``None``: the body went past ``server.maxBodyBytes`` (its reader stopped). The one handler
    of both ways in: the ASGI route (``serve_verb``) and the connection's direct path
    (``app.connections``). Bad input is a 4xx with a message, a bug a logged 500; every call
    is counted and timed."""
    start = time.perf_counter()
    outcome = "ok"
    try:
        if body is None:
            outcome = "too_large"
            message = str(BodyTooLarge(ctx.config.server.max_body_bytes))
            rejected.warning(
                f"{verb}:413", "extender request refused", verb=verb, status=413, error=message
            )
            return 413, [error_body(message)]
        if verb == "filter":
            return 200, filter_parts(ctx, body)
        if verb == "preempt":
            reply, preemption = plan_preempt(ctx, body)
            _execute(ctx, preemption)
        else:
            reply = _HANDLERS[verb](ctx, body)
        return 200, [reply]
    except WireError as exc:
        outcome = "bad_request"
        message = f"{verb}: {exc}"
        rejected.warning(
            f"{verb}:400", "extender request refused", verb=verb, status=400, error=message[:500]
        )
        return 400, [error_body(message)]
    except Exception:
        outcome = "error"
        log.exception("extender verb failed", verb=verb)
        return 500, [error_body(f"{verb}: internal error (see runway's log)")]
    finally:
        _account(verb, outcome, time.perf_counter() - start)


def _account(verb: str, outcome: str, elapsed: float) -> None:
    metrics.VERB_CALLS.record(verb, outcome, elapsed)
    if debug_enabled():
        log.debug("extender call", verb=verb, outcome=outcome, seconds=elapsed)


def closes_after(ctx: ApiContext, verb: str) -> bool:
    """Whether the connection is closed after answering ``verb``: a follower's ``preempt``
    answered ``{}`` (only the leader decides, and the call could not be forwarded to it).
    kube-scheduler keeps one connection and a Service balances connections, not calls: closed,
    its next one may reach the leader."""
    return verb == "preempt" and ctx.cluster.leadership is False


def forwards(ctx: ApiContext, verb: str) -> bool:
    """Whether a ``verb`` call is forwarded to the leader now (a follower's ``preempt``, a
    leader known): the connection's direct path leaves such calls to ``serve_verb``, which
    can wait for the leader's answer."""
    return (
        verb == "preempt"
        and ctx.cluster.leadership is False
        and ctx.forwarder is not None
        and ctx.forwarder.leader_known()
    )


async def serve_verb(request: Request, verb: str) -> Response:
    """Read the body (capped), then ``answer_verb``."""
    ctx = context(request)
    start = time.perf_counter()
    try:
        body: bytes | None = await read_body(request, ctx.config.server.max_body_bytes)
    except BodyTooLarge:
        body = None
    except ClientGone as exc:  # kube-scheduler timed out or went away: not runway's error
        log.info("extender client disconnected", verb=verb, detail=str(exc))
        _account(verb, "disconnected", time.perf_counter() - start)
        return error_response(400, f"{verb}: {exc}")
    if (
        body is not None
        and ctx.forwarder is not None
        and forwards(ctx, verb)
        and FORWARDED_HEADER not in request.headers  # never forwarded twice
    ):
        reply = await ctx.forwarder.forward(verb, body)
        if reply is not None:
            _account(verb, "forwarded", time.perf_counter() - start)
            return BuffersResponse([reply], status_code=200)
    status, parts = answer_verb(ctx, verb, body)
    response = BuffersResponse(parts, status_code=status)
    if closes_after(ctx, verb):
        response.headers["connection"] = "close"
    return response


def build_router(prefix: str) -> APIRouter:
    """The verb routes under ``prefix`` (``server.urlPrefix``)."""
    router = APIRouter(prefix=prefix, tags=["extender"])

    def _body(model: str) -> dict[str, object]:
        ref = {"$ref": f"#/components/schemas/{model}"}
        return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}

    @router.post(
        "/filter",
        response_model=schema.ExtenderFilterResult,
        openapi_extra=_body("ExtenderArgs"),
        summary="Filter the offered nodes for a pod",
        responses={400: {"model": schema.ErrorBody}, 413: {"model": schema.ErrorBody}},
    )
    async def filter_(request: Request) -> Response:
        return await serve_verb(request, "filter")

    @router.post(
        "/prioritize",
        response_model=list[schema.HostPriority],
        openapi_extra=_body("ExtenderArgs"),
        summary="Score the offered nodes 0..10",
        responses={400: {"model": schema.ErrorBody}, 413: {"model": schema.ErrorBody}},
    )
    async def prioritize(request: Request) -> Response:
        return await serve_verb(request, "prioritize")

    @router.post(
        "/preempt",
        response_model=schema.ExtenderPreemptionResult,
        openapi_extra=_body("ExtenderPreemptionArgs"),
        summary="Choose the victims of a preemption (one node)",
        responses={400: {"model": schema.ErrorBody}, 413: {"model": schema.ErrorBody}},
    )
    async def preempt(request: Request) -> Response:
        return await serve_verb(request, "preempt")

    @router.post("/{verb}", include_in_schema=False)
    async def unknown(verb: str) -> Response:
        metrics.VERB_CALLS.record("unknown", "not_found")
        message = f"unknown extender verb {verb[:100]!r}: expected one of {', '.join(VERBS)}"
        rejected.warning("unknown:404", "extender request refused", status=404, error=message)
        return error_response(404, message)

    return router
