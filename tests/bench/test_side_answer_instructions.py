"""``benchmarks/side_answer_instructions.py``: its steps run and compare like with like."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "side_answer_instructions.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("side_answer_instructions", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_step_runs_and_both_readers_read_the_same_answer() -> None:
    """The two reading steps give the same answer (the one counted by hand is the very
    answer h11 reads), kept alive, whichever head; the two encodings, the same JSON."""
    script = _script()
    for head in script.HEADS:
        by_h11 = [script.step_function("read_h11", head)() for _ in range(2)]
        by_hand = [script.step_function("read_by_hand", head)() for _ in range(2)]
        assert [a[:4] for a in by_h11] == [a[:4] for a in by_hand]
        assert by_hand[0].status == 200 and by_hand[0].reusable and by_hand[0].http is None
        assert by_h11[0].http is not None
    before = script.step_function("encode_before", "local")()
    now = script.step_function("encode_now", "local")()
    assert json.loads(before) == json.loads(now) and len(now) < len(before)
