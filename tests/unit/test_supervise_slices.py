"""``supervise.Turns`` and ``in_slices``: a long pass shares the event loop with the verbs
(issue #29: no pause over 50 ms while a resync of 150,000 pods is applied)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator

import pytest

from app.supervise import Turns, in_slices


def busy(seconds: float) -> None:
    """Hold the thread (and so the loop) for ``seconds``: the pass's work."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def pass_of(pieces: int, each: float, seen: list[str]) -> Generator[None, None, int]:
    for n in range(pieces):
        busy(each)
        seen.append(f"piece {n}")
        yield
    return pieces


def verb_waiting(seen: list[str]) -> asyncio.Task[None]:
    """A verb that arrives now: answered at the loop's next turn, which it notes in ``seen``."""

    async def verb() -> None:
        await asyncio.sleep(0)
        seen.append("verb")

    return asyncio.get_running_loop().create_task(verb())


async def test_a_pass_in_slices_lets_another_task_run_while_it_works() -> None:
    seen: list[str] = []
    other = verb_waiting(seen)
    done = await in_slices(pass_of(10, 0.002, seen), budget=0.003)
    await other
    assert done == 10  # the generator's return value
    # The verb was answered in the middle of the pass, not after it.
    assert 0 < seen.index("verb") < len(seen) - 1


async def test_a_pass_shorter_than_its_budget_never_gives_a_turn() -> None:
    seen: list[str] = []
    other = verb_waiting(seen)
    await in_slices(pass_of(5, 0.0, seen), budget=10.0)
    assert "verb" not in seen  # no turn given: the pass costs no loop iterations
    await other


async def test_a_long_pass_gives_a_turn_every_budget() -> None:
    beats = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal beats
        while not stop.is_set():
            await asyncio.sleep(0)
            beats += 1

    beat = asyncio.get_running_loop().create_task(heartbeat())
    await asyncio.sleep(0)
    before = beats
    await in_slices(pass_of(40, 0.001, []), budget=0.004)
    during = beats - before
    stop.set()
    await beat
    # 40 ms of work in slices of about 4 ms: the loop turned about ten times meanwhile (a
    # machine that stalls the process makes slices end sooner, so more turns, never fewer).
    assert during >= 6


async def test_turns_held_counts_the_pass_and_not_the_turns_it_gave() -> None:
    turns = Turns(budget=0.001)

    async def sleeper() -> None:
        await asyncio.sleep(0)
        busy(0.05)  # someone else's work while the pass has given its turn

    other = asyncio.get_running_loop().create_task(sleeper())
    for _ in range(4):
        busy(0.002)
        await turns.take()
    await other
    assert 0.007 <= turns.held < 0.045


async def test_an_error_in_the_pass_reaches_the_caller() -> None:
    def failing() -> Generator[None, None, None]:
        yield
        raise ValueError("broken pass")

    with pytest.raises(ValueError, match="broken pass"):
        await in_slices(failing())
