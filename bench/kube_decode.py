"""What holding the cluster's pods costs each way a Python Kubernetes client holds them.

    python -m bench.kube_decode [--pods 5000] [--rounds 5]

One PodList body of N realistic pods (``bench.ingest.realistic_pod``: a Job's pod as the API
server returns it, managedFields, env, volumes and statuses included), decoded three ways:

- ``runway``: msgspec straight into ``app.model.Pod`` (only the fields runway reads; the rest is
  skipped while scanning, never built), as ``app/kube/reflector.py`` decodes a LIST;
- ``dicts``: ``json.loads``, the plain dicts a dict-based client keeps (kr8s's objects wrap the
  raw dict; so does any client's "raw" mode);
- ``kubernetes models``: the official client's ``ApiClient.deserialize`` into ``V1PodList``, the
  generated OpenAPI models that kubernetes_asyncio shares (the same generator and templates).

Per way: the CPU time per pod (the best of ``--rounds``, ``time.process_time``) and the memory the
decoded pods keep (``tracemalloc``, after a collection). No compaction
(``app/state/compact.py``) for any of them: the decode alone. DESIGN §7's note on the API client
cites the run in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgspec

from app.model import Pod
from bench.ingest import realistic_pod


class _PodList(msgspec.Struct):
    items: list[Pod]


def _runway(body: bytes) -> Any:
    return msgspec.json.decode(body, type=_PodList)


def _dicts(body: bytes) -> Any:
    return json.loads(body)


def _kubernetes_models(body: bytes) -> Any:
    from kubernetes.client import ApiClient

    if "client" not in _API_CLIENT:
        _API_CLIENT["client"] = ApiClient()
    return _API_CLIENT["client"].deserialize(body, "V1PodList", "application/json")


_API_CLIENT: dict[str, Any] = {}


WAYS: dict[str, Callable[[bytes], Any]] = {
    "runway (msgspec, app.model.Pod)": _runway,
    "dicts (json.loads)": _dicts,
    "kubernetes models (V1PodList)": _kubernetes_models,
}


def measure(body: bytes, pods: int, rounds: int) -> list[dict[str, Any]]:
    """Per way: CPU µs per pod (best round) and KB kept per pod."""
    out = []
    for name, decode in WAYS.items():
        decode(body)  # imports and first-call caches out of the timing
        best = float("inf")
        for _ in range(rounds):
            gc.collect()
            start = time.process_time()
            decode(body)
            best = min(best, time.process_time() - start)
        gc.collect()
        tracemalloc.start()
        kept = decode(body)
        gc.collect()
        size, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del kept
        out.append({"way": name, "us_per_pod": best / pods * 1e6, "kb_per_pod": size / pods / 1024})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    body = json.dumps(
        {
            "kind": "PodList",
            "apiVersion": "v1",
            "items": [realistic_pod(i, i) for i in range(args.pods)],
        }
    ).encode()
    print(f"{args.pods} pods, {len(body) / args.pods / 1024:.1f} KB of JSON each")
    rows = measure(body, args.pods, args.rounds)
    base = rows[0]
    print(f"{'way':34} {'CPU µs/pod':>11} {'x runway':>9} {'KB kept/pod':>12} {'x runway':>9}")
    for row in rows:
        cpu, kept = row["us_per_pod"], row["kb_per_pod"]
        print(
            f"{row['way']:34} {cpu:11.1f} {cpu / base['us_per_pod']:9.1f}"
            f" {kept:12.2f} {kept / base['kb_per_pod']:9.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
