"""Adapters that carry :class:`~asyncrecall.prefetch.RecallPrefetcher` into agent frameworks.

One module per framework, each imported on its own (importing this package imports no
framework):

* :mod:`asyncrecall.integrations.pydantic_ai` — :class:`AsyncRecall`, a Pydantic AI
  capability (``pip install 'asyncrecall[pydantic-ai]'``);
* :mod:`asyncrecall.integrations.openai_agents` — ``run`` /
  ``run_streamed`` around the OpenAI Agents SDK's ``Runner``
  (``asyncrecall[openai-agents]``);
* :mod:`asyncrecall.integrations.langchain` — ``AsyncRecallMiddleware`` for LangChain v1
  ``create_agent`` (``asyncrecall[langchain]``);
* :mod:`asyncrecall.integrations.google_adk` — ``AsyncRecallPlugin``, a Google ADK runner
  plugin (``asyncrecall[google-adk]``);
* :mod:`asyncrecall.integrations.claude_agent_sdk` — ``AsyncRecallHooks``, hooks of the
  Claude Code CLI that the Claude Agent SDK drives (``asyncrecall[claude-agent-sdk]``).

Every adapter does the same thing: on each user message it starts the recall (or adopts
the one the app already started for that conversation key), never waits for it, puts
the memory block before the user's text if the recall settled before the first model
request, else after all the tool results of the first later request it has settled
for, at most once, and cancels the recall on every end of the run. (With the Claude Agent
SDK, the CLI it drives places what the hooks return: its page says where.)

:func:`start_recall` is what an app calls when the message arrives, to start the recall
earlier than the run does: a run adopts the key's pending recall only if it was started
for the same message text (one started with ``prefetcher.start`` directly, whose text
the adapters cannot see, is adopted by the first run only).
"""

from __future__ import annotations

from asyncrecall.integrations._common import start_recall

__all__ = ["start_recall"]
