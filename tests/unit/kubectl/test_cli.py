"""app.kubectl.cli's command line: flags before the command, as kubectl takes them."""

from __future__ import annotations

import pytest

from app.kubectl.cli import command_first, explain_data, parser
from app.kubectl.errors import EXIT_FORBIDDEN, PluginError


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["workloads", "-n", "team"], ["workloads", "-n", "team"]),
        (["-n", "team", "workloads"], ["workloads", "-n", "team"]),
        (
            ["--url", "http://x", "-o", "wide", "queues"],
            ["queues", "--url", "http://x", "-o", "wide"],
        ),
        # a flag's value that happens to be a command name is not the command
        (["--service", "queues", "workloads"], ["workloads", "--service", "queues"]),
        (["--service=queues", "workloads"], ["workloads", "--service=queues"]),
        (["-A", "workloads"], ["workloads", "-A"]),
        (["explain", "queues"], ["explain", "queues"]),
        (["--help"], ["--help"]),
    ],
)
def test_command_first(argv: list[str], expected: list[str]) -> None:
    assert command_first(argv, parser()) == expected


def test_flags_before_the_command_parse_as_after_it() -> None:
    top = parser()
    before = top.parse_args(command_first(["-n", "team", "-o", "json", "workloads"], top))
    after = top.parse_args(["workloads", "-n", "team", "-o", "json"])
    assert vars(before) == vars(after)


class _TeamClient:
    """What a team's viewer gets from runway: its namespace's workload, a 403 on the decisions
    (they span namespaces)."""

    def __init__(self) -> None:
        self.target = type("T", (), {"default_namespace": "team-a"})()
        self.warnings: list[str] = []
        self.warn = self.warnings.append

    def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, object]:
        if path == "/v1/workloads":
            return {"items": [{"namespace": "team-a", "name": "etl"}]}
        return {"identity": "label"}

    def items(self, path: str, key: str, params: dict[str, object]) -> list[object]:
        raise PluginError(EXIT_FORBIDDEN, "runway refused: 403")


def test_explain_for_a_team_shows_its_workload_without_the_decisions() -> None:
    """Issue #35 item 4: ``explain -n team-a`` by a user who may read team-a only answers with
    the workload and says once that the decisions (cluster-wide) are not shown."""
    client = _TeamClient()
    ns = parser().parse_args(["explain", "-n", "team-a", "etl-0"])
    data = explain_data(client, ns)  # type: ignore[arg-type]
    assert data["workload"]["name"] == "etl" and data["asVictim"] == data["asPreemptor"] == []
    assert len(client.warnings) == 1 and "every namespace" in client.warnings[0]
