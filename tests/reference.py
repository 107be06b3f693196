"""Access to ../shared/reference: golden wire payloads and upstream cases (read-only)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _shared() -> Path:
    """$RUNWAY_SHARED, else ../shared beside the checkout, else /work/shared (a fresh clone)."""
    candidates = [
        os.environ.get("RUNWAY_SHARED"),
        Path(__file__).resolve().parents[2] / "shared",
        "/work/shared",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "SPEC.md").is_file():
            return Path(candidate)
    raise RuntimeError("cannot find the shared/ folder; set RUNWAY_SHARED")


SHARED = _shared()
REFERENCE = SHARED / "reference"
CONTROL_PLANE = Path(__file__).resolve().parents[1] / "tools" / "kube"
"""The project's own clusters: ``tools/kube build VERSION``, ``up VERSION DIR``, ``down DIR``."""
WIRE = REFERENCE / "wire"


def wire_cases() -> list[dict[str, Any]]:
    """Every golden payload file, with its file name under ``name``."""
    out = []
    for path in sorted(WIRE.glob("*.json")):
        case = json.loads(path.read_text())
        case["name"] = path.stem
        out.append(case)
    return out


def upstream_cases(prefix: str) -> list[dict[str, Any]]:
    """The upstream cases whose feature starts with ``prefix``."""
    cases = json.loads((REFERENCE / "upstream-cases.json").read_text())
    return [c for c in cases if c["feature"].startswith(prefix)]
