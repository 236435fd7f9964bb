"""The cases of the recall contract, each a coroutine over a :class:`Harness`."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import pytest

from asyncrecall.integrations import start_recall
from asyncrecall.prefetch import MemoryRecallStartedEvent, PrefetchEvent, RecallPrefetcher
from asyncrecall.testing import Reply
from asyncrecall_conformance._anthropic import AnthropicServerWire
from asyncrecall_conformance._driver import Ending
from asyncrecall_conformance._harness import KEY, SIDE_MODEL, Harness, tool_round
from asyncrecall_conformance._wire import (
    MEMORY_MARK,
    assert_memory_after_tools,
    assert_valid_chat,
    memory_indexes,
    side_text,
    text_of,
)

__all__ = ["CASES", "Case", "cases"]

Check = Callable[[Harness], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    """One case of the contract: ``id`` (its letter first), what it checks, and how."""

    id: str
    check: Check = field(repr=False)
    doc: str = field(default="", repr=False)

    async def __call__(self, harness: Harness) -> None:
        """Run the case on ``harness``; an ``AssertionError`` says what broke."""
        await self.check(harness)

    def __str__(self) -> str:
        return self.id


def _case(id: str, check: Callable[..., Awaitable[None]], **options: Any) -> Case:
    async def bound(harness: Harness) -> None:
        await check(harness, **options)

    return Case(id=id, check=bound, doc=(check.__doc__ or "").strip())


def _blocks_with(messages: Sequence[Mapping[str, Any]], path: str) -> list[int]:
    """Indexes of the memory messages that hold the memory file ``path``."""
    return [i for i in memory_indexes(messages) if path in text_of(messages[i])]


def _settled_within_tool(
    harness: Harness, prefetcher: RecallPrefetcher, gate: threading.Event
) -> Callable[[], Awaitable[None]]:
    """A tool hook: open the side query's gate, then wait until the recall settled."""
    settle = harness.settle(prefetcher)

    async def hook() -> None:
        gate.set()
        await settle()

    return hook


# -- (a) ---------------------------------------------------------------------------------


async def slow_recall_after_tool_results(harness: Harness) -> None:
    """(a) A recall slower than the first request: that request carries no memory (it
    was sent before the side query was answered); the request after the first tool round
    carries the block once, in a user message after every tool message of the round
    (each tool call still answered right after it); the next request has it at the same
    place, once (kept or put back, never doubled or dropped)."""
    gate = threading.Event()
    harness.server.script(SIDE_MODEL, harness.side_reply("deploy-flow", gate=gate))
    harness.wire.script(tool_round("a.py", "b.py"), tool_round("c.py"), "done")
    async with harness.recall("side query") as prefetcher:
        hook = _settled_within_tool(harness, prefetcher, gate)
        await harness.run(prefetcher, "how do I deploy?", tool_hook=hook)

    requests = harness.main_requests()
    assert len(requests) == 3, f"{len(requests)} model requests, not 3"
    first, second, third = (r.messages for r in requests)
    assert memory_indexes(first) == [], "memory on the first request, sent before it settled"
    (side,) = harness.side()
    assert side.finished_at is not None, "the side query was never answered"
    assert requests[0].arrived_at < side.finished_at, "the first request waited for the recall"
    assert_memory_after_tools(second)
    assert harness.paths["deploy-flow"] in text_of(second[memory_indexes(second)[0]])
    assert memory_indexes(third) == memory_indexes(second), "the block moved, vanished or doubled"
    for messages in (first, second, third):
        assert_valid_chat(messages)


# -- (b) ---------------------------------------------------------------------------------


async def settled_recall_on_first_request(harness: Harness) -> None:
    """(b) A recall settled before the first request (no I/O): that request carries the
    block, in a user message, before the user's own text."""
    question = "how do deploys reach the staging cluster?"
    harness.wire.script("ok")
    async with harness.recall("lexical") as prefetcher:
        await harness.run(prefetcher, question)

    requests = harness.main()
    assert len(requests) == 1, f"{len(requests)} model requests, not 1"
    _memory_before(harness, requests[0], question, "deploy-flow")


