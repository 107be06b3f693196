"""The preempt verb's victim policy (DESIGN §3): one table or scenario per rule."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

import msgspec
import pytest

from app.model import Pod
from app.model.timestamps import format_time, parse_time
from app.policy.claims import Claim
from app.policy.minruntime import PoolDefaults, resolve
from app.policy.queues import QueueNode, QueueTree
from app.policy.victims import (
    CRITERIA,
    INELIGIBLE,
    Cause,
    Counts,
    Decision,
    NodeOffer,
    PodFacts,
    Preemptor,
    Rank,
    Rule,
    WorkloadFacts,
    bucket,
    decide,
    protection,
    running_since,
    work_lost,
)
from app.policy.workload import start_time, workload_of
from tests import builders
from tests.builders import bind, raw_pod
from tests.reference import upstream_cases, wire_cases

NOW = 1_000_000.0
P = Preemptor(uid="p", key="ns/p", priority=1000, queue="team-b", workload="ns/p")


def pod(
    uid: str,
    node: str | None = "n1",
    *,
    priority: int = 100,
    queue: str = "team-a",
    workload: str = "",
    started_ago: float | None = None,
    min_runtime: float | None = None,
    cpu: int = 1000,
    memory: int = 0,
    running_ago: float | None = None,
) -> PodFacts:
    """A pod fact; protected when ``started_ago <= min_runtime``. The pod itself has run since
    its workload started unless ``running_ago`` says otherwise (a replacement)."""
    ran = started_ago if running_ago is None else running_ago
    requests = {k: v for k, v in {"cpu": cpu, "memory": memory}.items() if v}
    rule = None
    if min_runtime is not None:
        action = "preempt" if queue == P.queue else "reclaim"
        rule = Rule(action, min_runtime, f"queue {queue} sets {min_runtime:g}s", ("root", queue))
    return PodFacts(
        uid=uid,
        key=f"ns/{uid}",
        node=node,
        priority=priority,
        queue=queue,
        workload=workload,
        start=None if started_ago is None else NOW - started_ago,
        resolution=rule,
        requests=requests,
        running_since=None if ran is None else NOW - ran,
    )


def workload(
    key: str, pods: Sequence[PodFacts], min_available: int | None = None, running: int | None = None
) -> WorkloadFacts:
    return WorkloadFacts(
        key=key,
        min_available=len(pods) if min_available is None else min_available,
        running=sum(1 for p in pods if p.node) if running is None else running,
        pods=tuple(pods),
    )


def run(
    offers: dict[str, NodeOffer], workloads: Sequence[WorkloadFacts] = (), gated: bool = False
) -> Decision:
    return decide(P, offers, {w.key: w for w in workloads}, NOW, gated=gated)


def outcome(decision: Decision, uid: str, node: str | None = None) -> str:
    for rec in decision.nodes:
        if node is not None and rec.node != node:
            continue
        for r in rec.records:
            if r.uid == uid:
                return r.outcome
    raise AssertionError(f"{uid} not recorded")


def node_record(decision: Decision, node: str) -> Any:
    return next(n for n in decision.nodes if n.node == node)


# --- gate -----------------------------------------------------------------------------------


def test_gated_preemptor_is_vetoed() -> None:
    d = run({"n1": NodeOffer([pod("a")])}, gated=True)
    assert d.reply() == {}
    assert d.vetoed_by_gate and d.chosen is None
    assert "gate" in d.reason and "in flight" in d.reason


def test_no_offer_is_an_empty_reply() -> None:
    d = run({})
    assert d.reply() == {} and d.reason == "no node offered"


# --- protection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("started_ago", "min_runtime", "protected"),
    [
        (None, 600, False),  # no known start → not protected
        (10, None, False),  # nothing resolved → not protected
        (10, 600, True),
        (599.5, 600, True),
        (600, 600, True),  # now == start + minRuntime: still protected (KAI: now > start + min)
        (600.5, 600, False),
        (700, 600, False),
        (0, 0, False),  # explicit 0s: never protected
        (-5, 0, False),  # ... even with a start in the future (clock skew)
    ],
)
def test_protection_window(
    started_ago: float | None, min_runtime: float | None, protected: bool
) -> None:
    victim = pod("a", started_ago=started_ago, min_runtime=min_runtime)
    assert protection(P, victim, NOW).protected is protected
    d = run({"n1": NodeOffer([victim])})
    assert (d.reply() == {}) is protected
    assert outcome(d, "a") == ("dropped" if protected else "kept")


def test_protected_record_says_rule_path_and_until() -> None:
    d = run({"n1": NodeOffer([pod("a", started_ago=10, min_runtime=600)])})
    rec = node_record(d, "n1").records[0].to_dict()
    assert rec["outcome"] == "dropped" and rec["protected"] is True
    assert rec["action"] == "reclaim"
    assert rec["minRuntimeSeconds"] == 600
    assert rec["rule"] == "queue team-a sets 600s"
    assert rec["queuePath"] == ["root", "team-a"]
    assert parse_time(rec["protectedUntil"]) == pytest.approx(NOW - 10 + 600, abs=1)
    assert "protected until" in rec["reason"]
    assert node_record(d, "n1").outcome == "dropped"


def test_zero_rule_record_says_protection_ended_at_the_start() -> None:
    # Same answer as minruntime.protected_until and the workload view: start + 0s.
    d = run({"n1": NodeOffer([pod("a", started_ago=10, min_runtime=0)])})
    rec = node_record(d, "n1").records[0].to_dict()
    assert rec["outcome"] == "kept" and rec["protected"] is False
    assert parse_time(rec["protectedUntil"]) == pytest.approx(NOW - 10, abs=1)
    assert rec["start"] == rec["protectedUntil"]


def test_same_queue_is_preempt_kind() -> None:
    victim = pod("a", queue=P.queue, started_ago=10, min_runtime=60)
    assert protection(P, victim, NOW).action == "preempt"
    d = run({"n1": NodeOffer([victim])})
    assert d.counts.protected == {"preempt": 1}
    # without a resolution the kind still follows the queues
    assert protection(P, pod("b", queue=P.queue), NOW).action == "preempt"
    assert protection(P, pod("c", queue="x"), NOW).action == "reclaim"


def test_unknown_offered_uid_is_kept() -> None:
    d = run({"n1": NodeOffer([PodFacts.unknown("ghost", "n1")])})
    assert d.reply() == {"n1": (["ghost"], 0)}
    assert "not in runway's pod cache" in node_record(d, "n1").records[0].reason


# --- re-selection ---------------------------------------------------------------------------


def test_protected_victim_is_replaced_by_an_unprotected_lower_priority_pod() -> None:
    offers = {
        "n1": NodeOffer(
            [pod("young", started_ago=10, min_runtime=600)],
            others=[
                pod("too-high", priority=1000),  # not below the preemptor
                pod("also-young", started_ago=5, min_runtime=600),  # protected
                pod("small", cpu=500),  # frees too little alone...
                pod("old", started_ago=9999, min_runtime=600),  # just right
            ],
        )
    }
    d = run(offers)
    assert d.reply() == {"n1": (["old"], 0)}
    assert outcome(d, "young") == "dropped"
    assert outcome(d, "old") == "reselected"
    rec = next(r for r in node_record(d, "n1").records if r.uid == "old")
    assert "replaces dropped ns/young" in rec.reason and "cpu=1000m" in rec.reason
    assert d.counts.reselected == {"reclaim": 1} and d.counts.protected == {"reclaim": 1}


def test_reselection_combines_pods_and_gives_back_the_unneeded() -> None:
    offers = {
        "n1": NodeOffer(
            [pod("young", started_ago=10, min_runtime=600, cpu=2000)],
            others=[pod("a", cpu=500), pod("b", cpu=1500), pod("c", cpu=500, priority=50)],
        )
    }
    d = run(offers)
    # c (lowest priority) first, then a, then b: 2500m ≥ 2000m; a is given back (c+b = 2000m).
    assert d.reply() == {"n1": (["b", "c"], 0)}
    assert outcome(d, "b") == outcome(d, "c") == "reselected"


def test_reselection_needs_every_resource_the_dropped_victims_requested() -> None:
    young = pod("young", started_ago=10, min_runtime=600, cpu=1000, memory=4 << 30)
    cpu_only = pod("cpu-only", cpu=4000)
    d = run({"n1": NodeOffer([young], others=[cpu_only])})
    assert d.reply() == {}
    reason = node_record(d, "n1").reason
    assert "memory=4294967296" in reason and "still needed" in reason
    both = pod("both", cpu=1000, memory=8 << 30)
    d = run({"n1": NodeOffer([young], others=[cpu_only, both])})
    assert d.reply() == {"n1": (["both"], 0)}


def test_reselection_of_best_effort_victims_counts_pod_slots() -> None:
    young = pod("young", started_ago=10, min_runtime=600, cpu=0)
    d = run({"n1": NodeOffer([young], others=[pod("be", cpu=0)])})
    assert d.reply() == {"n1": (["be"], 0)}


def test_reselection_skips_pods_on_other_nodes_and_prefers_least_work_lost() -> None:
    offers = {
        "n1": NodeOffer(
            [pod("young", started_ago=10, min_runtime=600)],
            others=[
                pod("elsewhere", node="n2"),
                pod("ran-long", started_ago=5000),
                pod("ran-short", started_ago=700),
            ],
        )
    }
    assert run(offers).reply() == {"n1": (["ran-short"], 0)}


def test_node_dropped_when_nothing_can_replace() -> None:
    offers = {
        "n1": NodeOffer([pod("young", started_ago=10, min_runtime=600)]),
        "n2": NodeOffer([pod("old", node="n2", started_ago=9999, min_runtime=600)]),
    }
    d = run(offers)
    assert d.reply() == {"n2": (["old"], 0)}
    assert node_record(d, "n1").outcome == "dropped"
    assert d.counts.nodes_dropped == 1


def test_every_node_dropped_vetoes() -> None:
    d = run({"n1": NodeOffer([pod("young", started_ago=10, min_runtime=600)])})
    assert d.reply() == {} and d.chosen is None
    assert "every offered node was dropped" in d.reason


# --- one row per branch: the outcome, the Cause and the count of each rule ------------------


def _gang(*members: PodFacts) -> WorkloadFacts:
    return workload(members[0].workload, members)


_YOUNG = {"started_ago": 10.0, "min_runtime": 600.0}
BRANCHES: list[tuple[str, dict[str, NodeOffer], list[WorkloadFacts], dict[str, str], str]] = [
    # (pod, offers, workloads, reserved, expected) -> outcome / cause / count bucket
    ("v", {"n1": NodeOffer([pod("v")])}, [], {"v": "ns/q"}, "awaited already-going awaited"),
    (
        "t",
        {"n1": NodeOffer([replace(pod("t"), terminating=True), pod("v")])},
        [],
        {},
        "awaited already-going awaited",
    ),
    (
        "ghost",
        {"n1": NodeOffer([PodFacts.unknown("ghost", "n1")])},
        [],
        {},
        "kept unknown-pod kept",
    ),
    (
        "s",
        {"n1": NodeOffer([replace(pod("s"), shield="is shielded")], others=[pod("o")])},
        [],
        {},
        "dropped shielded ineligible",
    ),
    (
        "v",
        {"n1": NodeOffer([pod("v", started_ago=700, min_runtime=600)])},
        [],
        {},
        "kept not-protected kept",
    ),
    (
        "v",
        {"n1": NodeOffer([pod("v", **_YOUNG)], others=[pod("o")])},
        [],
        {},
        "dropped protected protected",
    ),
    (
        "o",
        {"n1": NodeOffer([pod("v", **_YOUNG)], others=[pod("o")])},
        [],
        {},
        "reselected replaces-dropped reselected",
    ),
    (
        "e1",
        {"n1": NodeOffer([pod("e1", workload="ns/e", **_YOUNG)])},
        [workload("ns/e", [pod(f"e{i}", workload="ns/e", **_YOUNG) for i in range(1, 4)], 2)],
        {},
        "kept above-elastic-floor kept",
    ),
    (
        "e2",
        {
            "n1": NodeOffer(
                [pod("e1", workload="ns/e", **_YOUNG), pod("e2", workload="ns/e", **_YOUNG)],
                others=[pod("o")],
            )
        },
        [workload("ns/e", [pod(f"e{i}", workload="ns/e", **_YOUNG) for i in range(1, 4)], 2)],
        {},
        "dropped elastic-floor protected",
    ),
    (
        "e1",
        {"n1": NodeOffer([pod("e1", workload="ns/e")])},
        [workload("ns/e", [pod(f"e{i}", workload="ns/e") for i in range(1, 4)], 2)],
        {},
        "kept not-protected kept",
    ),
    (
        "g2",
        {"n1": NodeOffer([pod("g1", workload="ns/g"), pod("g2", workload="ns/g")])},
        [_gang(pod("g1", workload="ns/g"), pod("g2", workload="ns/g"))],
        {},
        "kept gang-goes-whole kept",
    ),
    (
        "g2",
        {"n1": NodeOffer([pod("g1", workload="ns/g")], others=[pod("g2", workload="ns/g")])},
        [_gang(pod("g1", workload="ns/g"), pod("g2", workload="ns/g"))],
        {},
        "gang-expanded gang-member gang_expanded",
    ),
    (
        "g2",
        {"n1": NodeOffer([pod("g1", workload="ns/g")], others=[pod("g2", workload="ns/g")])},
        [_gang(pod("g1", workload="ns/g"), pod("g2", workload="ns/g"))],
        {"g2": "ns/q"},
        "awaited already-going awaited",
    ),
    (
        "g1",
        {"n1": NodeOffer([pod("g1", workload="ns/g")])},
        [_gang(pod("g1", workload="ns/g"), pod("g2", node="n2", workload="ns/g", priority=1000))],
        {},
        "dropped gang-ineligible ineligible",
    ),
    (
        "g1",
        {"n1": NodeOffer([pod("g1", workload="ns/g")])},
        [
            _gang(
                pod("g1", workload="ns/g"),
                replace(pod("g2", workload="ns/g"), shield="is shielded"),
            )
        ],
        {},
        "dropped gang-ineligible ineligible",
    ),
    (
        "g1",
        {"n1": NodeOffer([pod("g1", workload="ns/g")])},
        [_gang(pod("g1", workload="ns/g"), pod("g2", node="n2", workload="ns/g", **_YOUNG))],
        {},
        "dropped protected protected",
    ),
]


@pytest.mark.parametrize(("uid", "offers", "workloads", "reserved", "expected"), BRANCHES)
def test_each_branch_records_its_outcome_and_cause_and_counts_it_once(
    uid: str,
    offers: dict[str, NodeOffer],
    workloads: list[WorkloadFacts],
    reserved: dict[str, str],
    expected: str,
) -> None:
    outcome_, cause, bucket_ = expected.split()
    d = decide(P, offers, {w.key: w for w in workloads}, NOW, reserved=reserved)
    rec = next(r for n in d.nodes for r in n.records if r.uid == uid)
    assert (rec.outcome, rec.cause, bucket(rec)) == (outcome_, Cause(cause), bucket_)
    counted = sum(sum(getattr(d.counts, f.name).values()) for f in _COUNT_FIELDS)
    assert counted == sum(len(n.records) for n in d.nodes)  # every record in one bucket


_COUNT_FIELDS = [f for f in fields(Counts) if f.name != "nodes_dropped"]


def test_the_causes_that_no_wait_lifts_are_the_ineligible_ones() -> None:
    assert {Cause.SHIELDED, Cause.GANG_INELIGIBLE} == INELIGIBLE


def test_a_gate_backing_off_says_until_when() -> None:
    d = decide(P, {"n1": NodeOffer([pod("a")])}, {}, NOW, gated=True, gate_why="retried at 12:00")
    assert d.vetoed_by_gate and d.reason == (
        "ns/p is in the gate: retried at 12:00; preemption is vetoed until the gate opens"
    )


def test_rank_is_compared_field_by_field_in_the_criteria_order() -> None:
    assert Rank._fields == tuple(CRITERIA)
    fewer_claims = Rank(0, 9, 999, 999, 9, 9.0, "z")
    assert fewer_claims < Rank(1, 0, 0, 0, 0, 0.0, "a")
    d = run(
        {"a": NodeOffer([pod("x", node="a", priority=5)]), "b": NodeOffer([pod("y", node="b")])}
    )
    chosen = node_record(d, "a")
    assert (chosen.max_priority, chosen.priority_sum, chosen.victim_count) == (5, 5, 1)
    assert "on highest victim priority (100 > 5)" in node_record(d, "b").reason


# --- re-selection counts what the preemptor needs (issue #35) --------------------------------

MI = 1 << 20
NODE = {"cpu": 2000, "memory": 4096 * MI, "pods": 110}


@pytest.mark.parametrize(
    ("case", "preemptor", "offered", "others", "allocatable", "nominated", "expected"),
    [
        (
            # The operator's: kube-scheduler offers runway's own replica (500m, 512Mi); the
            # preemptor asks cpu only: the Job pod's cpu covers it, memory is not needed.
            "shielded replica, cpu-only preemptor",
            {"cpu": 1000},
            [("runway-0", 0, 500, 512)],
            [("job", 10, 600, 0)],
            NODE,
            {},
            ["job"],
        ),
        (
            "the same without the node's allocatable: its request bounds the need",
            {"cpu": 1000},
            [("runway-0", 0, 500, 512)],
            [("job", 10, 600, 0)],
            None,
            {},
            ["job"],
        ),
        (
            # A kube-system add-on requesting memory alone: the preemptor needs none of it.
            "add-on requesting memory only",
            {"cpu": 1000},
            [("addon", 0, 0, 256)],
            [("job", 10, 1200, 0)],
            NODE,
            {},
            ["job"],
        ),
        (
            "add-on requesting memory only, allocatable unknown: one pod slot",
            {"cpu": 1000},
            [("addon", 0, 0, 256)],
            [("job", 10, 1200, 0)],
            None,
            {},
            ["job"],
        ),
        (
            # 2000 - 500 - 600 - 800 = 100m free; 1000m asked: 900m short, 600m + 800m cover it
            # and the cheaper one alone does not.
            "the shortfall needs two pods",
            {"cpu": 1000},
            [("runway-0", 0, 500, 512)],
            [("job", 10, 600, 0), ("batch", 20, 800, 0)],
            NODE,
            {},
            ["batch", "job"],
        ),
        (
            # A pending pod nominated there at the preemptor's priority keeps its room.
            "a nominated pod's room is not free",
            {"cpu": 500},
            [("runway-0", 0, 500, 512)],
            [("job", 10, 300, 0), ("batch", 20, 300, 0)],
            NODE,
            {"cpu": 900, "pods": 1},
            ["batch", "job"],
        ),
        (
            "the preemptor asks memory too: the Job frees none",
            {"cpu": 1000, "memory": 3800 * MI},
            [("runway-0", 0, 500, 512)],
            [("job", 10, 600, 0)],
            NODE,
            {},
            None,
        ),
        (
            "a full node needs a pod slot: any pod frees one",
            {},
            [("runway-0", 0, 0, 0)],
            [("job", 10, 0, 0)],
            {"cpu": 2000, "pods": 2},
            {},
            ["job"],
        ),
    ],
)
def test_reselection_frees_what_the_preemptor_lacks_not_what_the_refused_victim_held(
    case: str,
    preemptor: dict[str, int],
    offered: list[tuple[str, int, int, int]],
    others: list[tuple[str, int, int, int]],
    allocatable: dict[str, int] | None,
    nominated: dict[str, int],
    expected: list[str] | None,
) -> None:
    def facts(uid: str, priority: int, cpu: int, memory: int) -> PodFacts:
        return pod(uid, priority=priority, cpu=cpu, memory=memory * MI)

    pre = replace(P, requests=preemptor)
    offer = NodeOffer(
        [replace(facts(*v), shield="is in protected namespace kube-system") for v in offered],
        others=[facts(*o) for o in others],
        allocatable=allocatable,
        nominated=nominated,
    )
    d = decide(pre, {"n1": offer}, {}, NOW)
    if expected is None:
        assert d.reply() == {}, case
        assert (
            "memory=" in node_record(d, "n1").reason and "still needed by ns/p" in d.nodes[0].reason
        )
    else:
        assert d.reply() == {"n1": (expected, 0)}, case
        assert all(outcome(d, uid) == "reselected" for uid in expected)
    assert all(outcome(d, v[0]) == "dropped" for v in offered)


def test_the_shortfall_is_named_when_nothing_covers_it() -> None:
    pre = replace(P, requests={"cpu": 1500})
    offer = NodeOffer(
        [replace(pod("runway-0", priority=0, cpu=500, memory=512 * MI), shield="is shielded")],
        others=[pod("job", priority=10, cpu=300)],
        allocatable=NODE,
    )
    d = decide(pre, {"n1": offer}, {}, NOW)
    # 2000 - 500 - 300 = 1200m free, 1500m asked: 300m short; the Job frees exactly that, so
    # it is taken; one more pod asking 100m leaves it 100m short.
    assert d.reply() == {"n1": (["job"], 0)}
    crowded = replace(offer, others=[*offer.others, pod("web", priority=5000, cpu=100)])
    d = decide(pre, {"n1": crowded}, {}, NOW)
    assert d.reply() == {}
    assert node_record(d, "n1").reason.endswith(
        "free only cpu=300m, pods=1 of the cpu=400m still needed by ns/p"
    )


def test_a_preemptor_whose_requests_are_unknown_needs_what_the_dropped_victims_held() -> None:
    # The last resort (an invalid quantity): the dropped victim's own requests.
    young = pod("young", started_ago=10, min_runtime=600, cpu=1000, memory=4 << 30)
    assert P.requests is None
    d = run({"n1": NodeOffer([young], others=[pod("cpu-only", cpu=4000)], allocatable=NODE)})
    assert d.reply() == {}
    assert "memory=4294967296" in node_record(d, "n1").reason


# --- gangs ----------------------------------------------------------------------------------


def test_gang_expands_on_and_off_node() -> None:
    members = [
        pod("g1", workload="ns/g"),
        pod("g2", workload="ns/g"),
        pod("g3", node="n2", workload="ns/g"),
        pod("g4", node=None, workload="ns/g"),
    ]
    d = run({"n1": NodeOffer([members[0]], others=[members[1]])}, [workload("ns/g", members)])
    assert d.reply() == {"n1": (["g1", "g2"], 0)}
    assert d.off_node == (("g3", "n2"), ("g4", None))
    assert outcome(d, "g2") == "gang-expanded" and outcome(d, "g3") == "gang-expanded"
    assert d.all_victims() == (("g1", "n1"), ("g2", "n1"), ("g3", "n2"), ("g4", None))
    assert node_record(d, "n1").victim_count == 4


def test_workload_without_facts_is_a_gang_of_the_pods_that_claim_it() -> None:
    g1, g2, g3 = (
        pod(u, node=n, workload="ns/g") for u, n in [("g1", "n1"), ("g2", "n1"), ("g3", "n2")]
    )
    d = run({"n1": NodeOffer([g1], others=[g2]), "n2": NodeOffer([], others=[g3])})
    assert d.reply() == {"n2": ([], 0)}  # no victims at all beats evicting the gang
    d = run({"n1": NodeOffer([g1], others=[g2]), "n2": NodeOffer([g3])})
    assert d.chosen == "n1" and d.all_victims() == (("g1", "n1"), ("g2", "n1"), ("g3", "n2"))


def test_sibling_missing_from_the_node_listing_is_left_to_the_executor() -> None:
    members = [pod("g1", workload="ns/g"), pod("g2", workload="ns/g")]
    d = run({"n1": NodeOffer([members[0]])}, [workload("ns/g", members)])
    assert d.reply() == {"n1": (["g1"], 0)}
    assert d.off_node == (("g2", "n1"),)


def test_gang_with_one_protected_pod_is_protected_as_a_whole() -> None:
    members = [
        pod("g1", workload="ns/g", started_ago=9999, min_runtime=600),
        pod("g2", node="n2", workload="ns/g", started_ago=10, min_runtime=600),
    ]
    d = run({"n1": NodeOffer([members[0]])}, [workload("ns/g", members)])
    assert d.reply() == {}
    reason = node_record(d, "n1").records[0].reason
    assert "gang ns/g is protected as a whole: ns/g2" in reason


def test_gang_with_a_member_at_preemptor_priority_is_ineligible() -> None:
    members = [pod("g1", workload="ns/g"), pod("g2", node="n2", workload="ns/g", priority=1000)]
    d = run({"n1": NodeOffer([members[0]])}, [workload("ns/g", members)])
    assert d.reply() == {}
    assert d.counts.ineligible == {"reclaim": 1}
    assert "not below the preemptor's 1000" in node_record(d, "n1").records[0].reason


def test_gang_siblings_free_capacity_for_dropped_victims() -> None:
    members = [pod("g1", workload="ns/g"), pod("g2", workload="ns/g")]
    young = pod("young", started_ago=10, min_runtime=600)
    d = run(
        {"n1": NodeOffer([members[0], young], others=[members[1]])}, [workload("ns/g", members)]
    )
    assert d.reply() == {"n1": (["g1", "g2"], 0)}


def test_reselected_gang_goes_as_a_whole() -> None:
    members = [pod("g1", workload="ns/g"), pod("g2", node="n2", workload="ns/g")]
    young = pod("young", started_ago=10, min_runtime=600)
    d = run({"n1": NodeOffer([young], others=[members[0]])}, [workload("ns/g", members)])
    assert d.reply() == {"n1": (["g1"], 0)}
    assert d.off_node == (("g2", "n2"),)


# --- elastic floor --------------------------------------------------------------------------


def elastic(
    n: int, min_available: int, *, started_ago: float = 10, running: int | None = None
) -> tuple[list[PodFacts], WorkloadFacts]:
    pods = [
        pod(f"e{i}", workload="ns/e", started_ago=started_ago, min_runtime=600) for i in range(n)
    ]
    return pods, workload("ns/e", pods, min_available, running)


def test_protected_elastic_may_lose_pods_down_to_min_available() -> None:
    pods, wl = elastic(6, 4)
    d = run({"n1": NodeOffer(pods[:3])}, [wl])
    # two may go; the third would leave 3 < minAvailable 4 and nothing replaces it
    assert d.reply() == {}
    assert [outcome(d, f"e{i}") for i in range(3)] == ["kept", "kept", "dropped"]
    assert "break the floor" in node_record(d, "n1").records[2].reason
    d = run({"n1": NodeOffer(pods[:2])}, [wl])
    assert d.reply() == {"n1": (["e0", "e1"], 0)}
    assert "but elastic ns/e: 6 running, minAvailable 4" in node_record(d, "n1").records[0].reason


def test_elastic_floor_uses_the_running_count() -> None:
    pods, wl = elastic(6, 4, running=5)
    d = run({"n1": NodeOffer(pods[:2])}, [wl])
    assert d.reply() == {}


def test_unprotected_elastic_has_no_floor() -> None:
    pods, wl = elastic(6, 4, started_ago=9999)
    d = run({"n1": NodeOffer(pods[:5])}, [wl])
    assert d.reply() == {"n1": ([f"e{i}" for i in range(5)], 0)}


def test_elastic_floor_applies_to_reselection() -> None:
    pods, wl = elastic(6, 4)
    young = pod("young", started_ago=10, min_runtime=600, cpu=2000)
    d = run({"n1": NodeOffer([young], others=pods[:3])}, [wl])
    assert d.reply() == {"n1": (["e0", "e1"], 0)}


# --- many preemptions at once (issue #27) ----------------------------------------------------


def claim(node: str, who: str, priority: int) -> Claim:
    return Claim(node=node, preemptor_uid=who, preemptor=f"ns/{who}", priority=priority, room=None)


def test_two_preemptors_sharing_a_gang_never_choose_a_victim_twice() -> None:
    # p chose g-0 on n1 and its sibling g-1 on n2; before the deletes land, p2 (same priority)
    # is offered n1 (claimed) and n2 with g-1: n1 is not offered twice, g-1 is awaited (its room
    # counts) and g-0 is not expanded to again.
    g0, g1 = pod("g-0", workload="ns/g"), pod("g-1", node="n2", workload="ns/g")
    gang = workload("ns/g", [g0, g1])
    p = Preemptor(uid="p", key="ns/p", priority=1000, queue="team-b")
    first = decide(p, {"n1": NodeOffer([g0])}, {"ns/g": gang}, NOW)
    assert first.all_victims() == (("g-0", "n1"), ("g-1", "n2"))
    reserved = {uid: "ns/p" for uid, _ in first.all_victims()}
    p2 = Preemptor(uid="p2", key="ns/p2", priority=1000, queue="team-b")
    d = decide(
        p2,
        {"n1": NodeOffer([g0]), "n2": NodeOffer([g1])},
        {"ns/g": gang},
        NOW,
        claims=[claim("n1", "p", 1000)],
        reserved=reserved,
    )
    assert d.chosen == "n2" and d.reply() == {"n2": ([], 0)}
    assert d.all_victims() == () and d.awaited == ("g-1",)
    assert outcome(d, "g-1", "n2") == "awaited"
    assert "already chosen by the preemption in flight of ns/p" in (
        node_record(d, "n2").records[0].reason
    )
    assert "claimed by the preemption in flight of ns/p" in node_record(d, "n1").reason
    assert d.counts.awaited == {"reclaim": 1}
    assert d.to_dict()["awaitedVictims"] == ["g-1"]


@pytest.mark.parametrize(
    ("claim_priority", "taken"),
    [
        (999, True),  # a lower claim yields to a higher priority (kube-scheduler's nominator)
        (1000, False),  # equal: never
        (2000, False),  # higher: never
    ],
)
def test_a_claim_yields_only_to_a_higher_priority(claim_priority: int, taken: bool) -> None:
    victim = pod("v")
    d = decide(
        P,
        {"n1": NodeOffer([victim])},
        {},
        NOW,
        claims=[claim("n1", "low", claim_priority)],
        reserved={"v": "ns/low"},
    )
    if taken:
        assert d.chosen == "n1" and [c.preemptor for c in d.displaced] == ["ns/low"]
        assert d.all_victims() == () and d.awaited == ("v",)  # its victim is not deleted twice
        # Named for operators (the node's record), never in the reason Events carry.
        assert (
            "takes the claim of the lower-priority preemption of ns/low"
            in node_record(d, "n1").reason
        )
        assert "ns/low" not in d.reason
        assert d.to_dict()["displacedClaims"] == [
            {"preemptor": "ns/low", "priority": 999, "node": "n1"}
        ]
    else:
        assert d.chosen is None and d.displaced == ()
        assert f"(priority {claim_priority}, not below 1000)" in node_record(d, "n1").reason


def test_a_free_node_is_preferred_to_taking_a_lower_claim() -> None:
    d = decide(
        P,
        {"n1": NodeOffer([pod("a")]), "n2": NodeOffer([pod("b", node="n2", priority=900)])},
        {},
        NOW,
        claims=[claim("n1", "low", 10)],
    )
    assert d.chosen == "n2" and d.displaced == ()
    assert "claims of lower-priority preemptions taken" in node_record(d, "n1").reason


def test_a_terminating_victim_is_awaited_not_deleted_again() -> None:
    going = PodFacts("t", "ns/t", "n1", 100, "team-a", terminating=True, requests={"cpu": 1000})
    d = run({"n1": NodeOffer([going, pod("v")])})
    assert d.reply() == {"n1": (["v"], 0)} and d.awaited == ("t",)
    assert "already terminating" in node_record(d, "n1").records[0].reason


def test_a_gang_sibling_reserved_elsewhere_is_not_expanded_to_again() -> None:
    # g-2 joined the gang after p chose g-0 and g-1: p2 evicts g-2 (the gang goes as a whole)
    # but neither g-0 nor g-1 again, and the eviction is recorded once (p's).
    g0, g1 = pod("g-0", workload="ns/g"), pod("g-1", node="n2", workload="ns/g")
    g2 = pod("g-2", node="n3", workload="ns/g")
    gang = workload("ns/g", [g0, g1, g2])
    d = decide(
        P,
        {"n3": NodeOffer([g2])},
        {"ns/g": gang},
        NOW,
        reserved={"g-0": "ns/p", "g-1": "ns/p"},
    )
    assert d.reply() == {"n3": (["g-2"], 0)} and d.off_node == ()
    assert d.counted == ("g-2",)
    assert outcome(d, "g-0") == "awaited" and outcome(d, "g-1") == "awaited"


def test_the_elastic_floor_counts_evictions_already_under_way() -> None:
    pods, wl = elastic(6, 4)
    # Alone, two of six may go (6 running, minAvailable 4); with one already being evicted by
    # another preemption, only one more may.
    assert run({"n1": NodeOffer(pods[:2])}, [wl]).reply() == {"n1": (["e0", "e1"], 0)}
    d = decide(P, {"n1": NodeOffer(pods[1:3])}, {wl.key: wl}, NOW, reserved={"e0": "ns/p0"})
    assert d.reply() == {}
    assert [outcome(d, "e1"), outcome(d, "e2")] == ["kept", "dropped"]


# --- node order -----------------------------------------------------------------------------


def _offer(node: str, *victims: tuple[int, float | None], pdb: int = 0) -> tuple[str, NodeOffer]:
    return node, NodeOffer(
        [
            pod(f"{node}-{i}", node=node, priority=prio, started_ago=ago)
            for i, (prio, ago) in enumerate(victims)
        ],
        pdb_violations=pdb,
    )


def test_work_lost_counts_each_pod_from_its_own_start() -> None:
    # A replacement bound 10 s ago in a workload started 1,000 s ago loses 10 s, not 1,000 s:
    # a node whose only victim is that replacement beats one whose victim ran 100 s itself.
    fresh = pod("fresh", started_ago=1000, running_ago=10)
    old = pod("old", node="n2", started_ago=100)
    assert work_lost([fresh], NOW) == 10.0
    d = run({"n1": NodeOffer([fresh]), "n2": NodeOffer([old])})
    assert d.chosen == "n1"
    assert node_record(d, "n1").work_lost == 10.0
    assert node_record(d, "n2").work_lost == 100.0


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"startTime": 990.0, "bound": 980.0}, 990.0),  # the kubelet's start
        ({"bound": 980.0}, 980.0),  # no startTime yet: the bind
        ({}, None),  # not bound
    ],
)
def test_running_since(status: dict[str, float], expected: float | None) -> None:
    obj = raw_pod("a")
    if "bound" in status:
        bind(obj, status["bound"])
        if "startTime" in status:
            obj["status"]["startTime"] = format_time(status["startTime"])
        else:
            del obj["status"]["startTime"]
    assert running_since(builders.pod(obj)) == expected


@pytest.mark.parametrize(
    ("a", "b", "winner", "criterion"),
    [
        (_offer("a", (1, 10), pdb=1), _offer("b", (900, 10), (900, 10)), "b", "PDB violations"),
        (
            _offer("a", (500, 10)),
            _offer("b", (100, 10), (100, 10), (100, 10)),
            "b",
            "highest victim priority",
        ),
        (
            _offer("a", (100, 10), (100, 10)),
            _offer("b", (100, 10), (50, 10)),
            "b",
            "victim priority sum",
        ),
        (_offer("a", (0, 10), (0, 10)), _offer("b", (0, 10)), "b", "victim count"),
        (_offer("a", (0, 100)), _offer("b", (0, 10)), "b", "work lost"),
        (_offer("a", (0, 100)), _offer("b", (0, None)), "b", "work lost"),  # unknown start
        # the sum of run times, not the latest start: 500 s + 10 s lose more than 200 s + 200 s
        (_offer("a", (0, 500), (0, 10)), _offer("b", (0, 200), (0, 200)), "b", "lose less work"),
        (_offer("b", (0, 10)), _offer("a", (0, 10)), "a", "node name"),
        (_offer("a", (0, 10)), _offer("b"), "b", "highest victim priority"),  # no victims
    ],
)
def test_node_order(
    a: tuple[str, NodeOffer], b: tuple[str, NodeOffer], winner: str, criterion: str
) -> None:
    d = run(dict([a, b]))
    assert d == run(dict([b, a]))
    assert d.chosen == winner
    assert len(d.reply()) == 1
    loser = next(n for n in d.nodes if n.outcome == "lost")
    assert criterion in loser.reason and winner in loser.reason


# --- records --------------------------------------------------------------------------------


def test_decision_serialises_to_json() -> None:
    members = [pod("g1", workload="ns/g"), pod("g2", node="n2", workload="ns/g")]
    offers = {
        "n1": NodeOffer(
            [members[0], pod("young", started_ago=10, min_runtime=600)],
            others=[pod("old", started_ago=9999)],
        ),
        "n2": NodeOffer([pod("x", node="n2", priority=999)], pdb_violations=2),
    }
    d = run(offers, [workload("ns/g", members)])
    doc = json.loads(json.dumps(d.to_dict(), allow_nan=False))
    assert doc["chosenNode"] == "n1"
    assert doc["preemptor"]["pod"] == "ns/p"
    assert {n["node"]: n["outcome"] for n in doc["nodes"]} == {"n1": "chosen", "n2": "lost"}
    assert doc["offNodeVictims"] == [{"uid": "g2", "node": "n2"}]
    assert doc["counts"]["protected"] == {"reclaim": 1}
    assert doc["counts"]["reselected"] == {"reclaim": 1}
    assert doc["counts"]["gangExpanded"] == {"reclaim": 1}
    assert doc["counts"]["kept"] == {"reclaim": 2}
    assert d.record_of("old") is not None and d.record_of("old").outcome == "reselected"  # type: ignore[union-attr]
    assert d.record_of("nobody") is None
    json.dumps(run({}, gated=True).to_dict(), allow_nan=False)


def test_resolution_from_the_queue_tree_plugs_in() -> None:
    # KAI design example: preemptor in leaf1, victim in leaf3 → reclaim, resolved at D (60s).
    tree = QueueTree.from_nodes(
        [
            QueueNode("A"),
            QueueNode("B", "A", reclaim_min_runtime_s=600),
            QueueNode("C", "B"),
            QueueNode("D", "B", reclaim_min_runtime_s=60),
            QueueNode("leaf1", "C", reclaim_min_runtime_s=0),
            QueueNode("leaf2", "C", reclaim_min_runtime_s=180),
            QueueNode("leaf3", "D"),
        ]
    )
    preemptor = Preemptor("p", "ns/p", 1000, "leaf1")
    res = resolve(tree, PoolDefaults(), "leaf1", "leaf3")
    victim = PodFacts("v", "ns/v", "n1", 1, "leaf3", start=NOW - 30, resolution=res)
    d = decide(preemptor, {"n1": NodeOffer([victim])}, {}, NOW)
    assert d.reply() == {}
    rec = node_record(d, "n1").records[0].to_dict()
    assert (rec["action"], rec["minRuntimeSeconds"], rec["rule"]) == ("reclaim", 60, "D")
    assert rec["queuePath"] == list(res.path)
    # At exactly start + 60 s still protected (KAI: only when now > start + minRuntime).
    assert decide(preemptor, {"n1": NodeOffer([victim])}, {}, NOW + 30).reply() == {}
    assert decide(preemptor, {"n1": NodeOffer([victim])}, {}, NOW + 30.5).reply() == {
        "n1": (["v"], 0)
    }


# --- upstream cases (KAI min-runtime) -------------------------------------------------------


# Min-runtime each KAI case resolves to (the resolution itself is app.policy.minruntime's job):
# preemptFilterFn resolves prod-team2's preemptMinRuntime (15s); reclaimFilterFn gives its value.
_PREEMPT_FILTER_MIN_RUNTIME = 15.0
_VALIDATOR_MIN_RUNTIME = {"preemptScenarioValidatorFn": 15.0, "reclaimScenarioValidatorFn": 30.0}


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["source"]["case"] for c in cases]


FILTER_CASES = upstream_cases("kai.minruntime.preempt_filter") + upstream_cases(
    "kai.minruntime.reclaim_filter"
)


@pytest.mark.parametrize("case", FILTER_CASES, ids=_ids(FILTER_CASES))
def test_kai_filter_cases(case: dict[str, Any]) -> None:
    victim = case["input"]["victim"]
    min_runtime = case["expected"].get("resolvedMinRuntime_s", _PREEMPT_FILTER_MIN_RUNTIME)
    agos = victim.get("startedAgo_s_sequence") or [victim["startedAgo_s"]]
    wants = case["expected"].get("eligibleVictim_sequence") or [case["expected"]["eligibleVictim"]]
    for ago, eligible in zip(agos, wants, strict=True):
        v = pod("v", queue=victim["queue"], started_ago=ago, min_runtime=min_runtime)
        assert (run({"n1": NodeOffer([v])}).reply() != {}) is eligible


VALIDATOR_CASES = upstream_cases("kai.minruntime.scenario_validator")


@pytest.mark.parametrize("case", VALIDATOR_CASES, ids=_ids(VALIDATOR_CASES))
def test_kai_elastic_scenario_validator(case: dict[str, Any]) -> None:
    # KAI validates a solved scenario; runway drops the victims beyond the floor instead, so a
    # valid scenario keeps every victim and an invalid one loses the node (nothing replaces).
    v = case["input"]["victim"]
    min_runtime = _VALIDATOR_MIN_RUNTIME[case["source"]["test"]]
    pods = [
        pod(
            f"e{i}",
            queue=v["queue"],
            workload="ns/e",
            started_ago=v["startedAgo_s"],
            min_runtime=min_runtime,
        )
        for i in range(v["runningPods"])
    ]
    assert all(protection(P, p, NOW).protected for p in pods)
    wl = workload("ns/e", pods, v["minAvailable"], v["runningPods"])
    assert wl.elastic
    d = run({"n1": NodeOffer(pods[: v["victimTasks"]])}, [wl])
    kept = d.reply().get("n1", ([], 0))[0]
    if case["expected"]["scenarioValid"]:
        assert len(kept) == v["victimTasks"]
    else:
        assert kept == []


# --- the reference scenario: 3 nodes, train-low (6 pods, min-available 4), high preemptor ----


def _scenario() -> tuple[Pod, dict[str, list[Pod]]]:
    case = next(c for c in wire_cases() if c["name"] == "nodelist-preempt")
    req = case["request"]
    preemptor = msgspec.convert(req["Pod"], Pod)
    victims = {
        node: [msgspec.convert(p, Pod) for p in v["Pods"]]
        for node, v in req["NodeNameToVictims"].items()
    }
    return preemptor, victims


def _scenario_decision(
    age: float, min_runtime: float, running: int | None = None, drop_annotation: bool = False
) -> tuple[Decision, float]:
    preemptor, victims = _scenario()
    every = [p for pods in victims.values() for p in pods]
    if drop_annotation:
        every = [
            msgspec.structs.replace(p, metadata=msgspec.structs.replace(p.metadata, annotations={}))
            for p in every
        ]
    start = start_time(every)
    assert start is not None
    now = start + age
    pre = Preemptor.from_pod(preemptor)
    rule = Rule("reclaim", min_runtime, "queue team-a sets reclaimMinRuntime", ("team-a",))
    facts = [PodFacts.from_pod(p, start=start, resolution=rule) for p in every]
    key = str(workload_of(every[0]))
    wl = WorkloadFacts.from_pods(key, every, facts)
    if running is not None:
        wl = WorkloadFacts(wl.key, wl.min_available, running, wl.pods)
    by_node: dict[str, list[PodFacts]] = {}
    for f in facts:
        by_node.setdefault(f.node or "", []).append(f)
    offers = {node: NodeOffer(by_node[node]) for node in victims}
    return decide(pre, offers, {key: wl}, now), now


def test_reference_scenario_elastic_train_low_loses_two_pods_on_one_node() -> None:
    d, _ = _scenario_decision(age=10, min_runtime=600)
    # protected, but 6 running - 2 evicted = 4 ≥ minAvailable 4: every node qualifies; all tie
    # on every criterion, so the name decides.
    assert d.chosen == "node-0"
    assert sorted(d.victims) == sorted(
        ["d1d4969d-d766-40e0-85d0-01147e6ddf19", "c55b6596-8b2d-48c8-b1bd-1aabeae327e5"]
    )
    assert d.off_node == ()
    assert [n.outcome for n in d.nodes] == ["chosen", "lost", "lost"]
    assert "node name" in d.nodes[1].reason
    assert d.counts.kept == {"reclaim": 6}
    assert d.to_dict()["nodes"][0]["pods"][0]["protected"] is True


def test_reference_scenario_floor_reached_vetoes() -> None:
    d, _ = _scenario_decision(age=10, min_runtime=600, running=5)
    assert d.reply() == {}
    assert d.counts.nodes_dropped == 3
    assert d.counts.protected == {"reclaim": 3}


def test_reference_scenario_as_a_gang() -> None:
    d, _ = _scenario_decision(age=10, min_runtime=600, drop_annotation=True)
    assert d.reply() == {}  # a protected gang is protected as a whole
    d, _ = _scenario_decision(age=601, min_runtime=600, drop_annotation=True)
    assert d.chosen == "node-0" and len(d.victims) == 2 and len(d.off_node) == 4
    assert {n for _, n in d.off_node} == {"node-1", "node-2"}


def test_reference_scenario_uid_only_offer_is_ranked_by_pdb_violations() -> None:
    # Without runway's cache the offered UIDs are unknown pods: never protected, so only the
    # node ranking decides (was the test of the removed offer-only ``choose_victims``).
    preemptor, victims = _scenario()
    offers = {
        node: NodeOffer(
            [PodFacts.unknown(p.uid, node) for p in pods],
            pdb_violations=1 if node == "node-0" else 0,
        )
        for node, pods in victims.items()
    }
    d = decide(Preemptor.from_pod(preemptor), offers, {}, NOW)
    assert d.chosen == "node-1" and sorted(d.victims) == sorted(p.uid for p in victims["node-1"])


# --- shielded pods (issue #26: never runway's own pods or the control plane's) ---------------


def shielded_pod(uid: str, **kwargs: Any) -> PodFacts:
    facts = pod(uid, **kwargs)
    return replace(facts, shield="is in protected namespace kube-system")


def test_offered_shielded_pod_is_dropped_and_replaced() -> None:
    offers = {
        "n1": NodeOffer(
            [shielded_pod("runway-0", priority=0)],
            others=[shielded_pod("scheduler-0", priority=0), pod("batch", priority=10)],
        )
    }
    d = run(offers)
    assert d.reply() == {"n1": (["batch"], 0)}
    assert outcome(d, "runway-0") == "dropped"
    rec = node_record(d, "n1").records[0]
    assert rec.reason == "ineligible: ns/runway-0 is in protected namespace kube-system"
    assert d.counts.ineligible == {"reclaim": 1}


def test_shielded_pods_alone_veto_the_node() -> None:
    d = run({"n1": NodeOffer([shielded_pod("a", priority=0)], others=[shielded_pod("b")])})
    assert d.reply() == {} and d.all_victims() == ()


def test_gang_with_a_shielded_member_cannot_be_evicted() -> None:
    members = [pod("g1", workload="ns/g"), shielded_pod("g2", node="n2", workload="ns/g")]
    d = run({"n1": NodeOffer([members[0]])}, [workload("ns/g", members)])
    assert d.reply() == {}
    assert "gang ns/g: member ns/g2 is in protected namespace" in (
        node_record(d, "n1").records[0].reason
    )


def test_shielded_elastic_member_is_dropped_its_siblings_may_go() -> None:
    members = [
        pod("e1", workload="ns/e", cpu=1000),
        shielded_pod("e2", workload="ns/e", cpu=1000),
        pod("e3", workload="ns/e", cpu=1000),
    ]
    wl = workload("ns/e", members, min_available=1)
    d = run({"n1": NodeOffer([members[1]], others=[members[0], members[2]])}, [wl])
    assert d.chosen == "n1" and "e2" not in d.victims and len(d.victims) == 1


def test_no_preemption_of_nobody_when_every_offered_victim_is_dropped_and_room_is_left() -> None:
    """Issue #35 (low): kube-scheduler offers a shielded victim, yet by runway's count the node
    fits the preemptor once nothing goes (its dry run counted pods nominated there, or more
    than resources). A "preemption" of nobody would only nominate the pod to the node — both
    pods of a pending gang nominated to one node, each blocking the other — so the node is
    dropped with the reason, and nothing is planned."""
    pre = replace(P, requests={"cpu": 500})
    offer = NodeOffer(
        [replace(pod("runway-0", priority=0, cpu=500), shield="is shielded")],
        others=[pod("job", priority=10, cpu=300)],
        allocatable=NODE,
    )
    d = decide(pre, {"n1": offer}, {}, NOW)
    assert d.reply() == {} and d.chosen is None
    assert "no victim needed on n1" in node_record(d, "n1").reason
    # kube-scheduler's own zero-victim node (it found the pod fits) is still taken as offered
    assert run({"n1": NodeOffer([], others=[pod("job", cpu=300)])}).reply() == {"n1": ([], 0)}
