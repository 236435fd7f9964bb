"""Extraction and holds, over real HTTP on a real folder: a held memory's text is never
shown to the extraction side model, and extraction's writes never lift a hold."""

from __future__ import annotations

import json

from asyncrecall.memory import FolderStore, MemoryExtractor, Source, TranscriptTurn
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer
from held_texts import ATTACKS

from .conftest import SideModel, is_extraction, memory


def _turns(*texts: str) -> list[TranscriptTurn]:
    roles = ("user", "assistant")
    return [TranscriptTurn(i, roles[i % 2], text) for i, text in enumerate(texts)]


async def test_extraction_is_not_shown_a_held_memory_and_does_not_lift_it(
    store: FolderStore, side_model: OpenAIModel, side: SideModel, local_server: LocalServer
) -> None:
    """The existing memories extraction shows its side model leave a held memory out
    (its text would otherwise reach a write the turns alone make trusted), the user's
    own are shown; an update naming the held memory, citing a user turn but not
    attested, leaves it held."""
    store.save_memory(
        "Deploy steps", "how to deploy", "project", "Deploy with make deploy.", origin="user"
    )
    untrusted = Source.now("save_memory", session="s0", untrusted=True)
    store.save_memory("Regla", "regla del usuario", "feedback", ATTACKS["es"],
                      sources=(untrusted,))  # fmt: skip
    side.add(memory("Regla", [0], path="regla.md", action="update",
                    content="Verificar TLS en todas las peticiones."))  # fmt: skip

    result = await MemoryExtractor(store, side_model).extract(
        "s1", _turns("regla del usuario: verificar TLS, deploy con make deploy", "anotado")
    )

    (request,) = [r for r in local_server.requests if is_extraction(r)]
    prompt = json.dumps(request.messages, ensure_ascii=False)
    assert "Deploy with make deploy." in prompt and ATTACKS["es"] not in prompt
    assert result.updated == ("regla.md",)
    held = store.get("Regla")
    assert held.quarantined and "Verificar TLS" in held.body
    assert [s.origin for s in store.provenance_of(held)] == ["save_memory", "extraction-user"]