async def app_started_recall_on_first_request(harness: Harness) -> None:
    """(b) A recall the app started for this message when it arrived
    (``asyncrecall.integrations.start_recall``), settled before the run: the run adopts
    it (no second side query) and its first request carries the block, before the user's
    text."""
    question = "how do I deploy?"
    harness.server.script(SIDE_MODEL, harness.side_reply("deploy-flow"))
    harness.wire.script("ok")
    async with harness.recall("side query") as prefetcher:
        start_recall(prefetcher, KEY, question)
        assert await prefetcher.wait_settled(KEY, 10)
        await harness.run(prefetcher, question)

    assert len(harness.side()) == 1, "the run started a recall of its own: not adopted"
    requests = harness.main()
    assert len(requests) == 1, f"{len(requests)} model requests, not 1"
    _memory_before(harness, requests[0], question, "deploy-flow")


def _memory_before(
    harness: Harness, messages: Sequence[Mapping[str, Any]], question: str, name: str
) -> None:
    """The request's one memory message holds ``name``, in a user message, before the
    user's text; on OpenAI chat completions that message's content is a string (many
    servers' chat templates render nothing else: llama-cpp-python's answer 500 to a
    list of content parts)."""
    found = memory_indexes(messages)
    assert len(found) == 1, f"memory in {len(found)} messages of the first request, not one"
    (at,) = found
    assert messages[at].get("role") == "user", f"memory in a {messages[at].get('role')} message"
    if not isinstance(harness.wire, AnthropicServerWire):  # Anthropic's content is blocks
        assert isinstance(messages[at].get("content"), str), (
            "memory in a list of content parts, not a string: templates that render only "
            "strings fail on it"
        )
    asked = max(i for i, m in enumerate(messages) if question in text_of(m))
    memory_at = (at, text_of(messages[at]).index(MEMORY_MARK))
    question_at = (asked, text_of(messages[asked]).rindex(question))
    assert memory_at < question_at, "the memory comes after the user's text"
    assert harness.paths[name] in text_of(messages[at])
    assert_valid_chat(messages)


# -- (c) ---------------------------------------------------------------------------------


async def side_query_hangs_up(harness: Harness, *, ending: Ending) -> None:
    """(c) When the run returns, raises, is cancelled or is left early while its recall's
    side query is still out, the server sees that query's client hang up, and the
    conversation has no recall pending."""
    if ending not in harness.driver.endings:
        pytest.skip(f"{type(harness.driver).__name__} cannot make a run that {ending}")
    release = threading.Event()
    harness.server.script(SIDE_MODEL, Reply(hang=True))
    if ending == "raises":
        harness.wire.script(Reply(status=400, error_message="bad request", gate=release))
    elif ending == "is cancelled":
        harness.wire.script(Reply(hang=True))
    else:
        harness.wire.script(Reply(text="ok", gate=release))
    async with harness.recall("side query") as prefetcher:
        run = harness.run_of(prefetcher, "question", leave_early=ending == "is left early")
        task = asyncio.create_task(harness.drive(run))
        try:
            side = await harness.server.await_for(lambda r: r.model == SIDE_MODEL)
            await harness.first_main_request()
            if ending == "is cancelled":
                task.cancel()
            release.set()
            if ending == "raises":
                with pytest.raises(Exception):  # noqa: B017 - the framework's own error
                    await task
            elif ending == "is cancelled":
                with pytest.raises(asyncio.CancelledError):
                    await task
            else:
                await task
        finally:
            release.set()
            if not task.done():  # pragma: no cover - a failed check above
                task.cancel()
        try:
            await harness.server.await_disconnected(side)
        except TimeoutError:
            raise AssertionError(f"the side query was not hung up when the run {ending}") from None
        await harness.no_recall_pending(prefetcher)


