"""``kubernetes:`` — how runway reaches the API server, and Lease leader election."""

from __future__ import annotations

from pydantic import Field, model_validator

from app.config.durations import Duration
from app.config.section import Section


class LeaderElectionConfig(Section):
    """Lease-based leader election (as kube-scheduler's ``leaderElection``). Only the leader
    evicts and decides preemptions (a follower forwards ``preempt`` to it); every replica
    answers ``filter`` and ``prioritize``."""

    enable: bool = Field(True, description="Elect a leader among the replicas.")
    lease_name: str = Field("runway", min_length=1, description="Name of the Lease object.")
    lease_namespace: str | None = Field(
        None,
        description="Namespace of the Lease. Unset: the service account's namespace in a pod, "
        "else `default`.",
    )
    lease_duration: Duration = Field(
        15.0,
        gt=0,
        description="How long non-leaders wait after the last renewal before taking over.",
    )
    renew_deadline: Duration = Field(
        10.0,
        gt=0,
        description="How long the leader keeps retrying a failed renewal before it steps down. "
        "Must be shorter than `leaseDuration`.",
    )
    retry_period: Duration = Field(
        2.0, gt=0, description="Time between attempts to acquire or renew the Lease."
    )
    advertise_url: str | None = Field(
        None,
        alias="advertiseURL",
        pattern=r"^https?://[^\s/]+(/[^\s]*)?$",
        max_length=512,
        description="Where the other replicas reach this one's extender verbs "
        "(`https://10.1.2.3:8888/scheduler`), written on the Lease while it leads: only the "
        "leader decides preemptions, and a follower forwards kube-scheduler's `preempt` calls "
        "there. Unset: built from the `POD_IP` environment variable (the chart sets it from the "
        "downward API) with `server`'s scheme, port and urlPrefix; no `POD_IP` either: no "
        "forwarding, a follower answers `preempt` with `{}` and kube-scheduler retries later.",
    )
    forward_ca_file: str | None = Field(
        None,
        alias="forwardCAFile",
        description="PEM bundle the leader's serving certificate is verified against when a "
        "follower forwards `preempt` over HTTPS (the chain only: the leader is reached by pod IP "
        "while its certificate names the Service). Unset: `server.tls.clientCAFile`; neither: "
        "an HTTPS replica does not forward. The chart sets its CA.",
    )
    forward_timeout: Duration = Field(
        2.0,
        gt=0,
        description="How long a follower waits for the leader's answer to a forwarded `preempt` "
        "before answering `{}` itself (keep it below the scheduler stanza's `httpTimeout`).",
    )
    read_forward_timeout: Duration = Field(
        10.0,
        gt=0,
        description="How long a follower waits for the leader's answer to a REST read it "
        "forwards (what only the leader holds: `/v1/preemptions`, `/v1/preemptions/decisions`, "
        "`/v1/gate`, `/v1/explain`, `/v1/workloads`; the leader's REST address is on the Lease "
        "too) before answering from its own memory, marked `X-Runway-Served-By: follower "
        "(leader unreachable)`.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElectionConfig:
        if self.renew_deadline >= self.lease_duration:
            raise ValueError(
                "renewDeadline must be shorter than leaseDuration, or two replicas could both "
                f"believe they lead (got renewDeadline {self.renew_deadline}s, leaseDuration "
                f"{self.lease_duration}s)"
            )
        if self.retry_period >= self.renew_deadline:
            raise ValueError(
                "retryPeriod must be shorter than renewDeadline, or a single failed renewal "
                f"loses the lease (got retryPeriod {self.retry_period}s, renewDeadline "
                f"{self.renew_deadline}s)"
            )
        return self


class KubernetesConfig(Section):
    """API server access. Without a kubeconfig (flag, this field or ``$KUBECONFIG``) and outside
    a pod, runway runs on the embedded default: no cluster, API calls logged as dry-run."""

    kubeconfig: str | None = Field(
        None, description="Path of a kubeconfig file (`serve --kubeconfig` overrides it)."
    )
    context: str | None = Field(None, description="kubeconfig context (default: current).")
    scheduler_version: str | None = Field(
        None,
        pattern=r"^v?1\.\d{1,3}(\.\d{1,4})?([-+][0-9A-Za-z.+-]{0,64})?$",
        description="The release of the kube-scheduler that calls runway (`1.34` or `v1.34.4`). "
        "What runway does for the scheduler is decided per release (DESIGN §1.1): the "
        "preemption mode on `preemption.async: auto`, zero-victim nodes, nominations. Unset: "
        "the API server's `/version` (a cluster's scheduler is its control plane's release); "
        "no cluster: 1.20's behaviour.",
    )
    qps: float | None = Field(
        None, gt=0, description="Client-side limit on API calls per second (unset: none)."
    )
    burst: int = Field(20, ge=1, description="Calls allowed at once above `qps`.")
    request_timeout: Duration = Field(
        30.0, gt=0, description="Timeout of one API call (watches excepted)."
    )
    retry_timeout: Duration = Field(
        30.0,
        ge=0,
        description="Bound on the total time one call is retried (429s, 5xx and connection "
        "errors of idempotent calls), waits included. `0s` = no retry.",
    )
    watch_timeout: Duration = Field(
        300.0,
        ge=10,
        description="A watch is re-opened after this long (server-side timeoutSeconds).",
    )
    watch_batch_window: Duration = Field(
        0.1,
        ge=0,
        le=1,
        description="Under load (pod or node watch events arriving less than this apart), the "
        "cache waits this long after applying a batch of events before reading the next: the "
        "events that arrive meanwhile are read and applied together, in one wake of the process "
        "instead of one each (on cores shared with kube-scheduler, every wake costs CPU the "
        "scheduler does not get). The price is at most this much more staleness under load; an "
        "event after a quiet spell is applied at once, and a verb that needs more (about a pod "
        "not cached yet, preempt, a filter rejection) first applies what has arrived. `0s` "
        "applies every event as it arrives.",
    )
    page_size: int = Field(
        500, ge=0, description="Objects per LIST page (`limit`); 0 = one unpaginated LIST."
    )
    startup_records_timeout: Duration = Field(
        20.0,
        ge=0,
        description="At startup, how long runway waits for the workloads' records "
        "(the WorkloadRecord list) before it serves: verbs answered without them could let a "
        "workload out of its backoff early. Keep it below the liveness probe's window.",
    )
    record_retention: Duration = Field(
        600.0,
        ge=0,
        description="A WorkloadRecord is deleted by the leader once none of its workload's pods "
        "has been seen for this long and nothing in it still holds (no backoff pending, not "
        "deactivated, no preemption in flight), owned or not: records grow with a tenant's "
        "churn, and an owner of a made-up API is never resolved by the garbage collector. "
        "`0s` = keep them until their owner or a person deletes them.",
    )
    records_per_namespace: int = Field(
        5000,
        ge=0,
        description="runway creates no WorkloadRecord in a namespace that holds this many "
        "(`0` = no cap): the workload's state is kept in the leader's memory instead and the "
        'refusal counted (`runway_record_write_failures_total{reason="capped"}`). A '
        "ResourceQuota on `count/workloadrecords.runway.dev` caps a namespace the same way.",
    )
    cache_stale_after: Duration = Field(
        60.0,
        gt=0,
        description="`/readyz` fails (503) while the pod or node list/watch has been failing "
        "for longer than this (the cache is not being fed).",
    )
    identity: str | None = Field(
        None, description="This replica's identity in the Lease. Unset: `<hostname>_<random>`."
    )
    leader_election: LeaderElectionConfig = Field(
        default_factory=LeaderElectionConfig,
        description="Lease leader election: only the leader evicts (PodsReady timeouts).",
    )
