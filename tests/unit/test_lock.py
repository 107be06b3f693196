"""The lock files (requirements/*.txt) agree with pyproject.toml: every dependency pinned to a
release its range allows, with hashes; the runtime lock at the test lock's versions.

CI installs requirements/test.txt and the image requirements/runtime.txt; a range changed in
pyproject.toml without `requirements/refresh.sh` fails here, before an install drifts.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.M)


def pins(name: str) -> dict[str, str]:
    """Package → pinned version, from a lock file; each pin must carry a sha256."""
    text = (ROOT / "requirements" / name).read_text(encoding="utf-8")
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text)
    found: dict[str, str] = {}
    for block in blocks:
        match = PIN.match(block)
        if match is None:
            continue
        package = canonicalize_name(match[1])
        assert "--hash=sha256:" in block, f"requirements/{name}: {package} has no hash"
        found[package] = match[2]
    assert found, f"requirements/{name} pins nothing"
    return found


def declared(extra: str | None = None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [Requirement(d) for d in deps]


def _check(lock: str, requirements: list[Requirement]) -> None:
    pinned = pins(lock)
    stale = []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate():
            continue
        got = pinned.get(canonicalize_name(req.name))
        if got is None or not req.specifier.contains(got, prereleases=True):
            stale.append(f"{req} (locked: {got or 'missing'})")
    if stale:
        pytest.fail(
            f"requirements/{lock} does not satisfy pyproject.toml: {'; '.join(stale)}. "
            "Run requirements/refresh.sh and commit both lock files.",
            pytrace=False,
        )


def test_the_runtime_lock_satisfies_the_dependencies() -> None:
    _check("runtime.txt", declared())


def test_the_test_lock_satisfies_the_dependencies_and_the_test_extra() -> None:
    _check("test.txt", declared() + declared("test"))


def test_the_image_runs_the_releases_ci_tests() -> None:
    runtime, test = pins("runtime.txt"), pins("test.txt")
    differ = {p: (v, test.get(p)) for p, v in runtime.items() if test.get(p) != v}
    assert not differ, f"runtime.txt and test.txt pin different releases: {differ}"
    assert "pytest" not in runtime, "runtime.txt (the image) holds the test tools"


def test_the_locks_name_their_refresh_command() -> None:
    for name in ("runtime.txt", "test.txt"):
        text = (ROOT / "requirements" / name).read_text(encoding="utf-8")
        assert "requirements/refresh.sh" in text.split("\n\n")[0], name
    assert (ROOT / "requirements" / "refresh.sh").stat().st_mode & 0o111
