"""The main turn wins on one-request-at-a-time servers: the local server cuts
a main stream (``Reply.interrupt``, as llama-cpp-python's ``interrupt_requests`` does)
while another request is unanswered; real HTTP, the agent's client and its models."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from asyncrecall import _platform
from asyncrecall.agent import (
    Agent,
    AgentClient,
    ContentEvent,
    ErrorEvent,
    FinishedEvent,
    RequestRetriedEvent,
    ToolRegistry,
)
from asyncrecall.agent._events import AgentEvent
from asyncrecall.agent._stream import RESENDS
from asyncrecall.models import Finished, OpenAIModel, TextDelta, _traffic
from asyncrecall.models._openai import PREFILL_SLICE_CHARS
from asyncrecall.models._traffic import (
    ModelStreamCut,
    SideRequestYielded,
    background_requests,
    traffic,
)
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

GUARD = 30.0
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def side_query(model: OpenAIModel) -> asyncio.Task[Any]:
    return asyncio.ensure_future(
        model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="answer")
    )


def is_main(record: RecordedRequest) -> bool:
    return record.model == "main"


def is_side(record: RecordedRequest) -> bool:
    return record.model == "side"


async def collect(client: AgentClient, text: str = "hi") -> list[AgentEvent]:
    return [event async for event in client.send_message_stream(text)]


def release_when(server: LocalServer, gate: threading.Event, predicate: Any) -> None:
    """Set ``gate`` (in a thread) once a request matching ``predicate`` has arrived."""

    def wait() -> None:
        server.wait_for(predicate, timeout=GUARD)
        gate.set()

    threading.Thread(target=wait, daemon=True).start()


async def test_a_stream_cut_while_our_side_query_is_out_is_sent_again_once(
    local_server: LocalServer, main: OpenAIModel, side: OpenAIModel
) -> None:
    """The server cuts the main stream while our side query is unanswered: the side
    query gives way (``SideRequestYielded``, its connection hung up), the main request
    goes again, and its answer is the turn's; the cut one's text is dropped."""
    go = threading.Event()
    local_server.script("main", Reply(text="cut short", chunk_size=3, interrupt=True, gate=go),
                        "the answer")  # fmt: skip
    local_server.script("side", Reply(json={"answer": "late"}, gate=threading.Event()))
    ours = side_query(side)
    await local_server.await_for(is_side, timeout=GUARD)
    release_when(local_server, go, is_main)

    events = await collect(AgentClient(model=main))

    with pytest.raises(SideRequestYielded):
        await ours
    mains = [r for r in local_server.requests if is_main(r)]
    assert [r.interrupted for r in mains] == [True, False]
    assert [type(e) for e in events if isinstance(e, RequestRetriedEvent | ErrorEvent)] == [
        RequestRetriedEvent
    ]
    texts = [e.text for e in events if isinstance(e, ContentEvent)]
    assert "".join(texts) == "the answer"  # the cut came after its first (role) chunk
    [side_request] = [r for r in local_server.requests if is_side(r)]
    await local_server.await_disconnected(side_request, timeout=GUARD)
    assert traffic(local_server.base_url).interrupts


async def test_a_cut_with_none_of_ours_out_is_the_error_it_is(
    local_server: LocalServer, main: OpenAIModel
) -> None:
    """Cut by someone else's request (not ours): not sent again, the turn fails with
    the one-line reason, and the endpoint is not marked as one that interrupts."""
    go = threading.Event()
    local_server.script("main", Reply(text="cut short", chunk_size=3, interrupt=True, gate=go),
                        "never sent")  # fmt: skip
    local_server.script("other", Reply(text="theirs", gate=threading.Event()))
    theirs = subprocess.Popen(  # noqa: ASYNC220 - another client of the server: no marker held
        [sys.executable, "-c", WORKER.replace("_platform.lock(fd, shared=True)", ""),
         traffic(local_server.base_url).marker_path(), f"{local_server.base_url}/chat/completions"],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await local_server.await_for(lambda r: r.model == "other", timeout=GUARD)
        release_when(local_server, go, is_main)
        events = await collect(AgentClient(model=main))
    finally:
        theirs.kill()
        theirs.wait()
    [error] = [e for e in events if isinstance(e, ErrorEvent)]
    assert "ended the stream before the answer finished" in error.message
    assert not any(isinstance(e, RequestRetriedEvent) for e in events)
    assert len([r for r in local_server.requests if is_main(r)]) == 1
    assert not traffic(local_server.base_url).interrupts


async def test_resends_are_bounded_even_when_ours_is_out_again(
    local_server: LocalServer, main: OpenAIModel, side: OpenAIModel
) -> None:
    """A request cut each time with another side query of ours out is sent again
    ``RESENDS`` times, not once more: the turn fails after ``RESENDS + 1`` requests."""
    gates = [threading.Event() for _ in range(RESENDS + 1)]
    local_server.script(
        "main",
        *(
            Reply(text=f"cut {n}", chunk_size=3, interrupt=True, gate=gate)
            for n, gate in enumerate(gates)
        ),
        "never sent",
    )
    local_server.set_default("side", Reply(json={"answer": "late"}, gate=threading.Event()))
    one = side_query(side)
    await local_server.await_for(is_side, timeout=GUARD)
    release_when(local_server, gates[0], is_main)
    turn = asyncio.ensure_future(collect(AgentClient(model=main)))
    with pytest.raises(SideRequestYielded):
        await one
    for n, gate in enumerate(gates[1:], start=1):
        # Request n of the main model is number 2n of the server, our side query 2n + 1.
        await local_server.await_for(lambda r, n=n: is_main(r) and r.index >= 2 * n, timeout=GUARD)
        again = side_query(side)
        await local_server.await_for(lambda r, n=n: is_side(r) and r.index > 2 * n, timeout=GUARD)
        gate.set()
        with pytest.raises(SideRequestYielded):
            await again

    events = await turn

    assert len([r for r in local_server.requests if is_main(r)]) == RESENDS + 1
    assert [type(e) for e in events if isinstance(e, RequestRetriedEvent | ErrorEvent)] == [
        *[RequestRetriedEvent] * RESENDS,
        ErrorEvent,
    ]


async def test_background_side_queries_never_overlap_a_main_turn_once_it_interrupts(
    local_server: LocalServer, main: OpenAIModel, side: OpenAIModel
) -> None:
    """Once the endpoint has shown it interrupts: a background side query (extraction)
    in flight gives way when a main stream starts, and one asked for while a main
    stream runs is not sent until that stream has ended."""
    traffic(local_server.base_url).interrupts = True  # learned as in the first test
    local_server.set_default("side", Reply(json={"answer": "ok"}))
    local_server.script("side", Reply(json={"answer": "held"}, gate=threading.Event()))
    with background_requests():
        held = side_query(side)
    await local_server.await_for(is_side, timeout=GUARD)
    go = threading.Event()
    local_server.script("main", Reply(text="a long answer", chunk_size=2, gate=go))
    stream = asyncio.ensure_future(collect(AgentClient(model=main)))
    with pytest.raises(SideRequestYielded):  # gave way as the main stream started
        await held
    await local_server.await_for(is_main, timeout=GUARD)
    with background_requests():
        waiting = side_query(side)
    for _ in range(5):  # the loop turns; the background query stays unsent
        await asyncio.sleep(0)
    assert not waiting.done() and traffic(local_server.base_url).side_requests == 0
    assert len([r for r in local_server.requests if is_side(r)]) == 1
    go.set()
    events = await stream
    assert not any(isinstance(e, ErrorEvent) for e in events)
    assert await waiting == {"answer": "ok"}
    sides = [r for r in local_server.requests if is_side(r)]
    [main_request] = [r for r in local_server.requests if is_main(r)]
    assert main_request.finished_at is not None
    assert sides[-1].arrived_at >= main_request.finished_at


async def test_a_background_query_of_another_process_counts_as_ours(
    local_server: LocalServer, main: OpenAIModel
) -> None:
    """A stream cut while another process of ours has a background side query out (its
    marker held, as the extraction worker of an earlier command holds it) is sent
    again; the same cut with nobody's marker held is an error (previous test)."""
    marker = traffic(local_server.base_url).marker_path()
    local_server.script("main", Reply(text="cut", interrupt=True), "the answer")
    local_server.script("other", Reply(text="theirs", gate=threading.Event()))
    worker = subprocess.Popen(  # noqa: ASYNC220 - holds the marker, then its request waits at the server
        [sys.executable, "-c", WORKER, marker, f"{local_server.base_url}/chat/completions"],
        stderr=subprocess.DEVNULL,
    )
    try:
        await local_server.await_for(lambda r: r.model == "other", timeout=GUARD)
        events = await collect(AgentClient(model=main))
    finally:
        worker.kill()
        worker.wait()
    assert [type(e) for e in events if isinstance(e, RequestRetriedEvent | ErrorEvent)] == [
        RequestRetriedEvent
    ]
    assert len([r for r in local_server.requests if is_main(r)]) == 2
    probe = os.open(marker, os.O_RDWR)  # released when its holder died
    try:
        assert _platform.lock(probe, block=False)
    finally:
        os.close(probe)


