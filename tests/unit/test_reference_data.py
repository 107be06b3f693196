"""The golden data under tests/data/ is what was captured: every file pinned by SHA256SUMS, and
nothing there unpinned (tests/data/README.md: a new capture replaces a file and its sum)."""

from __future__ import annotations

import hashlib

from tests.reference import DATA

SUMS = DATA / "SHA256SUMS"
NOT_DATA = {"README.md", "SHA256SUMS"}


def pinned() -> dict[str, str]:
    """``SHA256SUMS`` as {relative path: hex digest}."""
    out = {}
    for line in SUMS.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        out[name] = digest
    return out


def test_every_golden_file_matches_its_pinned_sum() -> None:
    changed = [
        name
        for name, digest in pinned().items()
        if hashlib.sha256((DATA / name).read_bytes()).hexdigest() != digest
    ]
    assert not changed, f"golden files edited (tests/data/README.md): {changed}"


def test_every_file_under_tests_data_is_pinned() -> None:
    present = {
        str(path.relative_to(DATA))
        for path in DATA.rglob("*")
        if path.is_file() and path.name not in NOT_DATA
    }
    assert present == set(pinned()), "add the file's sum to tests/data/SHA256SUMS"
