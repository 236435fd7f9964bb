"""``asyncrecall bench extract`` on a small LoCoMo-format file, with the scripted side model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from asyncrecall_bench._extract import replay_turns, scripted_answer

from .conftest import HANG_GUARD

CONVERSATION = {
    "sample_id": "tiny-1",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1 May 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle called Pixel."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely! I started learning the cello."},
        ],
        "session_2_date_time": "8 May 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "We are moving to Lisbon in June."},
            {"speaker": "Bob", "dia_id": "D2:2", "text": "Lisbon is great for cycling."},
        ],
    },
    "qa": [
        {"question": "What is the name of Ann's beagle?", "answer": "Pixel",
         "evidence": ["D1:1"], "category": 1},
        {"question": "Where is Ann moving in June?", "answer": "Lisbon",
         "evidence": ["D2:1"], "category": 1},
        {"question": "What does Ann play?", "answer": "nothing", "evidence": [], "category": 5},
    ],
}  # fmt: skip


def test_replay_turns_keeps_dialog_order_and_ids() -> None:
    turns, offsets = replay_turns(CONVERSATION)
    assert [t.text for t in turns][:2] == [
        "Ann: I adopted a beagle called Pixel.",
        "Bob: Lovely! I started learning the cello.",
    ]
    assert [t.role for t in turns] == ["user", "assistant", "user", "assistant"]
    assert offsets == {"D1:1": 0, "D1:2": 1, "D2:1": 2, "D2:2": 3}
    answer = scripted_answer("Existing memories:\n(none)\n\nNew conversation turns:\n[2] user: hi")
    assert answer["memories"][0]["source_offsets"] == [2]


def test_bench_extract_runs_end_to_end(tmp_path: Path) -> None:
    """The command replays, extracts over HTTP, recalls and reports its figures."""
    dataset = tmp_path / "tiny.json"
    dataset.write_text(json.dumps([CONVERSATION]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "extract", "--dataset", str(dataset),
         "--scripted", "--every", "2", "--json", "--project", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["questions"] == 2 and report["extractions"] == 2
    assert report["memories"] == 2 and report["refused"] == 0
    assert report["recall_at_5"] == 1.0  # two chunks, each question's chunk is recalled


async def test_latency_mode_measures_both_modes_with_an_extraction_out() -> None:
    """``--latency``: both modes measured; every query but the first 'on' one started
    while an extraction was out (its side query is held 3 s: a hang guard, not a timing)."""
    from asyncrecall_bench._extract_latency import measure

    report = await measure(2, extraction_ms=3000)
    assert report.queries == 2 and report.extractions_out == 1
    assert report.median_ms_off > 0 and report.median_ms_on > 0
    assert set(report.as_json()) >= {"ratio_on_off", "queries_started_with_an_extraction_out"}
