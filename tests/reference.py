"""The golden data under ``tests/data/`` (read-only): wire payloads and upstream cases.

``tests/data/README.md`` says where each file came from; ``tests/data/SHA256SUMS`` pins them
(``tests/unit/test_reference_data.py``): a golden file is replaced by a new capture, never
edited to make a test pass.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
WIRE = DATA / "wire"
UPSTREAM_CASES = DATA / "upstream-cases.json"


WIRE_FIRST_RELEASE = "1.20.2"
"""The release of the first captures, ``wire/*.json`` (later ones are in ``wire/RELEASE/``)."""


def wire_cases() -> list[dict[str, Any]]:
    """Every golden payload file, oldest release first, with ``name`` (the 1.20.2 files by their
    stem, ``nodecache-filter``; later ones as ``1.37.2/nodecache-filter``) and ``release``."""
    out = []
    folders = sorted(
        (p for p in WIRE.iterdir() if p.is_dir()),
        key=lambda p: tuple(int(x) for x in p.name.split(".")),
    )
    for folder in (WIRE, *folders):
        for path in sorted(folder.glob("*.json")):
            case = json.loads(path.read_text())
            case["name"] = str(path.relative_to(WIRE).with_suffix(""))
            case.setdefault("release", WIRE_FIRST_RELEASE if folder == WIRE else folder.name)
            out.append(case)
    return out


def all_upstream_cases() -> list[dict[str, Any]]:
    """Every upstream case (Kueue's and KAI-Scheduler's), in file order."""
    cases: list[dict[str, Any]] = json.loads(UPSTREAM_CASES.read_text())
    return cases


def upstream_cases(prefix: str) -> list[dict[str, Any]]:
    """The upstream cases whose feature starts with ``prefix``."""
    return [c for c in all_upstream_cases() if c["feature"].startswith(prefix)]


# -- the cluster tools (not data) ------------------------------------------------------------


def _shared() -> Path:
    """Where the cluster tools are: $RUNWAY_SHARED, else ../shared beside the checkout, else
    /work/shared. A path that may not exist: the tests that need a tool skip without it."""
    candidates = [
        os.environ.get("RUNWAY_SHARED"),
        Path(__file__).resolve().parents[2] / "shared",
        "/work/shared",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "tools").is_dir():
            return Path(candidate)
    return Path(__file__).resolve().parents[2] / "shared"


SHARED = _shared()
"""container.sh and cluster.sh (the image and the real 1.20 node) still live there."""
CONTROL_PLANE = Path(__file__).resolve().parents[1] / "tools" / "kube"
"""The project's own clusters: ``tools/kube build VERSION``, ``up VERSION DIR``, ``down DIR``."""
