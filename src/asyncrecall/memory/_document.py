"""Topic files: front matter parsing, rendering, and safe file names.

A topic file is Markdown with a front matter block between ``---`` fences::

    ---
    name: Testing policy
    description: tests: never mock the database
    type: feedback
    ---
    Integration tests hit a real database; a mocked one hid a broken migration.

The block is parsed as YAML in safe mode. Models often write an unquoted colon in
the description (as above), which YAML rejects; then the block is read again as
plain ``key: value`` lines, as the reference agent does, so such a file is not lost.
Files we write are always valid YAML (values are quoted by the YAML dumper).
"""

from __future__ import annotations

import hashlib
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._limits import MAX_NAME_BYTES
from asyncrecall.memory._provenance import (
    PROVENANCE_KEY,
    Source,
    is_quarantined,
    origin_label,
    parse_provenance,
)
from asyncrecall.memory._types import MEMORY_TYPES, MemoryType

__all__ = [
    "FrontMatterError",
    "ParsedDocument",
    "checked_text",
    "front_matter",
    "name_in_any_case",
    "parse_document",
    "parser_loaded",
    "render_document",
    "safe_file_stem",
]

_FENCE = re.compile(r"^---[ \t]*$")
_KEY_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:[ \t]?(.*)$")
_MAX_STEM = 64
#: Names an ambiguity error lists at most.
_SHOWN_CANDIDATES = 5


class FrontMatterError(ValueError):
    """The text has no usable front matter; the message is the reason a file is skipped."""


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """The fields of a topic file, before it is tied to a path."""

    name: str
    description: str
    type: MemoryType
    body: str
    sources: tuple[Source, ...] = ()

    @property
    def origin(self) -> str:
        return origin_label(self.sources)

    @property
    def quarantined(self) -> bool:
        return is_quarantined(self.sources)


def _split(text: str) -> tuple[list[str], str]:
    """The front matter lines and the body, or :class:`FrontMatterError`."""
    lines = text.splitlines(keepends=True)
    if not lines or not _FENCE.match(lines[0].rstrip("\r\n")):
        raise FrontMatterError("no front matter block (the file must start with a --- line)")
    for index in range(1, len(lines)):
        if _FENCE.match(lines[index].rstrip("\r\n")):
            header = [line.rstrip("\r\n") for line in lines[1:index]]
            return header, "".join(lines[index + 1 :])
    raise FrontMatterError("front matter block is not closed by a --- line")


def parser_loaded() -> bool:
    """Whether parsing a file costs only the parse: the YAML parser is imported (its
    import takes too long for an event loop)."""
    return "yaml" in sys.modules


def _load_yaml(header: list[str]) -> Mapping[str, Any] | None:
    """The header as a YAML mapping, or ``None`` when YAML rejects it."""
    import yaml  # imported here: a warm scan never parses, so never pays for it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load("\n".join(header), Loader=loader)
    except yaml.YAMLError:
        return None
    if not isinstance(data, Mapping):
        return None
    return cast("Mapping[str, Any]", data)


def _load_key_values(header: list[str]) -> dict[str, str]:
    """The reference agent's fallback: ``key: value`` per line, the value taken verbatim."""
    values: dict[str, str] = {}
    for line in header:
        match = _KEY_VALUE.match(line)
        if match:
            value = match.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            values[match.group(1)] = value
    return values


def _text(value: Any) -> str:
    if value is None:
        return ""
    return " ".join(str(value).split())


def parse_document(text: str, *, default_name: str) -> ParsedDocument:
    """Parse a topic file's text; :class:`FrontMatterError` says why it is unusable.

    A missing ``name`` falls back to ``default_name`` (the file's stem), a missing
    ``description`` to ""; a missing or unknown ``type`` makes the file unusable.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    header, body = _split(text)
    fields: Mapping[str, Any] | None = _load_yaml(header)
    if fields is None:
        fields = _load_key_values(header)
    kind = _text(fields.get("type"))
    if not kind:
        raise FrontMatterError("front matter has no type")
    if kind not in MEMORY_TYPES:
        raise FrontMatterError(f"unknown type {kind!r} (expected one of {', '.join(MEMORY_TYPES)})")
    return ParsedDocument(
        name=_text(fields.get("name")) or default_name,
        description=_text(fields.get("description")),
        type=kind,
        body=body.strip("\n"),
        sources=parse_provenance(fields.get(PROVENANCE_KEY)),
    )


def front_matter(text: str) -> dict[str, Any]:
    """Every key of a topic file's front matter (``{}`` when it has none usable)."""
    try:
        header, _body = _split(text.lstrip("\ufeff"))
    except FrontMatterError:
        return {}
    fields = _load_yaml(header)
    return dict(fields) if fields is not None else dict(_load_key_values(header))


