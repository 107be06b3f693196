"""RFC 6902 JSONPatch: add, remove and test, as much as runway's patches use (the fake API
server applies them; the real one in tests/e2e/test_gates_e2e.py)."""

from __future__ import annotations

import copy
from typing import Any


class PatchFailed(Exception):
    """A JSONPatch op could not apply (a failed test, a missing path)."""


def apply_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add/remove/test, as much as runway's patches use (the API server applies them
    for real in tests/e2e/test_gates_e2e.py)."""
    out = copy.deepcopy(obj)
    for op in patch:
        *parents, last = op["path"].lstrip("/").split("/")
        target: Any = out
        try:
            for part in parents:
                target = target[int(part)] if isinstance(target, list) else target[part]
            if op["op"] == "test":
                value = target[int(last)] if isinstance(target, list) else target[last]
                if value != op["value"]:
                    raise PatchFailed(op)
            elif op["op"] == "remove":
                del target[int(last) if isinstance(target, list) else last]
            elif op["op"] == "add" and isinstance(target, list):
                target.insert(len(target) if last == "-" else int(last), op["value"])
            elif op["op"] == "add":
                target[last] = op["value"]
            else:
                raise PatchFailed(op)
        except (KeyError, IndexError, ValueError) as exc:
            raise PatchFailed(op) from exc
    return out
