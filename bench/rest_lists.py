"""How long a page of ``GET /v1/workloads`` takes with many workloads in runway's cache.

In process (ASGI, no socket): N single-pod workloads over ten leaf queues, half pending and half
bound; the heap settled as ``serve`` settles it; then the first page (the pending order is built
and memoised), the same page again, and every item at once. A page summarises only its own
workloads (``app/api/workload_list.py``), so a warm page should cost far less than the whole list.

    python -m bench.rest_lists --workloads 10000
"""

from __future__ import annotations

import argparse
import asyncio
import time

from app.clock import ManualClock
from app.config import parse_config
from app.server import create_app, settle_heap
from tests.asgi import asgi_client
from tests.builders import queued_pod

T0 = 1_800_000_000.0


async def measure(workloads: int, page: int) -> None:
    """Print the three timings."""
    app = create_app(
        parse_config({"queues": [{"name": f"q{i}"} for i in range(10)]}), ManualClock(T0)
    )
    runway = app.state.runway
    for i in range(workloads):
        bound = T0 - 5 if i % 2 else None
        runway.cache.upsert_pod(queued_pod(f"w{i}", f"q{i % 10}", created=T0 - i, bound=bound))
    runway.cache.pods_synced = True
    settle_heap()
    async with asgi_client(app) as http:
        for label, params in (
            (f"first page of {page}", {"limit": page}),
            ("the same page again", {"limit": page}),
            ("every workload, unpaged", {}),
        ):
            start = time.perf_counter()
            resp = await http.get("/v1/workloads", params=params)
            took = time.perf_counter() - start
            resp.raise_for_status()
            print(f"{label}: {len(resp.json()['items'])} items in {took * 1000:.0f} ms")


def main() -> None:
    """``python -m bench.rest_lists``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--page", type=int, default=500)
    args = parser.parse_args()
    asyncio.run(measure(args.workloads, args.page))


if __name__ == "__main__":
    main()