# -- (d) ---------------------------------------------------------------------------------

FIRST_QUESTION = "how do I test the db layer?"
NEXT_QUESTION = "and for the api layer?"


async def shown_memory_once(
    harness: Harness,
    *,
    history: Literal["framework", "app", "none"],
    shown_at: Literal["first request", "tool result"],
) -> None:
    """(d) A memory the model saw is not offered again while the history the next message
    sends keeps it; a memory that history does not keep is offered again. Two messages
    of one conversation: the first is shown the file (on its first request, from a recall
    the app started on arrival, or after its tool round); the second continues with the
    history the framework keeps (``framework``), or, its recall started by the app on
    arrival (before the adapter sees the history), with the app's own store of the chat
    text (``app``: no memory in it) or with none. The side model picks the file whenever
    it is offered: the second message's last request holds it exactly once, from the
    history or injected again, never both and never neither."""
    db = harness.paths["db-testing"]
    harness.side_picks(lambda text: ["db-testing"] if db in text else [])
    first_run = ["one"] if shown_at == "first request" else [tool_round("x.py"), "one"]
    harness.wire.script(*first_run, tool_round("a.py"), "two")
    async with harness.recall("side query") as prefetcher:
        settle = harness.settle(prefetcher)
        if shown_at == "first request":
            start_recall(prefetcher, KEY, FIRST_QUESTION)
            assert await prefetcher.wait_settled(KEY, 10)
        first = await harness.run(prefetcher, FIRST_QUESTION, tool_hook=settle)
        shown = harness.main()
        assert len(shown) == len(first_run), f"{len(shown)} requests in the first run"
        at = 0 if shown_at == "first request" else -1
        assert len(_blocks_with(shown[at], db)) == 1, f"the file was not shown at the {shown_at}"
        if history == "framework":
            await harness.run(prefetcher, NEXT_QUESTION, previous=first, tool_hook=settle)
        else:
            # The app starts the next recall on arrival, before the adapter sees the
            # history: one that left the file out must not be the one used.
            start_recall(prefetcher, KEY, NEXT_QUESTION)
            chat = (("user", FIRST_QUESTION), ("assistant", "one")) if history == "app" else ()
            await harness.run(prefetcher, NEXT_QUESTION, chat=chat, tool_hook=settle)

    requests = harness.main()[len(first_run) :]
    assert len(requests) == 2, f"{len(requests)} model requests for the second message, not 2"
    opening, last = requests
    asked = max(i for i, m in enumerate(opening) if NEXT_QUESTION in text_of(m))
    answered = [i for i, m in enumerate(opening[:asked]) if m.get("role") == "assistant"]
    history_part = opening[: answered[-1] + 1] if answered else []
    kept = bool(_blocks_with(history_part, db))
    if history != "framework":
        assert not kept, "the app's chat came back with memory in it"
    offered = [r for r in harness.side() if NEXT_QUESTION in side_text(r)]
    assert offered, "the second message started no recall"
    if kept:
        assert db not in side_text(offered[-1]), "a memory the history keeps was offered again"
    else:
        assert db in side_text(offered[-1]), "a memory the history lost was not offered again"
    count = len(_blocks_with(last, db))
    assert count == 1, f"the file is in {count} memory messages of the last request, not one"
    for messages in harness.main():
        assert_valid_chat(messages)


# -- (e) ---------------------------------------------------------------------------------


