"""``simulate --plot``: queue wait and lost work over time, one line per config.

matplotlib is an optional extra (``pip install 'runway[plot]'``), imported only here and only
when a plot is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def plot(results: Sequence[Mapping[str, Any]], path: str | Path, title: str = "") -> None:
    """Write a PNG: mean queue wait per hour (top) and cumulative lost work (bottom)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(
            "simulate --plot needs matplotlib: pip install 'runway[plot]'"
        ) from None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True, dpi=80)
    for r in results:
        s = r["series"]
        bucket = s["bucketSeconds"]
        waits = s["queueWaitMeanSeconds"]
        xs = [i * bucket / 86400 for i, v in enumerate(waits) if v is not None]
        ys = [v / 3600 for v in waits if v is not None]
        top.plot(xs, ys, label=r["config"], linewidth=1)
        lost = s["workLostCumulativeSeconds"]
        bottom.plot(
            [i * bucket / 86400 for i in range(len(lost))],
            [v / 3600 for v in lost],
            label=r["config"],
            linewidth=1.5,
        )
    top.set_ylabel("queue wait (h, hourly mean)")
    bottom.set_ylabel("work lost (pod-h, cumulative)")
    bottom.set_xlabel("simulated time (days)")
    top.legend(loc="upper left", fontsize="small")
    top.grid(alpha=0.3)
    bottom.grid(alpha=0.3)
    if title:
        top.set_title(title, fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
