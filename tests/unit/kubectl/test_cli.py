"""app.kubectl.cli's command line: flags before the command, as kubectl takes them."""

from __future__ import annotations

import pytest

from app.kubectl.cli import command_first, parser


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