def render_document(
    *,
    name: str,
    description: str,
    type: MemoryType,
    body: str,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """A topic file's text: YAML-safe front matter, then the body.

    ``extra`` adds front matter keys after the three standard ones (extraction's
    ``source_offsets``); the scan ignores keys it does not know.
    """
    import yaml

    fields: dict[str, Any] = {"name": name, "description": description, "type": type}
    # Extra keys (extraction's source_offsets ...) come after, never replacing these.
    fields.update({k: v for k, v in (extra or {}).items() if k not in fields})
    header = yaml.safe_dump(
        fields,
        sort_keys=False,
        allow_unicode=True,
        width=1_000_000,
    )
    body = body.strip("\n")
    return f"---\n{header}---\n{body}\n" if body else f"---\n{header}---\n"


def checked_text(what: str, value: str) -> str:
    """``value``, when it is text UTF-8 can hold; else :class:`MemoryStoreError` naming
    the first lone surrogate (a half of a UTF-16 pair, left by a bad decode upstream),
    which no store can write."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        raise MemoryStoreError(
            f"{what} holds a lone surrogate (U+{code:04X} at character {exc.start}), "
            "which is not text a memory can store"
        ) from None
    return value


def checked_fields(name: str, description: str, type: str) -> tuple[str, str, MemoryType]:
    """A memory's name and description on one line each, and its type, as every store
    saves them; :class:`MemoryStoreError` for an empty name, a name over
    :data:`MAX_NAME_BYTES` in UTF-8, a lone surrogate or an unknown type."""
    name = checked_text("a memory name", " ".join(name.split()))
    description = checked_text("a memory description", " ".join(description.split()))
    if not name:
        raise MemoryStoreError("a memory needs a non-empty name")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise MemoryStoreError(
            f"a memory name is at most {MAX_NAME_BYTES:,} bytes in UTF-8; this one is {size:,}"
        )
    if type not in MEMORY_TYPES:
        raise MemoryStoreError(
            f"invalid memory type {type!r}: expected one of {', '.join(MEMORY_TYPES)}"
        )
    return name, description, type


def name_in_any_case(key: str, names: Iterable[str], *, where: str) -> str | None:
    """The one name among ``names`` that is ``key`` in another letter case (``casefold``),
    ``None`` when none is; several are a :class:`MemoryStoreError` listing them. Every
    store looks keys up this way after the exact path and the exact name."""
    folded = key.casefold()
    found = [name for name in names if name.casefold() == folded]
    if len(found) <= 1:
        return found[0] if found else None
    shown = ", ".join(repr(name) for name in found[:_SHOWN_CANDIDATES])
    more = f" and {len(found) - _SHOWN_CANDIDATES} more" if len(found) > _SHOWN_CANDIDATES else ""
    raise MemoryStoreError(
        f"memory name {key!r} is ambiguous in {where}: {len(found)} memories have it "
        f"in another case ({shown}{more}); give the exact name"
    )


def safe_file_stem(name: str) -> str:
    """A file name stem for a memory name: lower-case ASCII words joined by ``-``.

    Never empty, never a path: anything but letters and digits becomes a separator
    (so ``..`` and ``/`` cannot escape the folder). A name with no ASCII letter or
    digit gets a stable ``memory-<hash>`` stem.
    """
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    stem = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:_MAX_STEM].strip("-")
    if not stem:
        digest = hashlib.sha1(name.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
        stem = f"memory-{digest}"
    return stem
