"""The Claude Agent SDK's driver for ``bench frameworks``: its bundled Claude Code CLI
against the benchmark's server (an :class:`~asyncrecall.testing.AnthropicServer`).

Each run is one ``ClaudeSDKClient`` session, connected before the run's clock starts
(the CLI's start-up is not the memory's cost), with one in-process MCP tool,
``read_file`` (the CLI names it ``mcp__bench__read_file``), and no built-in tools.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from asyncrecall.memory import Recaller
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall_bench._frameworks_driver import SYSTEM, Driver
from asyncrecall_bench._frameworks_driver import read_file as read_plan_file
from asyncrecall_bench._workload import DURATION_ARG, QueryPlan, tagged_text

__all__ = ["ClaudeAgentSDK"]


class ClaudeAgentSDK(Driver):
    """One ``ClaudeSDKClient`` session per run, the four ways."""

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self._folder = Path(tempfile.mkdtemp(prefix="asyncrecall-bench-claude-"))
        self._env = {
            "ANTHROPIC_BASE_URL": base_url.removesuffix("/v1"),
            "ANTHROPIC_API_KEY": "bench",
            "CLAUDE_CONFIG_DIR": str(self._folder / "config"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }

    def prepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        raise NotImplementedError("the CLI connects: use aprepare")

    async def aprepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        from claude_agent_sdk import (
            ClaudeAgentOptions,
            ClaudeSDKClient,
            create_sdk_mcp_server,
            tool,
        )

        from asyncrecall.integrations.claude_agent_sdk import AsyncRecallHooks
        from asyncrecall_bench._frameworks_awaited import awaited_claude_agent_sdk

        @tool("read_file", "Read a file.", {"path": str, DURATION_ARG: float})
        async def read_file(args: dict[str, Any]) -> dict[str, Any]:
            text = await read_plan_file(str(args["path"]), float(args.get(DURATION_ARG, 0.0)))
            return {"content": [{"type": "text", "text": text}]}

        options = ClaudeAgentOptions(
            model=model,
            cwd=self._folder,
            env=self._env,
            system_prompt=SYSTEM,
            tools=[],
            mcp_servers={"bench": create_sdk_mcp_server("bench", tools=[read_file])},
            allowed_tools=["mcp__bench__read_file"],
            setting_sources=[],
        )
        recall = None
        if pattern == "adapter":
            recall = AsyncRecallHooks(prefetcher, key=plan.qid)
            options = self._noting_handed(recall.options(options), model)
        elif pattern == "awaited":
            options = dataclasses.replace(options, hooks=awaited_claude_agent_sdk(memory))
        client = ClaudeSDKClient(options=options)
        await client.connect()
        text = tagged_text(plan)

        async def start() -> None:
            try:
                await client.query(text)
                answer = (
                    client.receive_response() if recall is None else recall.receive_response(client)
                )
                async for _message in answer:
                    pass
            finally:
                await client.disconnect()

        return start

    def _noting_handed(self, options: Any, model: str) -> Any:
        """``options`` whose run-start hooks note when they answer (:attr:`handed`)."""

        def noting(hook: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def noted(*args: Any) -> Any:
                try:
                    return await hook(*args)
                finally:
                    self.handed.setdefault(model, time.monotonic())

            return noted

        hooks = dict(options.hooks)
        hooks["UserPromptSubmit"] = [
            dataclasses.replace(matcher, hooks=[noting(h) for h in matcher.hooks])
            for matcher in hooks["UserPromptSubmit"]
        ]
        return dataclasses.replace(options, hooks=hooks)

    async def aclose(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)
