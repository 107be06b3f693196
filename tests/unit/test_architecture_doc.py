"""docs/ARCHITECTURE.md's "Rule → function → test" table names things that exist: every function
in it can be imported from app/, every test file and test function is in tests/, and every
DESIGN section it cites is a heading of docs/DESIGN.md. A rule moved without its row fails here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLE_HEADING = "## Rule → function → test"
CODE = re.compile(r"`([^`]+)`")
TEST_REF = re.compile(
    r"^(?:(?P<file>(?:unit|integration|e2e|hostile|contract)/[\w/]+\.py))?"
    r"(?:::(?P<test>\w+))?$"
)
FUNCTION_REF = re.compile(r"^(?P<module>[a-z_]+(?:/[a-z_]+)*)\.(?P<name>[A-Za-z_]\w*(?:\.\w+)?)")


def rows() -> list[list[str]]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert TABLE_HEADING in text, "docs/ARCHITECTURE.md lost its rule table"
    table = text.split(TABLE_HEADING, 1)[1]
    found = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith(("| rule ", "|---"))
    ]
    assert len(found) > 20
    return found


def design_sections() -> set[str]:
    text = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, re.M))


def test_every_design_section_cited_exists() -> None:
    sections = design_sections()
    missing = [
        f"{row[0]}: §{ref}"
        for row in rows()
        for ref in re.findall(r"§(\d+(?:\.\d+)?)", row[1])
        if ref not in sections
    ]
    assert not missing, f"sections not in docs/DESIGN.md: {missing}"


def test_every_function_named_exists() -> None:
    missing = []
    for row in rows():
        for ref in CODE.findall(row[2]):
            if ref.startswith(("helm/", "tools/")):  # a file of the chart or the tools
                if not (ROOT / ref.split(" ")[0]).exists():
                    missing.append(f"{row[0]}: {ref}")
                continue
            match = FUNCTION_REF.match(ref)
            if match is None:
                continue
            module = "app." + match["module"].replace("/", ".")
            target: object = importlib.import_module(module)
            for part in match["name"].split("."):
                target = getattr(target, part, None)
                if target is None:
                    missing.append(f"{row[0]}: {module}.{match['name']}")
                    break
    assert not missing, f"named in the rule table, not in app/: {missing}"


def test_every_test_named_exists() -> None:
    missing = []
    for row in rows():
        current: Path | None = None
        for ref in CODE.findall(row[3]):
            match = TEST_REF.match(ref.split(" ")[0])
            if match is None or not (match["file"] or match["test"]):
                continue
            if match["file"]:
                current = ROOT / "tests" / match["file"]
                if not current.is_file():
                    missing.append(f"{row[0]}: {match['file']}")
                    continue
            if match["test"]:
                if current is None:
                    pytest.fail(f"{row[0]}: ::{match['test']} follows no test file")
                source = current.read_text(encoding="utf-8")
                if not re.search(rf"^(async )?def {match['test']}\(", source, re.M):
                    missing.append(f"{row[0]}: {current.name}::{match['test']}")
    assert not missing, f"named in the rule table, not in tests/: {missing}"
