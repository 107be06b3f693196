"""The preemption executor's Events: on each victim and its owner ("Preempted by ns/p on node
n: <rule>"), on the preemptor and its owner ("Preempting N pods on node n"); none for a failed
preemption's undeleted victims."""

from __future__ import annotations

from collections.abc import Sequence

from app.clock import ManualClock
from app.model.event import EventNote, ObjectRef
from app.model.gate import PodRef, PreemptionPlan
from app.state.gate import GateBook
from app.tasks.preemption import PreemptionExecutor
from tests.builders import cluster_cache, preemption_executor
from tests.preemption_fakes import FakeApi

P = PodRef("uid-p", "team-b", "high-0")
VICTIMS = tuple(PodRef(f"uid-v{i}", "team-a", f"low-{i}") for i in range(2))
PLAN = PreemptionPlan(
    preemptor=P, node="node-0", victims=VICTIMS, message="m", rule="reclaim: team-a 0s"
)
JOB = ObjectRef("batch/v1", "Job", "team-a", "low", "uid-job")
PREEMPTOR_JOB = ObjectRef("batch/v1", "Job", "team-b", "high", "uid-job-b")


class ListSink:
    def __init__(self) -> None:
        self.notes: list[EventNote] = []

    def emit(self, note: EventNote) -> None:
        self.notes.append(note)


def owners_of(pod: PodRef) -> Sequence[ObjectRef]:
    return (PREEMPTOR_JOB,) if pod == P else (JOB,)


def executor(api: FakeApi, sink: object) -> PreemptionExecutor:
    return preemption_executor(
        api,
        GateBook(cluster_cache()),
        ManualClock(),
        revert_timeout_s=0.1,
        events=sink,  # type: ignore[arg-type]
        owners_of=owners_of,
    )


async def test_events_on_victims_owner_and_preemptor() -> None:
    sink = ListSink()
    record = await executor(FakeApi(), sink).run(PLAN)
    assert record.result == "success", record.error
    got = sorted((str(n.regarding), n.reason, n.message) for n in sink.notes)
    # The victims are in another namespace than the preemptor: its name is not theirs to read.
    victim_msg = "Preempted by a pod in another namespace on node node-0: reclaim: team-a 0s"
    preempting = "Preempting 2 pods on node node-0: reclaim: team-a 0s"
    assert got == [
        ("Job team-a/low", "Preempted", victim_msg),  # once for the gang's owner
        ("Job team-b/high", "Preempting", preempting),
        ("Pod team-a/low-0", "Preempted", victim_msg),
        ("Pod team-a/low-1", "Preempted", victim_msg),
        ("Pod team-b/high-0", "Preempting", preempting),
    ]
    assert {n.type for n in sink.notes} == {"Normal"}
    assert not any("team-b" in n.message for n in sink.notes if n.regarding.namespace == "team-a")


async def test_no_events_for_a_preemption_that_failed_before_deleting() -> None:
    sink = ListSink()
    api = FakeApi()
    api.fail = lambda op, pod: RuntimeError("forbidden") if op == "condition" else None
    record = await executor(api, sink).run(PLAN)
    assert record.result == "error"
    assert sink.notes == []
