"""Claude Agent SDK: hooks that inject memory recalled in the background.

Usage::

    from asyncrecall.integrations.claude_agent_sdk import AsyncRecallHooks

    recall = AsyncRecallHooks(RecallPrefetcher(memory))
    async for message in recall.query(prompt="how do I deploy?", options=options):
        ...
    # or: ClaudeSDKClient(options=recall.options(options)), and read each answer
    # through ``recall.receive_response(client)``

The SDK drives the Claude Code CLI, which calls the hooks (``ClaudeAgentOptions(hooks=
recall.hooks())``, or :meth:`AsyncRecallHooks.options` to add them to yours):

* ``UserPromptSubmit``: adopts the recall the app started for this message
  (:func:`asyncrecall.integrations.start_recall`) or starts one, gives the loop one tick
  (a recall with no I/O settles there) and returns at once: with the settled block as
  ``additionalContext`` when there is one (the main recall's, else the instant pass's),
  else with nothing. The CLI puts it in the first model request, in a system message
  after the user's, and keeps it in the session's history.
* ``PostToolBatch`` (once per round of tool calls, after every call resolved, before the
  next model request): the first one after the recall settled takes its block, once, as
  ``additionalContext``; the CLI sends it after all the round's tool results, and the
  tool results stay paired with their calls. Not ``PostToolUse``: that fires per call,
  and the CLI puts its context with that call's own result, between the results of a
  round of parallel calls (in its user-message format). Rounds of sub-agents are
  skipped: their context goes to the sub-agent, not to the conversation the user is in.
* ``Stop`` (the turn ended) and ``StopFailure`` (it ended on an API error): the recall,
  if still pending, is cancelled and its side query hangs up.

An interrupt (``client.interrupt()``) fires no hook: the turn's ``ResultMessage`` ends it,
and :meth:`AsyncRecallHooks.query` and :meth:`AsyncRecallHooks.receive_response` end
the recall there, and in their ``finally`` however the stream ends (an error, a
cancellation, leaving the loop early: close the stream, e.g. with
``contextlib.aclosing``). :meth:`AsyncRecallHooks.cancel` does it by hand.

The conversation key is the session id (``key=`` a string names one conversation for
every session of these hooks, or a function maps the session id). The CLI keeps the
memory in the session's history (resume included), so files shown in a session are not
offered again in it. When a conversation moves to another session (a string key and a
new session), ``UserPromptSubmit`` reads that session's transcript (``transcript_path``)
once: the files shown before that it does not hold are offered again, and a recall the
app started for the message, which left them out, is started afresh. A fork
(``fork_session``) has no transcript yet at its first prompt, so its files are offered
again too: the model may see one twice (tokens, never memory lost). A new session under
its own id starts with none shown.

The CLI puts hook context in a system message of its own and escapes ``<`` in it, so
the block goes without its ``<system-reminder>`` wrapper (from its ``## Relevant memory``
heading on).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    Message,
    ResultMessage,
    SystemMessage,
)
from claude_agent_sdk import query as sdk_query
from claude_agent_sdk.types import HookEvent, SyncHookJSONOutput

from asyncrecall.integrations._common import (
    adopt_or_start,
    end_reason,
    finish,
    has_shown,
    record_shown,
)
from asyncrecall.prefetch import DiscardReason, MemoryBlock, PendingRecall, RecallPrefetcher

__all__ = ["AsyncRecallHooks", "memory_context"]

# The session each conversation was last seen in, whose history holds what it was shown:
# kept with the prefetcher (an app may make hooks per request), pruned with the
# conversations the prefetcher lets go of.
_sessions: weakref.WeakKeyDictionary[RecallPrefetcher, dict[str, str]] = weakref.WeakKeyDictionary()

_OPEN, _CLOSE = "<system-reminder>\n", "\n</system-reminder>"


def memory_context(block: MemoryBlock) -> str:
    """The ``additionalContext`` for ``block``: its text without the wrapper tags (the CLI
    wraps hook context itself, and would show the tags escaped)."""
    text = block.text
    if text.startswith(_OPEN) and text.endswith(_CLOSE):
        return text[len(_OPEN) : -len(_CLOSE)]
    return text


class AsyncRecallHooks:
    """Background memory recall for the Claude Agent SDK, as hooks of the Claude Code CLI.

    ``prefetcher`` holds the memory and the conversations; ``key`` names the
    conversation: a string (one conversation, whatever the session), a function of the
    session id, or ``None`` (the session id).
    """

    def __init__(
        self, prefetcher: RecallPrefetcher, *, key: str | Callable[[str], str] | None = None
    ) -> None:
        self.prefetcher = prefetcher
        self.key = key
        # The recall each conversation's current turn adopted or started (weak: once the
        # prefetcher lets go of it, taken or dropped, there is nothing left to end).
        self._recalls: weakref.WeakValueDictionary[str, PendingRecall] = (
            weakref.WeakValueDictionary()
        )

    def __repr__(self) -> str:
        return f"AsyncRecallHooks({self.prefetcher!r})"

    # -- wiring ---------------------------------------------------------------------

    def hooks(self) -> dict[HookEvent, list[HookMatcher]]:
        """The hooks for ``ClaudeAgentOptions(hooks=...)``."""
        hooks: dict[str, list[HookMatcher]] = {
            "UserPromptSubmit": [HookMatcher(hooks=[self.user_prompt_submit])],
            # PostToolBatch and StopFailure are not in the SDK's HookEvent type; the CLI
            # it bundles fires both.
            "PostToolBatch": [HookMatcher(hooks=[self.post_tool_batch])],
            "Stop": [HookMatcher(hooks=[self.stop])],
            "StopFailure": [HookMatcher(hooks=[self.stop])],
        }
        return cast(dict[HookEvent, list[HookMatcher]], hooks)

    def options(self, options: ClaudeAgentOptions | None = None) -> ClaudeAgentOptions:
        """A copy of ``options`` (default: new ones) with these hooks after its own."""
        base = options if options is not None else ClaudeAgentOptions()
        merged: dict[HookEvent, list[HookMatcher]] = dict(base.hooks or {})
        for event, matchers in self.hooks().items():
            merged[event] = [*merged.get(event, []), *matchers]
        return dataclasses.replace(base, hooks=merged)

    # -- the hooks --------------------------------------------------------------------

    async def user_prompt_submit(
        self, input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """Start (or adopt) the message's recall; its block at once if it has settled."""
        if input["hook_event_name"] != "UserPromptSubmit":
            return {}
        session = input["session_id"]
        key = self._key_for(session)
        history = None
        if self._moved(key, session) and has_shown(self.prefetcher, key):
            history = await asyncio.to_thread(_transcript_texts, input.get("transcript_path"))
        recall = adopt_or_start(self.prefetcher, key, input["prompt"], history=history)
        if recall is not None:
            self._recalls[key] = recall
        await asyncio.sleep(0)  # one tick: a recall with no I/O settles here
        return self._give("UserPromptSubmit", key, self.prefetcher.take(key, "user_query"))

    async def post_tool_batch(
        self, input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The settled block, once, after all the tool results of the next request."""
        if cast(str, input["hook_event_name"]) != "PostToolBatch" or "agent_id" in input:
            return {}
        key = self._key_for(input["session_id"])
        return self._give("PostToolBatch", key, self.prefetcher.take(key, "tool_result"))

    async def stop(
        self, input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """The turn ended (``Stop``) or failed (``StopFailure``): drop its recall."""
        event = cast(str, input["hook_event_name"])
        self.cancel(input["session_id"], "turn_ended" if event == "Stop" else "error")
        return {}

    # -- ends the hooks do not see ------------------------------------------------------

    def cancel(self, session_id: str | None = None, reason: DiscardReason = "cancelled") -> None:
        """Cancel the pending recall of the session's turn (``None``: of every session).

        A recall already taken is left alone, and so is one the app started for the
        conversation's next message.
        """
        keys = list(self._recalls) if session_id is None else [self._key_for(session_id)]
        for key in keys:
            finish(self.prefetcher, key, self._recalls.pop(key, None), reason)

    async def query(
        self,
        *,
        prompt: str | AsyncIterable[dict[str, Any]],
        options: ClaudeAgentOptions | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Message]:
        """``claude_agent_sdk.query`` with these hooks, ending the recall however it ends.

        A new session (no ``session_id``, ``resume`` or ``continue_conversation`` in
        ``options``) gets its id here, so the recall is ended even when the stream stops
        before the CLI said which session it is.
        """
        run = self.options(options)
        if run.session_id is None and run.resume is None and not run.continue_conversation:
            run = dataclasses.replace(run, session_id=str(uuid.uuid4()))
        sessions = {run.session_id} if run.session_id is not None else set()
        stream = sdk_query(prompt=prompt, options=run, **kwargs)
        async for message in self._tracked(stream, sessions):
            yield message

    async def receive_response(self, client: ClaudeSDKClient) -> AsyncIterator[Message]:
        """``client.receive_response()``, ending the recall however the answer ends
        (its ``ResultMessage`` after an interrupt, an error, leaving early)."""
        async for message in self._tracked(client.receive_response(), set()):
            yield message

    async def _tracked(
        self, messages: AsyncIterator[Message], sessions: set[str]
    ) -> AsyncIterator[Message]:
        error: BaseException | None = None
        try:
            async for message in messages:
                session = _session_of(message)
                if session is not None:
                    sessions.add(session)
                if isinstance(message, ResultMessage):
                    self.cancel(message.session_id, _result_reason(message))
                yield message
        except BaseException as exc:
            error = exc
            raise
        finally:
            reason = end_reason(error)
            for session in sessions:
                self.cancel(session, reason)

    def _give(self, event: str, key: str, block: MemoryBlock | None) -> SyncHookJSONOutput:
        """The hook's answer with ``block``, recorded as held by the session's history."""
        if block is None:
            return {}
        context = memory_context(block)
        record_shown(self.prefetcher, key, dataclasses.replace(block, text=context))
        specific = {"hookEventName": event, "additionalContext": context}
        return {"hookSpecificOutput": cast(Any, specific)}

    def _moved(self, key: str, session: str) -> bool:
        """Note the conversation's session; whether it was last seen in another one."""
        sessions = _sessions.setdefault(self.prefetcher, {})
        seen = sessions.pop(key, None)
        sessions[key] = session
        count = len(sessions)
        if count >= 64 and count & (count - 1) == 0:  # now and then: drop the let-go
            for gone in [k for k in sessions if k != key and not self.prefetcher.surfaced(k)]:
                del sessions[gone]
        return seen is not None and seen != session

    def _key_for(self, session_id: str) -> str:
        if isinstance(self.key, str):
            return self.key
        if self.key is not None:
            return self.key(session_id)
        return session_id


def _transcript_texts(path: str | None) -> list[str]:
    """Every string in the session's transcript (the CLI's JSONL file): the history its
    next request re-sends, hook context included; none if there is no such file."""
    if not path:
        return []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    texts: list[str] = []
    for line in lines:
        try:
            texts += _strings(json.loads(line))
        except ValueError:
            continue  # a line the CLI is still writing
    return texts


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _session_of(message: Message) -> str | None:
    if isinstance(message, SystemMessage) and message.subtype == "init":
        session = message.data.get("session_id")
        return session if isinstance(session, str) else None
    session = getattr(message, "session_id", None)
    return session if isinstance(session, str) else None


def _result_reason(message: ResultMessage) -> DiscardReason:
    """How the turn a ``ResultMessage`` closes ended: an interrupt, an error, or done."""
    if message.subtype == "error_during_execution":
        return "cancelled"
    return "error" if message.is_error else "turn_ended"