async def test_a_side_query_answered_before_the_cut_still_counts(
    local_server: LocalServer,
) -> None:
    """The server serves the side query it cut the stream for, and may answer it before
    we read the cut: one that was out during the stream counts as ours all the same."""
    endpoint = traffic(local_server.base_url)
    async with endpoint.side_request("side"):
        with endpoint.main_stream():  # a stream that starts while ours is out
            pass
    with endpoint.main_stream():
        assert endpoint.cut() == 0  # nothing of ours was out during this one
        async with endpoint.side_request("side"):
            pass  # answered, and gone before the cut is read
        assert endpoint.cut() == 1
    assert endpoint.interrupts


async def test_a_background_query_of_another_process_gone_by_the_cut_counts(
    local_server: LocalServer,
) -> None:
    """Another process's background query that gave way as our main stream started is
    gone, marker and all, by the time we read the cut it caused: it left its trace
    (the ``overlap`` file), so the stream is sent again."""
    url = local_server.base_url
    local_server.script("other", Reply(json={"answer": "late"}, gate=threading.Event()))
    worker = subprocess.Popen(  # noqa: ASYNC220 - the extraction worker of a command before
        [sys.executable, "-c", GIVING_WAY, url], stdout=subprocess.PIPE, text=True
    )
    endpoint = traffic(url)
    try:
        await local_server.await_for(lambda r: r.model == "other", timeout=GUARD)
        with endpoint.main_stream():
            assert worker.stdout is not None
            assert await asyncio.to_thread(worker.stdout.readline) == "gave way\n"
            await asyncio.to_thread(worker.wait, GUARD)
            assert endpoint.cut() == 1
    finally:
        worker.kill()
        worker.wait()
        if worker.stdout is not None:
            worker.stdout.close()
    assert endpoint.interrupts


