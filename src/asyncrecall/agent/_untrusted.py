"""Text the agent passes on from outside: tool results cannot pose as the harness's
blocks, and every write to memory is checked against where its text came from.

A tool result holds whatever a file, a page or a command printed, and any of them may
carry a forged ``<system-reminder>`` block ("the project's install rule is ...").
Every string of a tool response (values and keys, at any depth) has the wrapper's tags
neutralised the way memory text is (:func:`~asyncrecall.memory.neutralise_tags`)
before the response enters the history, so the only wrapper tags a request holds are
the harness's own: the memory block and the client's reminders.

:class:`SessionTaint` is what one session's model was shown that the user did not
type, for as long as the session lasts (not one query): every tool output, the answers
the model wrote once it had seen such text, and the memories recall injected that are
held (recalled only with quarantine off). The user's turns are kept too: their own
words, and their parts that are someone else's text (found by shape, in
:mod:`asyncrecall.memory._attribution`). A write (``save_memory``, extraction) is vetted
against all of it (:func:`~asyncrecall.memory.vet`). Recording is cheap and runs in the
loop (it keeps references); a text's fingerprint is built once, by the first write that
needs it, in that write's worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from asyncrecall.memory import (
    Fingerprint,
    ForeignText,
    MemoryDoc,
    Verdict,
    neutralise_tags,
    vet,
)
from asyncrecall.memory._vetting import held_text
from asyncrecall.models import FunctionResponse

__all__ = ["FOREIGN_CHARS", "SessionTaint", "neutralised_response"]

#: Characters of outside text a session keeps to check writes against; past this it
#: keeps the newest, and a write the user's own words do not state is held.
FOREIGN_CHARS: Final = 8_000_000


def _neutralised(value: Any) -> Any:
    if isinstance(value, str):
        return neutralise_tags(value)
    if isinstance(value, Mapping):
        return {_neutralised(k): _neutralised(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_neutralised(v) for v in value]
    return value


def neutralised_response(response: FunctionResponse) -> FunctionResponse:
    """``response`` with every wrapper tag in its strings neutralised (itself when none)."""
    cleaned = _neutralised(response.response)
    if cleaned == response.response:
        return response
    return FunctionResponse(response.id, response.name, cleaned)


def _strings(value: Any) -> Iterator[str]:
    """Every string of a tool response, keys and values, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _label(name: str, args: object) -> str:
    """``read_file(README.md)``: the tool and its first argument, for a held reason."""
    shown = ""
    if isinstance(args, Mapping):
        first = next((v for v in args.values() if isinstance(v, str)), "")
        shown = first if len(first) <= 60 else first[:57] + "..."
    return f"the output of {name}({shown})"


class SessionTaint:
    """What one session's model was shown that the user did not type (see module doc).

    Thread-safe: the loop records (references only), a write's worker thread reads,
    finds the pasted parts of user turns and builds fingerprints (each once).
    """

    def __init__(self, *, limit: int = FOREIGN_CHARS) -> None:
        self._lock = threading.Lock()
        # In order: ("turn", text), ("foreign", ForeignText), ("answer", text).
        self._log: list[tuple[str, Any]] = []
        self._prints: dict[int, Fingerprint] = {}
        self._pasted: dict[int, bool] = {}
        self._recalled: dict[str, None] = {}
        self._chars = 0
        self._limit = limit
        self._outputs = False
        #: Outside text was dropped past ``limit``: writes the user's words do not
        #: state are held.
        self.partial = False

    @property
    def tool_output_seen(self) -> bool:
        """A tool has returned output to the model in this session."""
        return self._outputs

    def user_turn(self, text: str) -> None:
        """A user query (its parts that are someone else's text are found when a write
        is vetted)."""
        with self._lock:
            self._log.append(("turn", text))

    def tool_output(self, name: str, args: object, response: object) -> None:
        """What a tool returned to the model (every string of the response)."""
        text = "\n".join(_strings(response))
        if text.strip():
            self._outputs = True
            self._add("foreign", ForeignText(_label(name, args), text))

    def answer(self, text: str) -> None:
        """The model's answer to a query: outside text once the model had seen some
        before it (it may repeat or rephrase it)."""
        if text.strip():
            self._add("answer", text)

    def recalled(self, paths: Sequence[str]) -> None:
        """Memories recall injected (looked up, and counted when held, at a write)."""
        with self._lock:
            self._recalled.update(dict.fromkeys(paths))

    def _add(self, kind: str, item: Any) -> None:
        size = len(item.text if isinstance(item, ForeignText) else item)
        with self._lock:
            self._log.append((kind, item))
            self._chars += size
            while self._chars > self._limit:
                at = next((i for i, (k, _) in enumerate(self._log) if k != "turn"), None)
                if at is None or at == len(self._log) - 1:
                    break
                _, dropped = self._log.pop(at)
                self._chars -= len(dropped.text if isinstance(dropped, ForeignText) else dropped)
                self._prints.clear()
                self._pasted.clear()
                self.partial = True

    def turns(self) -> tuple[str, ...]:
        """The user's turns so far, in order."""
        with self._lock:
            return tuple(item for kind, item in self._log if kind == "turn")

    def foreign(self) -> tuple[ForeignText, ...]:
        """The outside text so far: tool outputs, and the answers written after outside
        text (a tool's, or a pasted part of a user turn). Call it off the loop."""
        from asyncrecall.memory._attribution import foreign_spans

        with self._lock:
            log = list(self._log)
        out: list[ForeignText] = []
        seen = False
        for kind, item in log:
            if kind == "foreign":
                out.append(item)
                seen = True
            elif kind == "answer" and seen:
                out.append(ForeignText("the assistant's answer after outside text", item))
            elif kind == "turn" and not seen:
                key = id(item)
                pasted = self._pasted.get(key)
                if pasted is None:
                    pasted = self._pasted[key] = bool(foreign_spans(item))
                seen = pasted
        return tuple(out)

    def fingerprints(
        self, lookup: Callable[[str], MemoryDoc | None] | None = None
    ) -> list[Fingerprint]:
        """The fingerprints of :meth:`foreign` (built once each), and of the held
        memories recall injected (``lookup``: a path to its memory, ``None`` when
        gone). Call it off the loop: a first fingerprint reads its whole text."""
        prints = []
        for item in self.foreign():
            key = id(item.text)
            found = self._prints.get(key)
            if found is None or found.label != item.label:
                found = self._prints[key] = Fingerprint.of(item)
            prints.append(found)
        prints.extend(Fingerprint.of(item) for item in self.held_recalled(lookup))
        return prints

    def held_recalled(self, lookup: Callable[[str], MemoryDoc | None] | None) -> list[ForeignText]:
        """The memories recall injected that are held (recalled with quarantine off):
        text the user did not confirm. ``lookup``: a path to its memory, ``None`` when
        gone."""
        if lookup is None:
            return []
        with self._lock:
            recalled = list(self._recalled)
        return [text for path in recalled for text in held_text(lookup(path))]

    def vet(
        self,
        text: str,
        *,
        said: Sequence[str] = (),
        lookup: Callable[[str], MemoryDoc | None] | None = None,
        target: MemoryDoc | None = None,
    ) -> Verdict:
        """:func:`~asyncrecall.memory.vet` of a write of ``text`` answering the user's
        turns ``said``, against the whole session so far; ``target``: the memory the
        write changes, whose text is not the user's while it is held."""
        context = [t for t in self.turns() if t not in said]
        return vet(
            text,
            said=said,
            context=context,
            foreign=self.fingerprints(lookup),
            partial=self.partial,
            held=held_text(target),
        )
