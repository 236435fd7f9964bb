"""A handed-off extraction keeps the agent's start in llama.cpp's one slot.

llama-cpp-python's server with its defaults runs one request at a time and keeps what
it read last, reusing its longest common start with the next prompt (its log says
``Llama.generate: N prefix-match hit, remaining M prompt tokens to eval``). A ``run``
hands its extraction to a detached worker; the next command's first request must
then find the agent's whole system prompt still read, as it does after a ``run``
that handed nothing off: the extraction's requests begin as the agent's do.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import handoff_workers

from .proxy import ProxiedRequest
from .server import LlamaServer

GUARD = 300  # one command, a hang guard: CPU-bound on busy shared cores
pytestmark = pytest.mark.timeout(4 * GUARD)
TOLD = "Remember for later: I am Ada and our deploys go through staging on Fridays."
_PREFIX_HIT = re.compile(rb"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt")


def _tokenizer() -> tuple[Any, Any]:
    """The served GGUF's tokenizer and chat template (its vocabulary only), as the
    server renders and reads a chat request."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from asyncrecall.models._local_engine import find_model_file

    vocab = Llama(model_path=str(find_model_file()), vocab_only=True, verbose=False)
    template = Jinja2ChatFormatter(
        template=vocab.metadata["tokenizer.chat_template"],
        eos_token=vocab._model.token_get_text(vocab.token_eos()),
        bos_token=vocab._model.token_get_text(vocab.token_bos()),
    )
    return vocab, template


def _tokens(vocab: Any, template: Any, messages: list[dict[str, Any]], *, generation: bool) -> int:
    template.add_generation_prompt = generation
    prompt = template(messages=messages).prompt
    return len(vocab.tokenize(prompt.encode(), add_bos=False, special=True))


def _is_main(record: ProxiedRequest) -> bool:
    """A main turn's request (a worker's slices carry ``max_tokens``; side queries a
    ``response_format``)."""
    body = record.body
    return body.get("stream") is True and "response_format" not in body and "max_tokens" not in body


def test_the_next_run_finds_the_agents_system_prompt_read_after_a_handoff(
    server: LlamaServer, tmp_path: Path
) -> None:
    """After a ``run`` whose extraction went to the worker, and while that worker is
    reading its prompt on the one slot, the next ``run``'s first request finds the
    whole system prompt (and so everything the agent's requests share) already read:
    the server's own log counts at least its tokens as the prefix it reused, so that
    request reads no more of its prompt than after a ``run`` that handed nothing off."""
    from asyncrecall.models._traffic import traffic

    # The endpoint is known to interrupt (a command saw it cut a stream): the worker
    # then feeds its prompt in slices, the form whose cuts matter here.
    marker = traffic(server.base_url).marker_path("interrupts")
    os.makedirs(os.path.dirname(marker), mode=0o700, exist_ok=True)
    traffic(server.base_url).learn_interrupts()
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")

    def run(question: str, **extra: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "asyncrecall", "run", question, "--selector", "lexical",
             "--base-url", server.base_url, "--model", server.model_id,
             "--memory-dir", str(tmp_path / "memory"), "--project", str(project)],
            env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    server.proxy.max_tokens = 16  # the answers' length is not what this is about
    try:
        first = run(TOLD)
        _, err = first.communicate(timeout=GUARD)
        assert first.returncode == 0, err.decode()
        # The worker is at the server (reading a slice of its extraction's prompt).
        before = {id(r) for r in server.proxy.requests}
        server.proxy.wait_for(lambda r: id(r) not in before, timeout=GUARD)
        mark = server.log.stat().st_size
        started = len(server.proxy.requests)
        second = run("Say hello.", ASYNCRECALL_EXTRACT="0")
        _, err = second.communicate(timeout=GUARD)
        assert second.returncode == 0, err.decode()
    finally:
        server.proxy.max_tokens = None
        # The worker goes on with the slot after the command: this test is done with it.
        for pid in handoff_workers(str(tmp_path)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    request = next(r for r in server.proxy.requests[started:] if _is_main(r))
    vocab, template = _tokenizer()
    messages = request.body["messages"]
    total = _tokens(vocab, template, messages, generation=True)
    system = _tokens(vocab, template, messages[:1], generation=False)
    # The server's lines for the requests it read since; the first that is this
    # request's (its tokens add up; the worker's slices are longer, by a slice).
    read = [
        (int(hit), int(rest)) for hit, rest in _PREFIX_HIT.findall(server.log.read_bytes()[mark:])
    ]
    hit = next((h for h, rest in read if h + rest == total), None)
    assert hit is not None, f"no line of the server's for {total} tokens: {read}"
    assert hit >= system, (
        f"the next run's first request reused {hit} of its {total} tokens: its system "
        f"prompt ({system} tokens) was no longer read (server: {read})"
    )