GIVING_WAY = """
import asyncio, sys
from asyncrecall.models import OpenAIModel
from asyncrecall.models._traffic import (
    SideRequestYielded, background_requests, enable_cross_process, traffic)
enable_cross_process()
async def main():
    traffic(sys.argv[1]).interrupts = True
    async with OpenAIModel(model="other", base_url=sys.argv[1], max_retries=0) as model:
        with background_requests():
            try:
                await model.generate_json(system="s", prompt="p", schema_name="answer",
                    schema={"type": "object", "properties": {"answer": {"type": "string"}}})
            except SideRequestYielded:
                print("gave way", flush=True)
asyncio.run(main())
"""


WORKER = """
import os, sys, urllib.request as u
from asyncrecall import _platform
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
_platform.lock(fd, shared=True)
body = b'{"model": "other", "messages": []}'
u.urlopen(u.Request(sys.argv[2], data=body, headers={"Content-Type": "application/json"}))
"""


class CutAfterText:
    """A main model whose first stream yields text, then is cut with ours in flight (as
    ``OpenAIModel`` reports it); the second streams the answer."""

    name = "cut-after-text"

    def __init__(self) -> None:
        self.streams = 0

    async def stream(self, contents: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self.streams += 1
        if self.streams == 1:
            yield TextDelta("Half an ")
            raise ModelStreamCut("cut", model=self.name, ours_in_flight=1)
        yield TextDelta("The answer.")
        yield Finished("stop")

    async def generate_json(self, **kwargs: Any) -> Any:
        raise AssertionError("not used")


async def test_text_of_the_cut_stream_is_not_part_of_the_answer(tmp_path: Any) -> None:
    """Text streamed before the cut is announced void (``request_retried``) and left out
    of the query's answer: the answer is the retried request's alone."""
    model = CutAfterText()
    agent = Agent(AgentClient(model=model), ToolRegistry(tmp_path), max_turns=3)  # type: ignore[arg-type]
    events = [event async for event in agent.run_query("hi")]
    [finished] = [e for e in events if isinstance(e, FinishedEvent)]
    assert finished.text == "The answer." and finished.reason == "stop"
    types = [e.type for e in events if e.type in ("content", "request_retried")]
    assert types == ["content", "request_retried", "content"]
    assert model.streams == 2


async def test_a_background_query_waits_while_another_process_streams_a_main_turn(
    local_server: LocalServer, side: OpenAIModel
) -> None:
    """On an endpoint that interrupts, a background side query (the extraction worker's)
    is not sent while another process of ours streams a main turn there (its ``main``
    marker held), and is sent once that ends."""
    traffic(local_server.base_url).interrupts = True
    local_server.set_default("side", Reply(json={"answer": "ok"}))
    holder = subprocess.Popen(  # noqa: ASYNC220 - a process streaming a main turn
        [sys.executable, "-c", HOLDER, traffic(local_server.base_url).marker_path("main")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert await asyncio.to_thread(holder.stdout.readline) == "held\n"
        with background_requests():
            waiting = side_query(side)
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done() and traffic(local_server.base_url).side_requests == 0
        assert not [r for r in local_server.requests if is_side(r)]
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()  # it releases the marker and ends
        holder.wait()
        holder.stdout.close()
    assert await waiting == {"answer": "ok"}


HOLDER = """
import os, sys
from asyncrecall import _platform
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
_platform.lock(fd, shared=True)
print("held", flush=True)
sys.stdin.read()
"""


def test_an_endpoint_seen_to_interrupt_is_known_to_the_processes_after(
    local_server: LocalServer,
) -> None:
    """What one process learned (a cut for our side query) a new process knows from its
    start, so that a worker it hands off is careful even when its own command saw no
    cut; forgetting it is forgetting it for them too."""
    url = local_server.base_url
    known = traffic(url)
    os.makedirs(os.path.dirname(known.marker_path()), mode=0o700, exist_ok=True)
    ask = "import sys; from asyncrecall.models._traffic import traffic; "
    ask += "print(traffic(sys.argv[1]).interrupts)"

    def in_a_new_process() -> str:
        done = subprocess.run([sys.executable, "-c", ask, f"{url}/"], capture_output=True,
                              text=True, check=True, timeout=GUARD)  # fmt: skip
        return done.stdout.strip()

    assert in_a_new_process() == "False"
    known.learn_interrupts()
    assert in_a_new_process() == "True"
    known.forget_interrupts()
    assert in_a_new_process() == "False"


# -- background work gives way to every foreground request --------------------------


@pytest.fixture
def worker_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process makes markers and is careful, as the extraction worker is."""
    monkeypatch.setitem(_traffic._CROSS, "on", True)


def is_model(name: str) -> Any:
    return lambda record: record.model == name


async def test_the_worker_gives_way_to_a_foreground_side_query_and_waits_for_it(
    local_server: LocalServer, side: OpenAIModel, worker_process: None
) -> None:
    """In the extraction worker, on an endpoint never seen to interrupt: a background
    side query in flight gives way (hangs up) when a foreground side query (a recall)
    starts, and one asked for while that is out is not sent until it is answered."""
    local_server.script("side", Reply(json={"answer": "held"}, gate=threading.Event()))
    with background_requests():
        held = side_query(side)
    first = await local_server.await_for(is_side, timeout=GUARD)
    go = threading.Event()
    local_server.script("fg", Reply(json={"answer": "recalled"}, gate=go))
    async with OpenAIModel(model="fg", base_url=local_server.base_url, max_retries=0) as fg:
        recall = side_query(fg)
        with pytest.raises(SideRequestYielded):
            await held
        await local_server.await_disconnected(first, timeout=GUARD)
        local_server.set_default("side", Reply(json={"answer": "later"}))
        with background_requests():
            waiting = side_query(side)
        await local_server.await_for(is_model("fg"), timeout=GUARD)
        for _ in range(5):  # the loop turns; the background query stays unsent
            await asyncio.sleep(0)
        assert not waiting.done()
        assert len([r for r in local_server.requests if is_side(r)]) == 1
        go.set()
        assert await recall == {"answer": "recalled"}
    assert await waiting == {"answer": "later"}
    [fg_request] = [r for r in local_server.requests if r.model == "fg"]
    later = [r for r in local_server.requests if is_side(r)][-1]
    assert fg_request.finished_at is not None and later.arrived_at >= fg_request.finished_at


async def test_a_background_query_is_streamed_and_a_server_cut_is_giving_way(
    local_server: LocalServer, side: OpenAIModel
) -> None:
    """A background side query goes streamed (a one-at-a-time server stops a streamed
    answer when we hang up; it computes a non-streamed one to its end), a foreground
    one not (the contract's side query); a background stream the server ends early for
    a request waiting behind it (no finish reason) raises ``SideRequestYielded``."""
    go = threading.Event()
    local_server.script("side", Reply(json={"answer": "cut"}, chunk_size=2, interrupt=True,
                                      gate=go))  # fmt: skip
    with background_requests():
        background = side_query(side)
    await local_server.await_for(is_side, timeout=GUARD)
    fg_go = threading.Event()  # it waits behind ours until ours is cut
    local_server.script("fg", Reply(json={"answer": "mine"}, gate=fg_go))
    async with OpenAIModel(model="fg", base_url=local_server.base_url, max_retries=0) as fg:
        foreground = side_query(fg)
        await local_server.await_for(is_model("fg"), timeout=GUARD)
        go.set()
        with pytest.raises(SideRequestYielded):
            await background
        fg_go.set()
        assert await foreground == {"answer": "mine"}
    [bg_request] = [r for r in local_server.requests if is_side(r)]
    [fg_request] = [r for r in local_server.requests if r.model == "fg"]
    assert bg_request.body["stream"] is True and bg_request.interrupted
    assert fg_request.body["stream"] is False


async def test_on_an_endpoint_that_interrupts_a_background_prompt_goes_in_slices(
    local_server: LocalServer, side: OpenAIModel
) -> None:
    """On an endpoint seen to interrupt, a background query's prompt is first sent cut
    every ``PREFILL_SLICE_CHARS`` characters, each with a one-token answer (the server
    keeps what it read: the user's request waits for one slice, never the whole
    prompt); then the query itself. A foreground query is sent whole at once."""
    traffic(local_server.base_url).interrupts = True
    traffic(local_server.base_url).learn_interrupts()
    local_server.set_default("side", Reply(json={"answer": "ok"}))
    prompt = "x" * (PREFILL_SLICE_CHARS * 2 + 10)
    with background_requests():
        assert await side.generate_json(
            system="s", prompt=prompt, schema=SCHEMA, schema_name="answer"
        ) == {"answer": "ok"}
    sent = [r for r in local_server.requests if is_side(r)]
    assert [r.body.get("max_tokens") for r in sent[:-1]] == [1, 1]
    assert [len(r.body["messages"][-1]["content"]) for r in sent[:-1]] == [
        PREFILL_SLICE_CHARS,
        PREFILL_SLICE_CHARS * 2,
    ]
    assert sent[-1].body["messages"][-1]["content"] == prompt
    local_server.reset()
    local_server.set_default("side", Reply(json={"answer": "ok"}))
    assert await side.generate_json(
        system="s", prompt=prompt, schema=SCHEMA, schema_name="answer"
    ) == {"answer": "ok"}
    assert len([r for r in local_server.requests if is_side(r)]) == 1


def test_a_command_holds_the_main_marker_from_its_start(
    local_server: LocalServer, tmp_path: Any
) -> None:
    """``run``, ``memory recall`` and each ``chat`` query hold the endpoint's ``main``
    marker from before their first request (``user_waits``): the extraction worker of
    an earlier command keeps out of the way of requests about to go."""
    from asyncrecall.cli._common import user_waits
    from asyncrecall.cli._settings import Settings

    endpoint = traffic(local_server.base_url)
    marker = endpoint.marker_path("main")
    os.makedirs(os.path.dirname(marker), mode=0o700, exist_ok=True)
    os.close(os.open(marker, os.O_RDWR | os.O_CREAT, 0o600))  # as a worker makes it

    def held() -> bool:
        probe = os.open(marker, os.O_RDWR)
        try:
            return not _platform.lock(probe, block=False)
        finally:
            os.close(probe)

    assert not held()
    with user_waits(Settings(base_url=f"{local_server.base_url}/")):
        assert held()
    assert not held()


def test_the_markers_follow_the_temporary_folder(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint's marker files are in the temporary folder ``tempfile`` uses when
    they are looked up, also when a program sets another after the first look."""
    endpoint = _traffic.Traffic("http://127.0.0.1:9/v1")
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setattr("tempfile.tempdir", str(first))
    before = endpoint.marker_path("main")
    monkeypatch.setattr("tempfile.tempdir", str(second))
    after = endpoint.marker_path("main")
    assert os.path.dirname(os.path.dirname(before)) == str(first)
    assert os.path.dirname(os.path.dirname(after)) == str(second)
    assert os.path.basename(before) == os.path.basename(after)
    assert endpoint.marker_path("background") != after


def test_a_marker_is_made_in_a_folder_made_for_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The markers' folder is made (private) when a marker is first made, and found
    there afterwards: the folder is not looked for on every side query, but a missing
    one is still made."""
    endpoint = _traffic.Traffic("http://127.0.0.1:9/v1")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "fresh"))
    folder = os.path.dirname(endpoint.marker_path("background"))
    assert not os.path.exists(folder)
    for _ in range(2):
        fd = endpoint._open_marker("background", create=True)
        assert fd is not None
        os.close(fd)
    assert os.path.isfile(endpoint.marker_path("background"))
    assert os.stat(folder).st_mode & 0o777 == 0o700
