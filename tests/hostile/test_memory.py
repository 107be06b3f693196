"""Issue 14 rows 9 and 12: what runway remembers is bounded by size (the decision log), and a
token file with bad bytes or short tokens never breaks authentication."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.api.auth import StaticTokens
from app.config import ConfigError
from app.state.decisions import DecisionLog
from tests.hostile.conftest import Embedded, pod_obj

GOOD = "0123456789abcdef-good-token"


def wide_preempt(nodes: int, uids_per_node: int = 3) -> dict[str, object]:
    return {
        "Pod": pod_obj("boss", priority=100),
        "NodeNameToMetaVictims": {
            f"node-{n:05d}": {
                "Pods": [{"UID": f"uid-{n}-{i}"} for i in range(uids_per_node)],
                "NumPDBViolations": 0,
            }
            for n in range(nodes)
        },
    }


async def test_row9_a_huge_preempt_is_remembered_in_bounded_size(embedded: Embedded) -> None:
    log: DecisionLog = embedded.runway.decisions
    resp = await embedded.verb("preempt", wide_preempt(20_000))
    assert resp.status_code == 200, resp.text
    assert len(log) == 1
    one = log.bytes
    assert one < 256 * 1024, one  # 100 node records, not 20,000 (was 26.5 MB)
    decision = log.latest(1)[0]
    assert len(decision["nodes"]) == log.max_nodes
    assert decision["nodesOmitted"] == 20_000 - log.max_nodes


async def test_row9_the_log_is_bounded_by_bytes_as_well_as_count(embedded: Embedded) -> None:
    log = DecisionLog(200, max_bytes=256 * 1024, max_nodes=100)
    embedded.runway.decider.decisions = log
    for _ in range(20):
        resp = await embedded.verb("preempt", wide_preempt(300))
        assert resp.status_code == 200
    assert 0 < log.bytes <= 256 * 1024
    assert 1 <= len(log) < 20


def test_row12_bad_bytes_keep_the_last_good_tokens(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"{GOOD},alice\n")
    tokens = StaticTokens([], str(path))
    assert tokens.match(GOOD) == "alice"
    path.write_bytes(b"\xff\xfe" + b"garbage\n")
    assert tokens.match(GOOD) == "alice"  # no 500: the last good file still holds
    assert tokens.match(GOOD) == "alice"  # and the bad version is not re-read per request


def test_row12_short_file_tokens_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"x,mallory\n{'y' * 15},eve\n{GOOD},alice\n")
    tokens = StaticTokens([], str(path))
    assert tokens.match("x") is None and tokens.match("y" * 15) is None
    assert tokens.match(GOOD) == "alice"


def test_row12_bad_bytes_at_startup_are_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_bytes(b"\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"auth\.staticTokenFile"):
        StaticTokens([], str(path))
