"""The conformance kit: one suite of the recall contract that every framework adapter
runs, each in its framework's real agent loop.

An adapter carries :class:`~asyncrecall.prefetch.RecallPrefetcher` into a framework
(:mod:`asyncrecall.integrations`). Whatever its hooks, the model server must see the
same thing; the kit checks it on the wire, from the requests the model server received:

* **(a)** a recall slower than the first request lands after the tool results of the
  next request, in one user message after every tool message, once, and stays there
  (kept or put back) on the requests that follow; tool calls stay paired;
* **(b)** a recall settled before the first request rides on it, before the user's text
  (one the app started on arrival with :func:`asyncrecall.integrations.start_recall`
  is adopted, not started again);
* **(c)** when the run returns, raises, is cancelled or is left early while the side
  query is out, the server sees that query's client hang up;
* **(d)** a memory the model saw is not offered again while the history the next message
  sends keeps it, and is offered again when that history does not (the framework's own
  history, the app's store of the chat text, none; a recall the app started for the
  message before the adapter saw that history is not the one used): the model has it
  once, never twice, never lost;
* **(e)** what the adapter injects passes the framework's own validation of its history,
  which then feeds the next run; every request is a valid chat;
* **(f)** a new message never receives the recall of a previous one (a cancelled run's,
  or one the app started for a message it never ran);
* **(g)** many conversations do not grow memory without bound (the objects of
  asyncrecall's classes alive over a second round of 40 conversations, each shown
  memory).

Each case is one test id (``a-slow-recall-after-tool-results``, ...;
:data:`CASES`), and each fails with an ``AssertionError`` naming the rule it saw broken.

The kit owns the model server (:class:`~asyncrecall.testing.LocalServer`), a memory
folder of three memories, the recall (a side query to the server's model ``side``, or
the lexical selector) and the main model's script. The adapter's test supplies a
**driver**: how to run one user message in the framework.

Writing a driver
----------------

Subclass :class:`Driver` and implement one coroutine, :meth:`Driver.run`, which gets a
:class:`Run` and runs ``run.text`` through the framework's own agent loop:

* the agent's model is the framework's OpenAI-compatible client at ``run.base_url``,
  model ``run.model``, system prompt ``run.instructions``;
* the agent has one tool, ``read_file(path: str) -> str``, whose body is
  ``await run.read_file(path)``;
* the adapter under test is wired to ``run.prefetcher`` with conversation key
  ``run.key`` (``None``: the app names no conversation);
* ``run.previous`` is what ``run`` returned for the conversation's previous message:
  continue the conversation the framework's way (its message history, thread, session);
  ``run.chat`` instead gives the history as the app's own store of the chat text
  (``()``: none);
* ``run.leave_early``: drive the run as an iteration or a stream and leave it after the
  model's first answer;
* return whatever the next message needs as ``previous``; let errors and cancellation
  propagate.

A run the framework cannot make raises :class:`Unsupported` (the case is skipped with
that reason); :attr:`Driver.endings` lists the endings of (c) it can produce. Optional:
:meth:`Driver.revalidate` (the framework's serialisation and validation of a history,
for (e)) and :meth:`Driver.wire` (a main model that does not speak OpenAI chat
completions to ``LocalServer``: a :class:`Wire` that scripts its server with
:class:`~asyncrecall.testing.Reply` values and returns its requests converted to OpenAI
chat messages; for the Anthropic Messages API: ``system`` becomes the first message,
a ``tool_use`` block an assistant ``tool_calls`` entry, each ``tool_result`` block a
``tool`` message with its ``tool_use_id`` as ``tool_call_id``, placed before the user
message holding the same turn's other blocks).

Running it
----------

With pytest and pytest-asyncio: subclass :class:`ConformanceSuite` as a ``Test`` class
with a ``driver`` fixture::

    from asyncrecall_conformance import ConformanceSuite, Driver, Run

    class MyFrameworkDriver(Driver):
        async def run(self, run: Run) -> object:
            ...  # build the agent with the adapter, run run.text, return its history

    class TestMyAdapter(ConformanceSuite):
        @pytest.fixture
        def driver(self) -> Driver:
            return MyFrameworkDriver()

or parametrise a test of your own with :func:`cases` and run each case on a
:class:`Harness`::

    @pytest.mark.parametrize("case", cases())
    async def test_contract(case: Case, tmp_path: Path) -> None:
        with LocalServer() as server:
            await case(Harness(MyFrameworkDriver(), server, tmp_path / "memory"))

Both take marks per case id (``ConformanceSuite.case_marks``, ``cases(marks=...)``).
The docs page ``docs/frameworks/conformance.md`` has a whole example.
"""

from __future__ import annotations

from asyncrecall_conformance._anthropic import AnthropicServerWire
from asyncrecall_conformance._cases import CASES, Case, cases
from asyncrecall_conformance._driver import TOOL_NAME, Driver, Ending, Run, Unsupported
from asyncrecall_conformance._harness import KEY, MEMORIES, SIDE_MODEL, Harness
from asyncrecall_conformance._suite import ConformanceSuite
from asyncrecall_conformance._wire import (
    MAIN_MODEL,
    MEMORY_MARK,
    LocalServerWire,
    Wire,
    WireRequest,
    assert_memory_after_tools,
    assert_valid_chat,
    memory_indexes,
    text_of,
)

__all__ = [
    "CASES",
    "KEY",
    "MAIN_MODEL",
    "MEMORIES",
    "MEMORY_MARK",
    "SIDE_MODEL",
    "TOOL_NAME",
    "AnthropicServerWire",
    "Case",
    "ConformanceSuite",
    "Driver",
    "Ending",
    "Harness",
    "LocalServerWire",
    "Run",
    "Unsupported",
    "Wire",
    "WireRequest",
    "assert_memory_after_tools",
    "assert_valid_chat",
    "cases",
    "memory_indexes",
    "text_of",
]
