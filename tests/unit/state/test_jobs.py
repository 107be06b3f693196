"""state/jobs: the Jobs' sizes as the Job reflector feeds them, what a workload gets from its Job
(only with the Job's UID on one of its pods) and when the index says a size moved."""

from __future__ import annotations

from typing import Any

import pytest

from app.model.job import Job
from app.policy.workload import WorkloadKey
from app.state.jobs import JobSize, JobSizes
from tests.builders import job as build_job
from tests.builders import pod, raw_pod


def job(
    name: str = "train",
    *,
    namespace: str = "ns",
    uid: str | None = None,
    parallelism: int | None = 3,
    completions: int | None = None,
) -> Job:
    return build_job(name, namespace, uid=uid, parallelism=parallelism, completions=completions)


class Recorder:
    def __init__(self) -> None:
        self.changed: list[tuple[str, str]] = []

    def __call__(self, namespace: str, name: str) -> None:
        self.changed.append((namespace, name))


@pytest.mark.parametrize(
    ("events", "size", "told"),
    [
        # (event, job) in order → the size of ns/train afterwards, and how often it was told
        ([("upsert", job())], JobSize("uid-job-train", 3), 1),
        # a status change only (the same spec): not told again
        ([("upsert", job()), ("upsert", job())], JobSize("uid-job-train", 3), 1),
        # scaled: told
        ([("upsert", job()), ("upsert", job(parallelism=5))], JobSize("uid-job-train", 5), 2),
        # completions below parallelism cap it (Kueue's podsCount)
        ([("upsert", job(parallelism=4, completions=2))], JobSize("uid-job-train", 2), 1),
        # scaled to 0: no size any more
        ([("upsert", job()), ("upsert", job(parallelism=0))], None, 2),
        # a hostile value is never kept
        ([("upsert", job(parallelism=10**9))], None, 0),
        ([("upsert", job(parallelism=-3))], None, 0),
        # deleted
        ([("upsert", job()), ("delete", job())], None, 2),
        # re-created under the same name: the new UID
        (
            [("upsert", job()), ("delete", job()), ("upsert", job(uid="u2", parallelism=2))],
            JobSize("u2", 2),
            3,
        ),
        # a late DELETED of the old Job does not remove the new one
        ([("upsert", job(uid="u2")), ("delete", job(uid="u1"))], JobSize("u2", 3), 1),
        # a LIST replaces everything: the same size is not a change
        ([("upsert", job()), ("replace", [job(), job("other")])], JobSize("uid-job-train", 3), 1),
        ([("upsert", job()), ("replace", [job(parallelism=7)])], JobSize("uid-job-train", 7), 2),
        ([("upsert", job()), ("replace", [])], None, 2),  # refused: every size forgotten
    ],
)
def test_sizes_follow_the_jobs_events(events: list[tuple[str, Any]], size: Any, told: int) -> None:
    told_of = Recorder()
    sizes = JobSizes(on_change=told_of)
    for event, obj in events:
        getattr(sizes, event)(obj)
    assert sizes.get("ns", "train") == size
    assert told_of.changed.count(("ns", "train")) == told


def test_a_list_tells_each_job_whose_size_moved() -> None:
    told = Recorder()
    sizes = JobSizes(on_change=told)
    sizes.replace([job("a"), job("b"), job("c", namespace="other")])
    assert sorted(told.changed) == [("ns", "a"), ("ns", "b"), ("other", "c")]
    told.changed.clear()
    sizes.replace([job("a"), job("b", parallelism=1)])
    assert sorted(told.changed) == [("ns", "b"), ("other", "c")]
    assert len(sizes) == 2


def train_pod(name: str, **kw: Any) -> Any:
    return pod(raw_pod(name, namespace="ns", **kw))


JOB_KEY = WorkloadKey("ns", "train", "owner:Job")


@pytest.mark.parametrize(
    ("key", "pods", "size"),
    [
        # the Job's own pods
        (JOB_KEY, [train_pod("a", job="train"), train_pod("b", job="train")], 3),
        # pods of an earlier Job of that name (another UID): not this Job's size
        (JOB_KEY, [train_pod("a", job="train", job_uid="old")], None),
        # one of the Job's pods is enough (an old one still terminating beside it)
        (JOB_KEY, [train_pod("a", job="train", job_uid="old"), train_pod("b", job="train")], 3),
        # a workload named by a label is not a Job's, whatever owns its pods
        (
            WorkloadKey("ns", "train", "label"),
            [train_pod("a", job="train", labels={"runway.dev/workload": "train"})],
            None,
        ),
        # another namespace's Job of that name
        (WorkloadKey("other", "train", "owner:Job"), [train_pod("a", job="train")], None),
        # no Job of that name
        (WorkloadKey("ns", "eval", "owner:Job"), [train_pod("a", job="eval")], None),
    ],
)
def test_a_workload_gets_its_jobs_size_only_through_the_jobs_uid(
    key: WorkloadKey, pods: list[Any], size: int | None
) -> None:
    sizes = JobSizes()
    sizes.upsert(job())
    assert sizes.size_of(key, pods) == size
