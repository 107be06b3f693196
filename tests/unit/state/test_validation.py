"""state/validation: which pod values are bad, counted once per object version, warned at most
once per field per interval."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app import metrics
from app.model import Pod
from app.state.validation import InvalidObjects, invalid_pod_fields


def pod(annotations: dict[str, str] | None = None, rv: str = "1", **meta: Any) -> Pod:
    body = {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": rv}
    return msgspec.convert({"metadata": {**body, "annotations": annotations, **meta}}, Pod)


@pytest.mark.parametrize(
    ("p", "fields"),
    [
        (pod({"runway.dev/min-available": "3"}), []),
        (pod({"runway.dev/min-available": "²"}), ["min-available"]),
        (pod({"runway.dev/min-available": "0"}), ["min-available"]),
        # Retired state annotations: never read, whatever their value; reported once.
        (pod({"runway.dev/preemption-gate": "[" * 10}), ["state-annotation"]),
        (pod({"runway.dev/eviction-count": "x"}), ["state-annotation"]),
        (pod({"runway.dev/eviction-deactivated": "yes"}), ["state-annotation"]),
        (pod({"runway.dev/workload-started": "2099-01-01T00:00:00Z"}), ["state-annotation"]),
        (pod({"runway.dev/eviction-time": "2027-01-01T00:00:00Z"}), ["state-annotation"]),
        (pod({"other": "²"}), []),
        (
            pod(ownerReferences=[{"kind": "Job", "apiVersion": "batch/v1", "controller": True}]),
            ["owner-reference"],
        ),
        (
            pod(
                ownerReferences=[
                    {"kind": "Job", "apiVersion": "batch/v1", "name": n, "controller": True}
                    for n in ("a", "b")
                ]
            ),
            ["owner-reference"],
        ),
    ],
)
def test_invalid_pod_fields(p: Pod, fields: list[str]) -> None:
    assert invalid_pod_fields(p) == fields


def count(field: str) -> float:
    return metrics.REGISTRY.get_sample_value("runway_invalid_objects_total", {"field": field}) or 0


def test_counted_once_per_version_and_warned_once_per_interval() -> None:
    now = [0.0]
    invalid = InvalidObjects(warn_every=60, monotonic=lambda: now[0])
    warned: list[Any] = []
    invalid.report = _recording(invalid.report, warned)  # type: ignore[method-assign]
    bad = pod({"runway.dev/min-available": "²"})
    before = count("min-available")
    invalid.check_pod(bad, None)
    invalid.check_pod(bad, bad)  # same version again (a relist): not recounted
    assert count("min-available") == before + 1
    invalid.check_pod(pod({"runway.dev/min-available": "²"}, rv="2"), bad)
    assert count("min-available") == before + 2
    assert invalid._suppressed == {"min-available": 1}  # the second warning was held back
    now[0] = 61.0
    invalid.check_pod(pod({"runway.dev/min-available": "²"}, rv="3"), None)
    assert invalid._suppressed == {}  # warned again, with the count of the held-back ones
    assert len(warned) == 3


def _recording(report: Any, calls: list[Any]) -> Any:
    def wrapper(*args: Any) -> None:
        calls.append(args)
        report(*args)

    return wrapper
