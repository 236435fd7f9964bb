"""Instructions per step of a side query's exchange, counted by callgrind.

CPU figures of one side query move by a third between runs on a shared 2-core machine;
instruction counts do not. Steps:

- ``read_h11`` / ``read_by_hand``: reading one answer from memory through h11 alone (as
  every answer was read before the hand reader: the request told to h11, its events,
  the next cycle) or with ``models._side_answer.read_answer`` on a fresh connection
  (the common shape, read by hand); the local server's answer (four headers, 310-byte
  body), or with ``--head llama`` a llama.cpp server's head (six headers);
- ``encode_before`` / ``encode_now``: the request's JSON for the latency corpus's
  selection (about 4.9 KB), as ``json.dumps(body).encode()`` or as sent now.

``--callgrind`` runs each step under ``valgrind --tool=callgrind`` twice, N times and
no time (the interpreter's start and imports), and prints the difference over N (each
run imports the library under valgrind: a quarter of an hour in all on two cores):

    PYTHONPATH=src:benchmarks/src python benchmarks/side_answer_instructions.py --callgrind

Without it, one step N times (what callgrind runs): ``... STEP N [--head llama]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import h11

from asyncrecall.memory import FolderStore
from asyncrecall.memory.selectors._model import (
    SCHEMA_NAME,
    SYSTEM_PROMPT,
    selection_schema,
    selector_prompt,
)
from asyncrecall.models._side_answer import HEAD_LIMIT, read_answer
from asyncrecall.models._side_http import _json_body
from asyncrecall_bench._corpus import build_memory_folder
from asyncrecall_bench._overhead import _RECALL_QUERY

_BODY = (
    b'{"id": "chatcmpl-0", "object": "chat.completion", "created": 1796589922, "model": '
    b'"side", "choices": [{"index": 0, "message": {"role": "assistant", "content": '
    b'"{\\"selected_memories\\": [\\"a.md\\", \\"b.md\\"]}"}, "finish_reason": "stop"}], '
    b'"usage": {"prompt_tokens": 8, "completion_tokens": 9, "total_tokens": 17}}'
)
HEADS = {
    "local": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
    b"Connection: keep-alive\r\n\r\n",
    "llama": b"HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: \r\nContent-Length: %d\r\n"
    b"Content-Type: application/json; charset=utf-8\r\nKeep-Alive: timeout=5, max=100\r\n"
    b"Server: llama.cpp\r\n\r\n",
}
REQUEST = h11.Request(
    method="POST",
    target="/v1/chat/completions",
    headers=[
        ("Host", "127.0.0.1:40000"),
        ("Accept", "application/json"),
        ("Content-Type", "application/json"),
        ("User-Agent", "AsyncOpenAI/Python"),
        ("Authorization", "Bearer bench"),
        ("Connection", "keep-alive"),
    ],
)
STEPS = ("read_h11", "read_by_hand", "encode_before", "encode_now")


class _Answers:
    """A connection that answers every read with the same whole answer."""

    def __init__(self, answer: bytes) -> None:
        self._answer = answer

    async def read(self, n: int = -1, /) -> bytes:
        return self._answer


def _run(step: Coroutine[Any, Any, Any]) -> Any:
    try:
        step.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("a read waited")


@functools.cache
def _selection_request() -> dict[str, Any]:
    """The bench's selection request (one per process: its manifest names ages)."""
    with tempfile.TemporaryDirectory() as tmp:
        build_memory_folder(Path(tmp) / "memory")
        docs = FolderStore(Path(tmp) / "memory").scan()
    return {
        "model": "warmup-scale-side",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": selector_prompt(_RECALL_QUERY, docs, limit=5)},
        ],
        "stream": False,
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "schema": selection_schema(5), "strict": True},
        },
    }


def step_function(step: str, head: str) -> Callable[[], object]:
    """One call of ``step``, everything it needs made beforehand."""
    reader = _Answers(HEADS[head] % len(_BODY) + _BODY)
    if step == "read_h11":
        http = h11.Connection(h11.CLIENT, HEAD_LIMIT)

        def read_h11() -> object:
            answer = _run(read_answer(reader, http, REQUEST))
            http.start_next_cycle()
            return answer

        return read_h11
    if step == "read_by_hand":
        return lambda: _run(read_answer(reader, None, REQUEST))
    body = _selection_request()
    if step == "encode_before":
        return lambda: json.dumps(body).encode()
    if step == "encode_now":
        return lambda: _json_body(body)
    raise SystemExit(f"unknown step {step!r}: one of {', '.join(STEPS)}")


def _collected(step: str, n: int, head: str) -> int:
    command = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, __file__, step, str(n), "--head", head,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no callgrind total in: {done.stderr[-500:]}")
    return int(found[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", nargs="?", choices=STEPS)
    parser.add_argument("n", nargs="?", type=int, default=2000)
    parser.add_argument("--head", choices=sorted(HEADS), default="local")
    parser.add_argument("--callgrind", action="store_true", help="count every step")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.callgrind:
        if args.step is None:
            parser.error("name a step, or --callgrind")
        call = step_function(args.step, args.head)
        for _ in range(args.n):
            call()
        return 0
    figures: dict[str, int] = {}
    for step in STEPS:
        heads = sorted(HEADS) if step.startswith("read") else ["local"]
        for head in heads:
            name = f"{step} ({head})" if step.startswith("read") else step
            spent = _collected(step, args.n, head) - _collected(step, 0, head)
            figures[name] = spent // args.n
            if not args.json:
                print(f"{name:22} {figures[name]:>9,} instructions")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
