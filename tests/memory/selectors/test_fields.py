"""The field signal: a memory whose own name or description answers the query is
recalled by every selector that ships, in other words and forms and in several
languages, while a query no name answers still finds nothing."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence

import pytest

from asyncrecall.memory import FolderStore, MemoryDoc, ModelSelector, Recaller, Selector
from asyncrecall.memory.selectors._lexical import LexicalSelector
from asyncrecall.models._openai import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

from ..conftest import WriteFile, memory_doc, topic

#: Memories whose bodies say little the queries share: the name and description answer.
TARGETS = {
    "go-indent.md": memory_doc(
        "go-indent.md",
        "Tabs; gofmt decides the rest.",
        name="Indent style for Go",
        description="The indent style for Go files",
    ),
    "deploy.md": memory_doc(
        "deploy.md",
        "Tag, wait for the green build, then press the button.",
        name="Deploy checklist",
        description="steps before deploying to production",
    ),
    "migrations.md": memory_doc(
        "migrations.md",
        "alembic upgrade head, never by hand.",
        name="Database migrations",
        description="how we migrate the schema",
    ),
    "fr-indent.md": memory_doc(
        "fr-indent.md",
        "Des tabulations ; gofmt tranche.",
        name="Style d'indentation pour Go",
        description="l'indentation des fichiers Go",
    ),
    "de-migration.md": memory_doc(
        "de-migration.md",
        "Immer mit alembic, nie von Hand.",
        name="Datenbank-Migrationen",
        description="Migrationen der Datenbank ausführen",
    ),
    "ru-indent.md": memory_doc(
        "ru-indent.md",
        "Табуляция; gofmt решает.",
        name="Отступы в Go",
        description="стиль отступов для файлов Go",
    ),
    "zh-indent.md": memory_doc(
        "zh-indent.md",
        "用制表符，gofmt 决定。",
        name="Go 缩进风格",
        description="Go 文件的缩进风格",
    ),
    "ja-indent.md": memory_doc(
        "ja-indent.md",
        "タブを使う。gofmt が決める。",
        name="Go のインデント",
        description="Go ファイルのインデント規則",
    ),
}

#: Memories no query here is about.
OTHERS = [
    memory_doc("tea.md", "Alice drinks green tea every morning.", name="Tea"),
    memory_doc("ci.md", "The pipeline runs pytest, then ruff and mypy.", name="CI"),
    memory_doc("user.md", "The user is a data engineer; likes short answers.", name="User"),
]

DOCS: list[MemoryDoc] = [*OTHERS, *TARGETS.values()]

#: (query, the memory whose name or description answers it): other words, other forms.
CASES = [
    ("how do I indent Go code?", "go-indent.md"),
    ("indent style for Go", "go-indent.md"),
    ("Go indentation", "go-indent.md"),
    ("what are the deployment steps?", "deploy.md"),
    ("deploying to production", "deploy.md"),
    ("how do I migrate the databases?", "migrations.md"),
    ("Comment indenter les fichiers Go ?", "fr-indent.md"),
    ("Wie führe ich die Migration der Datenbank aus?", "de-migration.md"),
    ("какой стиль отступа в Go?", "ru-indent.md"),
    ("Go 代码的缩进风格", "zh-indent.md"),
    ("Go のインデント規則は？", "ja-indent.md"),
]

#: Queries no memory's name, description or body answers.
UNANSWERED = ["What did Melanie paint last summer?", "quarterly revenue forecast for Brazil"]


def _paths(docs: Sequence[MemoryDoc]) -> list[str]:
    return [doc.rel_path for doc in docs]


@pytest.mark.parametrize(("query", "expected"), CASES)
def test_the_lexical_selector_recalls_the_memory_its_name_answers(
    query: str, expected: str
) -> None:
    chosen, reason = LexicalSelector(persist=False).rank_explained(query, DOCS, limit=3)
    assert expected in _paths(chosen), (query, _paths(chosen), reason)


@pytest.mark.parametrize(("query", "expected"), CASES)
def test_abstention_never_hides_it(query: str, expected: str) -> None:
    """Even with a coverage gate no query passes, the field signal answers."""
    selector = LexicalSelector(persist=False, min_coverage=1.01)
    assert expected in _paths(selector.rank(query, DOCS, limit=3))


@pytest.mark.parametrize("query", UNANSWERED)
def test_a_query_no_name_answers_still_finds_nothing(query: str) -> None:
    chosen, reason = LexicalSelector(persist=False).rank_explained(query, DOCS, limit=3)
    assert chosen == []
    assert reason in {"no_match", "names_unknown", "below_threshold"}


needs_wordllama = pytest.mark.skipif(
    importlib.util.find_spec("wordllama") is None, reason="needs the local extra (wordllama)"
)


def _vector_selector(kind: str) -> Selector:
    """The embedding or hybrid selector, or the semantic instant pass, on a fresh
    lexical selector."""
    from asyncrecall.memory import EmbeddingSelector, HybridSelector, SemanticInstantSelector

    lexical = LexicalSelector(persist=False)
    if kind == "embedding":
        return EmbeddingSelector(fallback=lexical)
    if kind == "hybrid":
        return HybridSelector(lexical=lexical)
    return SemanticInstantSelector(lexical)


@needs_wordllama
@pytest.mark.parametrize("kind", ["embedding", "hybrid", "semantic"])
@pytest.mark.parametrize(("query", "expected"), CASES)
async def test_the_vector_selectors_recall_it(kind: str, query: str, expected: str) -> None:
    """The embedding and hybrid selectors, and the semantic instant pass (warm)."""
    selector = _vector_selector(kind)
    chosen, reason = await selector.select_explained(query, DOCS, limit=3)  # type: ignore[attr-defined]
    assert expected in _paths(chosen), (query, _paths(chosen), reason)


@needs_wordllama
@pytest.mark.parametrize("kind", ["embedding", "hybrid", "semantic"])
async def test_the_vector_selectors_say_why_they_abstain(kind: str) -> None:
    selector = _vector_selector(kind)
    chosen, reason = await selector.select_explained(UNANSWERED[0], DOCS, limit=3)  # type: ignore[attr-defined]
    assert chosen == []
    assert reason in {"no_match", "names_unknown", "below_threshold"}


async def test_the_model_selector_is_offered_it_first(
    local_server: LocalServer, store: FolderStore, write: WriteFile
) -> None:
    """A manifest of one file lists the memory whose name answers, not the newest."""
    write(
        "go-indent.md",
        topic("Indent style for Go", description="indent style", body="Tabs."),
        mtime=1_000.0,
    )
    for n in range(5):
        write(f"note-{n}.md", topic(f"Note {n}", description="something else"), mtime=2_000.0 + n)
    local_server.script("side", Reply(json={"selected_memories": ["go-indent.md"]}))
    async with OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as side:
        manager = Recaller(store, ModelSelector(side, manifest_files=1))
        result = await manager.recall("how do I indent Go code?")
    assert "go-indent.md" in json.dumps(local_server.requests[-1].messages)
    assert result.paths == ("go-indent.md",)


async def test_recall_says_why_it_abstains(store: FolderStore, write: WriteFile) -> None:
    """The recall result names the reason: too short, no match, below the threshold."""
    write("go-indent.md", topic("Indent style for Go", description="indent style", body="Tabs."))
    write("tea.md", topic("Tea", description="drinks", body="Alice drinks green tea daily."))
    manager = Recaller(store, LexicalSelector(persist=False), skip_trivial=True)
    assert (await manager.recall("indentation")).reason == "too_short"
    assert (await manager.recall("quarterly revenue for Brazil")).reason == "no_match"
    weak = await manager.recall("quarterly revenue forecast of green cars in brazil")
    assert (weak.paths, weak.reason) == ((), "below_threshold")
    found = await manager.recall("how do I indent Go code?")
    assert (found.paths, found.reason) == (("go-indent.md",), None)


async def test_no_side_query_for_a_question_about_someone_no_memory_mentions(
    local_server: LocalServer, store: FolderStore, write: WriteFile
) -> None:
    """The model selector obeys the embedded selectors' names gate (once its lexical
    fallback is warm): no side query, reason ``names_unknown``; a question the folder
    knows still gets one."""
    write("tea.md", topic("Tea", description="what Alice drinks", body="Alice drinks tea."))
    write("ci.md", topic("CI", description="the pipeline", body="pytest, then ruff."))
    local_server.set_default("side", Reply(json={"selected_memories": ["tea.md"]}))
    async with OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as side:
        manager = Recaller(store, ModelSelector(side))
        await manager.warm()
        before = len(local_server.requests)
        skipped = await manager.recall("What workshop did Caroline attend recently?")
        assert (skipped.paths, skipped.reason) == ((), "names_unknown")
        assert len(local_server.requests) == before
        asked = await manager.recall("What does Alice drink in the morning?")
        assert asked.paths == ("tea.md",)
        assert len(local_server.requests) == before + 1
