"""Inline numpy work takes the interpreter lock back at once: the switch interval is
lowered for the block, shared by overlapping holders, and restored by the last."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator

import pytest

from asyncrecall.memory._threads import run_off_loop
from asyncrecall.memory.selectors._handback import SWITCH_S, quick_return


@pytest.fixture(autouse=True)
def _interval() -> Iterator[float]:
    """The process's interval as the interpreter sets it by default, put back after."""
    saved = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(saved)


def test_it_is_lowered_inside_and_restored_after() -> None:
    with quick_return():
        assert sys.getswitchinterval() == pytest.approx(SWITCH_S, rel=0.1)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_it_is_restored_when_the_block_raises() -> None:
    with pytest.raises(KeyError), quick_return():
        raise KeyError("x")
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_overlapping_holders_share_one_lowering_and_the_last_restores() -> None:
    """Two threads' blocks overlap: the first to leave leaves it lowered for the other."""
    entered, left = threading.Event(), threading.Event()
    seen: list[float] = []

    def other() -> None:
        with quick_return():
            entered.set()
            assert left.wait(60)
            seen.append(sys.getswitchinterval())

    thread = threading.Thread(target=other)
    with quick_return():
        thread.start()
        assert entered.wait(60)
    left.set()  # this holder has left; the other is still inside
    thread.join(60)
    assert seen == [pytest.approx(SWITCH_S, rel=0.1)]
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_change_made_meanwhile_is_kept() -> None:
    with quick_return():
        sys.setswitchinterval(0.002)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_lower_interval_is_never_raised() -> None:
    sys.setswitchinterval(1e-6)
    with quick_return():
        assert sys.getswitchinterval() == pytest.approx(1e-6, abs=1e-7)
    assert sys.getswitchinterval() == pytest.approx(1e-6, abs=1e-7)


def test_work_off_the_loop_leaves_it_alone() -> None:
    """In a worker of ``run_off_loop`` nobody waits inline: the loop's thread is the one
    to favour, so the interval stays as it was."""

    def work(_stop: threading.Event) -> float:
        with quick_return():
            return sys.getswitchinterval()

    async def main() -> float:
        return await run_off_loop(work, name="test-off-loop")

    assert asyncio.run(main()) == pytest.approx(0.005)
    assert sys.getswitchinterval() == pytest.approx(0.005)
