"""The agent's tools: confined to the project root, errors as results, order kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncrecall.agent import ToolRegistry
from asyncrecall.memory import FolderStore
from asyncrecall.models import FunctionCall


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 42\n# TODO: tests\n")
    (root / "README.md").write_text("hello\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return root


def call(tool: str, **args: object) -> FunctionCall:
    return FunctionCall(f"id_{tool}", tool, args)


async def run(registry: ToolRegistry, tool: str, **args: object) -> tuple[bool, dict[str, object]]:
    [outcome] = await registry.execute([call(tool, **args)])
    return outcome.ok, dict(outcome.response.response)


async def test_read_file_with_offset_and_limit(project: Path) -> None:
    ok, response = await run(
        ToolRegistry(project), "read_file", path="src/app.py", offset=1, limit=1
    )
    assert ok
    assert response["content"] == "    return 42"
    assert response["total_lines"] == 3 and response["truncated"] is True


@pytest.mark.parametrize("path", ["../secret.txt", "src/../../secret.txt", "/etc/passwd"])
async def test_paths_outside_the_project_are_refused_as_results(project: Path, path: str) -> None:
    """A path out of the root gets an error result the model can read, not an exception."""
    ok, response = await run(ToolRegistry(project), "read_file", path=path)
    assert not ok
    assert "outside the project root" in str(response["error"])


async def test_a_link_pointing_out_of_the_project_is_refused(project: Path) -> None:
    (project / "leak.txt").symlink_to(project.parent / "secret.txt")
    ok, response = await run(ToolRegistry(project), "read_file", path="leak.txt")
    assert not ok and "outside the project root" in str(response["error"])
    ok, response = await run(ToolRegistry(project), "grep_search", pattern="outside")
    assert ok and response["matches"] == []


async def test_list_glob_and_grep(project: Path) -> None:
    registry = ToolRegistry(project)
    ok, listing = await run(registry, "list_directory", path=".")
    assert ok and listing["entries"] == ["README.md", "src/"]
    ok, found = await run(registry, "glob", pattern="**/*.py")
    assert ok and found["matches"] == ["src/app.py"]
    ok, grep = await run(registry, "grep_search", pattern=r"TODO")
    assert ok and grep["matches"] == ["src/app.py:3: # TODO: tests"]
    ok, bad = await run(registry, "glob", pattern="../*")
    assert not ok and "inside the project root" in str(bad["error"])


async def test_unknown_tool_and_bad_arguments_are_error_results(project: Path) -> None:
    registry = ToolRegistry(project)
    ok, response = await run(registry, "rm_rf", path=".")
    assert not ok and "unknown tool" in str(response["error"])
    ok, response = await run(registry, "read_file")
    assert not ok and "'path'" in str(response["error"])
    ok, response = await run(registry, "grep_search", pattern="(")
    assert not ok


async def test_outcomes_keep_the_calls_order(project: Path, tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    registry = ToolRegistry(project, memory_store=store)
    calls = [
        call("save_memory", name="style", description="prefers tabs", type="user", content="x"),
        FunctionCall("r1", "read_file", {"path": "README.md"}),
        FunctionCall("r2", "list_directory", {"path": "src"}),
    ]
    outcomes = await registry.execute(calls)
    assert [o.call.id for o in outcomes] == ["id_save_memory", "r1", "r2"]
    assert all(o.ok for o in outcomes)
    assert [d.name for d in store.scan()] == ["style"]


async def test_save_memory_rejects_a_bad_type(project: Path, tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "memory")
    registry = ToolRegistry(project, memory_store=store)
    ok, response = await run(
        registry, "save_memory", name="x", description="d", type="nonsense", content="c"
    )
    assert not ok and "type" in str(response["error"])


def test_save_memory_is_only_offered_with_a_store(project: Path, tmp_path: Path) -> None:
    assert "save_memory" not in [s.name for s in ToolRegistry(project).specs]
    with_store = ToolRegistry(project, memory_store=FolderStore(tmp_path / "m"))
    assert "save_memory" in [s.name for s in with_store.specs]


async def test_a_symlink_loop_is_an_error_result_not_an_exception(project: Path) -> None:
    """A looping link gets an error result for that path, and the tools that walk the
    project skip it instead of failing."""
    (project / "a").symlink_to(project / "b")
    (project / "b").symlink_to(project / "a")
    registry = ToolRegistry(project)
    ok, response = await run(registry, "read_file", path="a")
    assert not ok and "cannot be resolved" in str(response["error"])
    ok, grep = await run(registry, "grep_search", pattern="TODO")
    assert ok and grep["matches"] == ["src/app.py:3: # TODO: tests"]
    ok, found = await run(registry, "glob", pattern="*")
    assert ok and "a" not in found["matches"] and "README.md" in found["matches"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("{'path': not json", "must be a JSON object"),
        (["README.md"], "must be a JSON object"),
        (None, "must be a JSON object"),
        ({"path": 7}, "'path' of read_file must be a string"),
        ({"path": "README.md", "offset": "ten"}, "'offset' of read_file must be a integer"),
        ({"path": "README.md", "limit": True}, "'limit' of read_file must be a integer"),
        ({"offset": 1}, "needs the argument(s): 'path'"),
    ],
)
async def test_malformed_arguments_are_an_error_result_the_model_can_read(
    project: Path, args: object, expected: str
) -> None:
    """Arguments that are not a JSON object, or of the wrong type, never raise: the model
    gets an error result naming what is wrong."""
    [outcome] = await ToolRegistry(project).execute([FunctionCall("x", "read_file", args)])  # type: ignore[arg-type]
    assert not outcome.ok
    assert expected in str(outcome.response.response["error"])


async def test_a_model_sending_malformed_arguments_gets_an_error_and_the_turn_goes_on(
    project: Path,
) -> None:
    """Whatever a model sends as arguments, the agent loop answers with a tool error and
    asks the model again; nothing crashes."""
    from asyncrecall.agent import Agent, AgentClient
    from asyncrecall.testing import ScriptedModel

    main = ScriptedModel(name="main")
    main.add_turn("", [FunctionCall("x", "read_file", "```not json```")])  # type: ignore[arg-type]
    main.add_turn("sorry, done")
    agent = Agent(AgentClient(model=main), ToolRegistry(project))

    result = await agent.ask("read it")

    assert result.text == "sorry, done" and result.error is None
    [response] = main.requests[1].contents[-1].function_responses
    assert "must be a JSON object" in str(response.response["error"])
    await agent.client.aclose()