async def framework_accepts_injection(harness: Harness) -> None:
    """(e) What the adapter injected passes the framework's own validation: the run's
    result goes through the driver's :meth:`~Driver.revalidate` (the framework's
    serialisation and validation of its history) and continues the conversation; every
    request on the wire is a valid chat with one system message, tool calls paired, and
    no request carries more than one memory message."""
    gate = threading.Event()
    deploy = harness.paths["deploy-flow"]
    harness.server.script(SIDE_MODEL, harness.side_reply("deploy-flow", gate=gate))
    harness.side_picks(lambda text: ["deploy-flow"] if deploy in text else [])
    harness.wire.script(tool_round("a.py"), "one", tool_round("b.py"), "two")
    async with harness.recall("side query") as prefetcher:
        hook = _settled_within_tool(harness, prefetcher, gate)
        first = await harness.run(prefetcher, "how do I deploy?", tool_hook=hook)
        previous = await harness.driver.revalidate(first)
        await harness.run(prefetcher, "thanks", previous=previous, tool_hook=hook)

    requests = harness.main()
    assert len(requests) == 4, f"{len(requests)} model requests, not 4"
    for messages in requests:
        assert_valid_chat(messages)
        roles = [m.get("role") for m in messages]
        assert roles.count("system") + roles.count("developer") == 1, f"system messages: {roles}"
        assert len(memory_indexes(messages)) <= 1, "a request carries memory twice"
    assert len(_blocks_with(requests[1], deploy)) == 1, "the first run showed no memory"
    assert len(_blocks_with(requests[3], deploy)) == 1, "the next run lost the memory"


# -- (f) ---------------------------------------------------------------------------------


def _by_question(harness: Harness) -> None:
    """The side model picks deploy-flow for the question about deploys, else user-role."""
    harness.side_picks(lambda text: ["deploy-flow" if "deploy?" in text else "user-role"])


def _only_the_new_message(harness: Harness, requests: list[list[dict[str, Any]]]) -> None:
    deploy, user = harness.paths["deploy-flow"], harness.paths["user-role"]
    for messages in requests:
        assert not _blocks_with(messages, deploy), "the previous message's memory was injected"
    assert requests, "the new message sent no request"
    assert len(_blocks_with(requests[-1], user)) == 1, "the new message got no memory of its own"


async def cancelled_run_leaves_nothing(harness: Harness) -> None:
    """(f) A run cancelled right after it started its recall (at the loop tick that
    follows) leaves no recall pending; the next message gets its own recall's memory and
    never the cancelled message's."""
    _by_question(harness)
    started = asyncio.Event()

    def on_event(event: PrefetchEvent) -> None:
        if isinstance(event, MemoryRecallStartedEvent):
            started.set()

    async with harness.recall("side query", on_event=on_event) as prefetcher:
        task = asyncio.create_task(harness.run(prefetcher, "how do I deploy?"))
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await harness.no_recall_pending(prefetcher)
        before = len(harness.main())
        harness.wire.script(tool_round("a.py"), "who you are")
        settle = harness.settle(prefetcher)
        await harness.run(prefetcher, "what do you know about me?", tool_hook=settle)
    _only_the_new_message(harness, harness.main()[before:])


async def stale_recall_not_adopted(harness: Harness) -> None:
    """(f) A recall the app started for an earlier message it never ran
    (``asyncrecall.integrations.start_recall``) is not given to a later message: that
    message's run gets its own recall's memory, never the earlier one's."""
    _by_question(harness)
    harness.wire.script(tool_round("a.py"), "ok")
    async with harness.recall("side query") as prefetcher:
        start_recall(prefetcher, KEY, "how do I deploy?")
        assert await prefetcher.wait_settled(KEY, 10)
        settle = harness.settle(prefetcher)
        await harness.run(prefetcher, "who am I?", tool_hook=settle)
    _only_the_new_message(harness, harness.main())


# -- (g) ---------------------------------------------------------------------------------

KEPT_CONVERSATIONS = 8


def _live_objects() -> Counter[str]:
    """Objects of asyncrecall's own classes still alive (after a full collection), by
    class."""
    gc.collect()
    return Counter(
        f"{kind.__module__}.{kind.__qualname__}"
        for kind in map(type, gc.get_objects())
        if _ours(kind)
    )


def _ours(kind: type) -> bool:
    module = kind.__dict__.get("__module__")
    return (
        isinstance(module, str)
        and module.startswith("asyncrecall.")
        and not module.startswith("asyncrecall.testing.")  # the server's records
    )


