"""The fields of a ``batch/v1`` Job runway reads: its identity, its creation and the two counts
of its size.

Read only (list+watch, ``app.kube.jobs``): runway never writes a Job. Everything else of a Job
(its pod template, status, annotations) is skipped while decoding, so a cluster's 10,000s of Jobs
cost a few strings and two integers each while a LIST is applied (``app.state.jobs`` keeps less).
"""

from __future__ import annotations

import msgspec


class JobMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """``metadata`` of a Job, as far as runway cares."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    """Set by the API server (a tenant cannot write it): its workload's *created* fact."""


class JobSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """``spec.parallelism`` and ``spec.completions`` (the API server defaults parallelism to 1;
    completions unset means "any one success completes the Job")."""

    parallelism: int | None = None
    completions: int | None = None


class Job(msgspec.Struct, frozen=True, omit_defaults=True):
    """A Job reduced to what gives its workload a size (``app.policy.workload.job_size``) and
    its creation (the queue's ``Creation`` order)."""

    metadata: JobMeta = JobMeta()
    spec: JobSpec = JobSpec()