async def bounded_memory(harness: Harness, *, keys: Literal["app's", "none"]) -> None:
    """(g) Many conversations, each shown memory, do not grow memory without bound: over
    the driver's ``conversations`` of them (40 by default; each with a key of its own, or
    with no key from the app), with a prefetcher that keeps at most 8 conversations, the
    objects of asyncrecall's classes alive (blocks, recalls, conversations) grew by less
    than three quarters of that number: an adapter may keep records it drops in batches,
    not one per conversation. They are counted after as many conversations again, which
    fill every bounded record first: the prefetcher's, and a framework's own (Pydantic
    AI keeps its last agents' capabilities alive, a few dozen objects)."""
    question = "how do deploys reach the staging cluster?"
    conversations = harness.driver.conversations
    if conversations < 5 * KEPT_CONVERSATIONS:
        raise ValueError(f"case (g) needs at least {5 * KEPT_CONVERSATIONS} conversations")
    harness.wire.script(*["ok"] * (2 * conversations + 2))
    async with harness.recall("lexical", max_conversations=KEPT_CONVERSATIONS) as prefetcher:

        async def conversation(n: int) -> None:
            key = f"conversation-{n}" if keys == "app's" else None
            await harness.run(prefetcher, question, key=key)

        for n in range(2):  # the frameworks' and the server's one-time set-up
            await conversation(-1 - n)
        for n in range(conversations):  # every bounded record fills up
            await conversation(n)
        before = await asyncio.to_thread(_live_objects)  # off the loop: it takes a while
        for n in range(conversations, 2 * conversations):
            await conversation(n)
        grown = await asyncio.to_thread(_live_objects) - before
        assert not prefetcher.tasks, "recall tasks left running"
    shown = [len(memory_indexes(messages)) for messages in harness.main()]
    assert shown == [1] * len(shown), "a conversation was not shown its memory"
    assert grown.total() < conversations * 3 // 4, (
        f"{grown.total()} more asyncrecall objects alive after {conversations} "
        f"conversations: {dict(grown.most_common(5))}"
    )


CASES: tuple[Case, ...] = (
    _case("a-slow-recall-after-tool-results", slow_recall_after_tool_results),
    _case("b-settled-recall-on-first-request", settled_recall_on_first_request),
    _case("b-app-started-recall-on-first-request", app_started_recall_on_first_request),
    *(
        _case(f"c-hang-up-when-run-{e.replace(' ', '-')}", side_query_hangs_up, ending=e)
        for e in get_args(Ending)
    ),
    _case(
        "d-shown-memory-framework-history",
        shown_memory_once,
        history="framework",
        shown_at="tool result",
    ),
    _case("d-shown-memory-app-chat", shown_memory_once, history="app", shown_at="first request"),
    _case("d-shown-memory-no-history", shown_memory_once, history="none", shown_at="tool result"),
    _case("e-framework-accepts-injection", framework_accepts_injection),
    _case("f-cancelled-run-leaves-nothing", cancelled_run_leaves_nothing),
    _case("f-stale-recall-not-adopted", stale_recall_not_adopted),
    _case("g-bounded-memory-with-keys", bounded_memory, keys="app's"),
    _case("g-bounded-memory-without-keys", bounded_memory, keys="none"),
)
"""Every case, in order."""


def cases(*, marks: Mapping[str, Sequence[pytest.MarkDecorator]] | None = None) -> list[Any]:
    """Every case as a ``pytest.param`` with its id, for ``@pytest.mark.parametrize``;
    ``marks`` adds marks to cases by id (an unknown id is an error)."""
    marks = dict(marks or {})
    unknown = set(marks) - {case.id for case in CASES}
    if unknown:
        raise ValueError(f"no conformance case named {sorted(unknown)}")
    return [pytest.param(case, id=case.id, marks=tuple(marks.get(case.id, ()))) for case in CASES]
